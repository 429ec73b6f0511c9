"""What one record of a node sweep says: the node it ran on (a host name), its test without
ReFrame's own parameters, the run it belongs to, and where and when it was seen (a Finding, the
provenance of a Slurm Reason). mlcheck.history.nodes judges them; multi_node reads the runs over
several nodes.
"""

import functools
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timezone

from mlcheck.errors import InputError
from mlcheck.history import hostlist

# ReFrame's own parameters (--distribute's .nid and .part, --repeat's .repeat_no) in a test name
INTERNAL_PARAMETER = re.compile(r'\s+%\.\w+=\S+')
NODE_PARAMETER = re.compile(r'%\.nid=(\S+)')
UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')


@dataclass(frozen=True)
class Figure:
    """One figure of one check, compared like with like across nodes."""
    partition: str
    test: str             # the test's name without ReFrame's own parameters
    settings: str
    var: str
    unit: str

    @property
    def label(self):
        return f'{short(self.test)} {self.var}'


@dataclass(frozen=True)
class Finding:
    """Why a node is drained, with where and when it was seen: the Slurm Reason's provenance."""
    said: str
    source: str           # the session UUID or the perf log
    ended: float          # when the run ended, Unix seconds

    @property
    def provenance(self):
        where = f'session {self.source}' if UUID.fullmatch(self.source or '') else \
            f'perf log {self.source.rsplit("/", 1)[-1]}' if self.source else 'no session'
        return f'{where}, ended {stamp(self.ended)}'

    def __str__(self):
        return f'{self.said} [{self.provenance}]'


def stamp(unix):
    """A run's end as the scontrol Reason and the output say it, in UTC."""
    if not unix:
        return 'at an unrecorded time'
    return datetime.fromtimestamp(unix, timezone.utc).strftime('%Y-%m-%dT%H:%MZ')


def where(sample):
    """Where a record came from, for a one-line refusal."""
    return f'{sample.source or "a record"}: test {sample.name[:80]!r}'


def readable(samples):
    """(the records whose node list and %.nid read as host names, the number left out): each
    one left out is named on stderr, as an unreadable perf log line is, so that one bad record
    (`n[1][1]...`, a range past its digits) does not stop the sweep of every other node."""
    kept = []
    for s in samples:
        try:
            node_of(s)
            if s.nodelist:
                nodes_of(s)
        except InputError as err:
            print(f'{err}; record left out', file=sys.stderr)
        else:
            kept.append(s)
    return kept, len(samples) - len(kept)


def node_of(sample):
    """The node a record ran on, or None when it does not name exactly one; an InputError for a
    node that is not a host name."""
    param = NODE_PARAMETER.search(sample.name)
    if param:
        node = hostlist.checked(param.group(1), where(sample) + ' (its %.nid)')
        if sample.nodelist and node not in nodes_of(sample):
            # a job pinned to its node runs nowhere else: which of them it ran on is unknown
            # (issue 48's third security pass, N2y: the %.nid node was drained, the listed resumed)
            raise InputError(f'{where(sample)}: its %.nid {node!r} is not in its job_nodelist '
                             f'{sample.nodelist[:80]!r}: which node ran it is unknown')
        return node
    if sample.num_nodes != 1 or not sample.nodelist:
        return None
    names = nodes_of(sample)
    return names[0] if len(names) == 1 else None


def job_size(sample):
    """(limit, whose) for hostlist.expand of a record's node list: its job's node count."""
    count = sample.num_nodes
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return count, f" (its job's num_nodes is {count})"
    return hostlist.MAX_HOSTS, ''


def nodes_of(sample):
    """The nodes of a record's job, in its node list's order (each a host name, or InputError)."""
    text = sample.nodelist
    if text != text.strip():     # refused, never trimmed: Slurm would not read it as written
        raise InputError(f'{where(sample)}: its node list {text!r} has space around it: refused')
    if text[:2] in ("['", '["'):      # a list as Python prints it: ['nid001', 'nid002']
        text = ','.join(name.strip("'\" ") for name in text[1:-1].split(','))
    if hostlist.HOST_NAME.fullmatch(text):
        return [text]        # the common case, without parsing a host list
    try:
        return hostlist.expand(text, *job_size(sample))
    except InputError as e:
        raise InputError(f'{where(sample)}: its node list: {e}') from None


@functools.lru_cache(maxsize=4096)
def test_name(name):
    return INTERNAL_PARAMETER.sub('', name)


def short(test):
    """A test's name short enough for a Slurm Reason: 'MNISTDistributedCheck[image=host]'
    (a sweep's num_nodes is 1, said once)."""
    name, *params = [word for word in test.split() if word != '%num_nodes=1']
    return f"{name}[{','.join(p.lstrip('%') for p in params)}]" if params else name


def figure_of(sample):
    return Figure(sample.partition, test_name(sample.name), sample.settings, sample.var,
                  sample.unit)


def run_of(sample):
    """What one run of a test is on a node: its latest run counts."""
    return sample.partition, test_name(sample.name), sample.settings
