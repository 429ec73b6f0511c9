"""Saved job outputs (tests/data) and what the tests do with them: read one, edit its fact lines
into a broken case, judge it as a check's sanity would.

The fact lines are the training programs' `MLCHECK {json}` lines (mlcheck/contract.py), each
behind srun's label; an edited fact is written back as the programs write it (format_fact)."""

import json
import os
import re

from conftest import DATA
from mlcheck.contract import FACT_PREFIX, format_fact
from mlcheck.judging import output, sanity

# the saved MNIST runs that several modules break (described in tests/test_sanity.py)
LUMI_OUT = 'lumi_standard-g_2nodes.out'
SIM_OUT = 'sim_cluster_2nodes.out'


def saved(name):
    """The text of tests/data/`name`."""
    with open(os.path.join(DATA, name)) as f:
        return f.read()


def saved_job(stem):
    """(stdout, stderr) of the saved job tests/data/`stem`.out and `stem`.err."""
    return saved(f'{stem}.out'), saved(f'{stem}.err')


def judged(site, stdout, stderr='', *, nodes=2, layout=None, program=None, **promises):
    """What a check finds in a job's output of `nodes` nodes launched on `site` (a PartitionSettings)
    with `layout` (the partition's own for `nodes` unless given), the training program promising
    `promises` (sanity.Expectations.for_run's keywords: min_accuracy, epochs, fault...): sanity's
    problems, then, as mlcheck.harness.launch_check judges, `program(run, expect)`'s when every rank finished."""
    expect = sanity.Expectations.for_run(site, layout or site.layout(nodes), **promises)
    run = output.parse(stdout, stderr=stderr)
    found = sanity.problems(run, expect)
    if program and set(run.by_rank('done')) == set(range(expect.world_size)):
        found += program(run, expect)
    return found


def fact_line(fact, task=None, width=1):
    """A fact line as a program prints it, labelled with `task` as srun --label does (right-aligned
    to `width`), unlabelled if None."""
    label = '' if task is None else f'{task:>{width}}: '
    return f'{label}{format_fact(**fact)}\n'


def with_facts(text, event, *, rank=None, change=None, **values):
    """`text` with its fact lines of `event` edited, those of `rank` only (a rank or several) if
    given: each updated with `values`, then replaced by `change(fact)` if given (None drops the
    line). Every other line, and each line's label, stays as it was."""
    ranks = None if rank is None else {rank} if isinstance(rank, int) else set(rank)
    lines = []
    for line in text.splitlines(keepends=True):
        label, prefix, rest = line.partition(FACT_PREFIX)
        try:
            fact = json.loads(rest) if prefix else None
        except ValueError:      # a garbled fact line: not one to edit
            fact = None
        chosen = isinstance(fact, dict) and fact.get('event') == event
        if chosen and (ranks is None or fact.get('rank') in ranks):
            fact = {**fact, **values}
            if change:
                fact = change(fact)
            if fact is None:
                continue
            end = '\n' if line.endswith('\n') else ''
            line = f'{label}{format_fact(**fact)}{end}'
        lines.append(line)
    return ''.join(lines)


def without_facts(text, event, *, rank=None):
    """`text` without its fact lines of `event` (of `rank` only, a rank or several, if given)."""
    return with_facts(text, event, rank=rank, change=lambda fact: None)


def without_lines(text, pattern):
    """`text` without the lines in which the regular expression `pattern` is found."""
    return ''.join(line for line in text.splitlines(keepends=True) if not re.search(pattern, line))
