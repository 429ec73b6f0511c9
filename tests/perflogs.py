"""Perf logs for the tests: the real ones of a measurement under tests/data/perflogs, read by
session, and perf logs written from samples in ReFrame's format (config/base.py's handler).

data/perflogs/<campaign>.log are the perf logs of the measurement in docs/performance-history.md
(described in tests/test_history.py); <campaign>.sessions.json lists each campaign's sessions
(kind, throttle, UUID, start and end)."""

import dataclasses
import json
import os
from datetime import datetime, timezone

from conftest import DATA
from mlcheck.figures import stack
from mlcheck.figures.directions import LOWER, better
from mlcheck.history.selection import load, parse_selection
from mlcheck.harness.config import PERFLOG_HEADER

PERFLOGS = os.path.join(DATA, 'perflogs')
# the smallest slowdown flagged in every session of a campaign (docs/performance-history.md)
FLAGGED_THROTTLE = {'shared-load': 0.5, 'quiet': 0.1}


def sessions_of(campaign):
    with open(os.path.join(PERFLOGS, f'{campaign}.sessions.json')) as f:
        found = json.load(f)
    for session in found:
        session['log'] = os.path.join(PERFLOGS, f'{campaign}.log')
        session['campaign'] = campaign
    return found


SESSIONS = {campaign: sessions_of(campaign) for campaign in FLAGGED_THROTTLE}
CAMPAIGN = SESSIONS['shared-load'][0]['log']
BASELINE = next(s for s in SESSIONS['shared-load'] if s['kind'] == 'baseline')
SLOWED = next(s for s in SESSIONS['shared-load']
              if s['throttle'] == FLAGGED_THROTTLE['shared-load'])
UNCHANGED = [s for s in SESSIONS['shared-load'] if s['kind'] == 'unchanged']


def spec(session):
    """The selection of `session`: its perf log and period."""
    return f"{session['log']}@{session['start']}:{session['end']}"


def samples(session):
    return load(parse_selection(spec(session)))


def perflog_line(s):
    """The perf log line of the sample `s`."""
    when = datetime.fromtimestamp(s.time, timezone.utc).isoformat(timespec='seconds')
    ref = ['null' if v is None else str(v) for v in (s.reference or (None,) * 3)]
    return '|'.join([when, 'reframe 4.10.4', s.partition, s.name, s.image, str(s.num_nodes),
                     str(2 * s.num_nodes), s.jobid, s.nodelist, s.var, 'null' if s.value is None else str(s.value), s.unit, *ref,
                     s.result, s.settings, s.stack, 'null' if s.machine_speed is None else str(s.machine_speed)])


def write_perflog(path, found):
    """A perf log at `path` of the samples `found`; its path, as a selection."""
    path.write_text('\n'.join([PERFLOG_HEADER, *map(perflog_line, found)]) + '\n')
    return str(path)


def as_run(found, image, nodes, factor=1.0, settings='epochs=3', facts=None):
    """The samples as if run in `image` on `nodes` nodes, `factor` times as fast."""
    scale = lambda s: s.value / factor if better(s.var, s.unit) == LOWER else s.value * factor
    return [dataclasses.replace(s, name=f'MNISTDistributedCheck %image={image} %num_nodes={nodes}',
                                image=image, num_nodes=nodes, value=scale(s), settings=settings,
                                stack=stack.encode(facts or {}))
            for s in found]
