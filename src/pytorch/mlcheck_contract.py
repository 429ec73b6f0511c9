"""What the programs and the judging side (the mlcheck package) must agree on, in one place.

The programs import it as they import ddp_common (this directory is on their sys.path); mlcheck
loads this same file by path (mlcheck/contract.py), since inside the images mlcheck is not
installed and outside them src/ is not a package. Standard library only.

- facts: one line `MLCHECK {json}` each, with an "event" key
- faults (--fault, MLCHECK_FAULT): crash:RANK:EPOCH, hang-rendezvous:RANK, hang-collective:RANK:EPOCH
- waits: the launcher exports them (MLCHECK_*_TIMEOUT); the programs default to the same seconds
- cpulists: the kernel's list format of CPU (and GPU) ids, '0-3,8,10-11'
"""

import json
import re

FACT_PREFIX = 'MLCHECK '

# Every fact's event name: what a program emits and what the judging side reads is one of these
# (tests/test_contract.py scans both sides). The job script's own fact is `job`.
EVENTS = frozenset({
    'rendezvous',   # a rank arrived at the rendezvous (before it joins)
    'rank',         # it joined: rank, node, placement, affinity, its stack
    'settings',     # rank 0: the value of each knob it runs (program_knobs.py)
    'epoch',        # one timed epoch of one rank: samples, throughput, loss
    'solo',         # the rank timed alone (no communication)
    'loader',       # the data loader timed alone (no model)
    'speed',        # the fixed speed workload run in the job, beside the loader's timing
    'telemetry',    # what the rank's GPU and host did over the timed epochs
    'trace',        # where the profiler left the rank's trace
    'fault',        # a fault injected on purpose
    'done',         # the rank finished
    'result',       # the program's result (rank 0)
    'summary',      # the interconnect program's figures per operation
    'size',         # one message size of a collective
    'values',       # a collective's received values, checked
    'pair',         # one node pair's exchange
    'job',          # the job script's line: what the ranks cannot know
})

# The variables the launcher (mlcheck's job script) exports to the programs and their launch
# script (src/launch/rank-env.sh); a program reads only these.
VARIABLES = frozenset({
    'MLCHECK_FAULT', 'MLCHECK_RENDEZVOUS_TIMEOUT', 'MLCHECK_COLLECTIVE_TIMEOUT',
    'MLCHECK_TELEMETRY_INTERVAL', 'MLCHECK_PROFILE_STEPS', 'MLCHECK_VISIBLE_DEVICES_VARS',
    'MLCHECK_GPUS_PER_TASK', 'MLCHECK_MIOPEN_CACHE_ROOT', 'MLCHECK_RANK_PRELUDE',
    'MLCHECK_TRUSTS_DATASET_WRITERS',
})


def format_fact(event, **fields):
    """The line of one fact (without its newline)."""
    if event not in EVENTS:
        raise ValueError(f'{event!r} is not an event of the contract (mlcheck_contract.EVENTS)')
    return FACT_PREFIX + json.dumps({'event': event, **fields}, sort_keys=True)


# The fields after each fault's kind, in order.
FAULT_KINDS = {'crash': ('rank', 'epoch'), 'hang-rendezvous': ('rank',),
               'hang-collective': ('rank', 'epoch')}
FAULT_FORMS = 'crash:RANK:EPOCH, hang-rendezvous:RANK or hang-collective:RANK:EPOCH'
FAULT_VAR = 'MLCHECK_FAULT'
DIGITS = re.compile('[0-9]+')


class FaultError(ValueError):
    """A fault spec that is not in the grammar; the message says what is wrong."""


def parse_fault(spec):
    """'crash:1:2' -> ('crash', 1, 2); 'hang-rendezvous:3' -> ('hang-rendezvous', 3, None)."""
    kind, *values = spec.split(':')
    if kind not in FAULT_KINDS:
        raise FaultError(f'unknown fault {kind!r}; one of {", ".join(FAULT_KINDS)}')
    fields = FAULT_KINDS[kind]
    if len(values) != len(fields) or not all(DIGITS.fullmatch(v) for v in values):
        raise FaultError(f'{spec!r}: expected {":".join([kind, *map(str.upper, fields)])} '
                         f'with non-negative integers')
    rank, epoch = [*map(int, values), None][:2]
    return kind, rank, epoch


def format_fault(kind, rank, epoch=None):
    """The spec that parse_fault reads back as (kind, rank, epoch)."""
    return ':'.join(map(str, [kind, rank, epoch][:1 + len(FAULT_KINDS[kind])]))


# Seconds ranks wait for each other, unless the launcher exports others in these variables.
RENDEZVOUS_TIMEOUT = 180      # all ranks join the process group
COLLECTIVE_TIMEOUT = 300      # each collective (gloo's timeout; NCCL's watchdog)
RENDEZVOUS_TIMEOUT_VAR = 'MLCHECK_RENDEZVOUS_TIMEOUT'
COLLECTIVE_TIMEOUT_VAR = 'MLCHECK_COLLECTIVE_TIMEOUT'


def parse_cpulist(text):
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11] (the kernel's list format)."""
    cpus = []
    for span in text.strip().split(','):
        if span:
            first, _, last = span.partition('-')
            cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def spans(numbers):
    """[0, 1, 2, 5] -> ['0-2', '5']: runs of consecutive numbers, as the kernel lists CPUs."""
    found, start = [], None
    numbers = sorted(numbers)
    for i, number in enumerate(numbers):
        if start is None:
            start = number
        if i + 1 == len(numbers) or numbers[i + 1] != number + 1:
            found.append(str(start) if start == number else f'{start}-{number}')
            start = None
    return found


def format_cpulist(cpus):
    """[0, 1, 2, 5] -> '0-2,5' (the kernel's list format)."""
    return ','.join(spans(cpus))
