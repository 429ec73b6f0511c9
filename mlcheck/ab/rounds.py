"""The A/B job: rounds of one short step of each of two images on the job's nodes, in a balanced
order (A B, B A, A B, ...: a drift within a round falls on both sides alike), each step's
output and exit status in files of its own, read back as one RunOutput per step.

A is the image compared with (`-S compare_with`, the current one), B the test's own image (the
candidate): B/A below 1 is B slower.
"""

import os
import re
from dataclasses import dataclass

from mlcheck.judging import output

A, B = 'A', 'B'
DIR = 'ab'                      # in the stage directory
SRUN = 'mlcheck_ab_srun'        # the job's own launcher line, wrapped as a shell function
STEP_FUNCTION = {A: 'mlcheck_ab_step_a', B: 'mlcheck_ab_step_b'}


def order(rounds):
    """[(round, side)] of `rounds` rounds: A B, then B A, alternately."""
    return [(r, side) for r in range(1, rounds + 1) for side in ((A, B) if r % 2 else (B, A))]


def stem(round_, side):
    return f'{DIR}/r{round_:02d}-{side}'


def launcher_function():
    """(lines before, the launcher's command, lines after): the job script's launcher line
    (ReFrame's srun with the job's options) becomes a function that runs its arguments."""
    return [f'{SRUN}() {{'], '"$@"', ['}']


def step_function(side, exports, command):
    """A function running one step of `side`'s image: its exports in a subshell, a port of the
    step's own ($1: the step's index; the previous step's port may linger), then the command."""
    body = [*exports, 'export MASTER_PORT=$(( MASTER_PORT + $1 + 1 ))', f'{SRUN} {command}']
    return [f'{STEP_FUNCTION[side]}() {{', '    (', *(f'    {line}' for line in body), '    )', '}']


def round_lines(rounds):
    """The job script's lines running every step, each writing its output and exit status."""
    lines = [f'mkdir -p {DIR}']
    for index, (round_, side) in enumerate(order(rounds)):
        path = stem(round_, side)
        lines.append(f'{STEP_FUNCTION[side]} {index} >{path}.out 2>{path}.err; echo $? >{path}.status')
    return lines


@dataclass(frozen=True)
class Step:
    round: int
    side: str
    image: str
    status: int         # the step's exit status; None: it never ran to the end (the job stopped)
    run: output.RunOutput

    @property
    def name(self):
        return f'round {self.round} {self.image}'


def read_steps(stagedir, rounds, names):
    """Step of every step of `rounds` rounds; `names`: {side: image name}."""
    steps = []
    for round_, side in order(rounds):
        path = os.path.join(stagedir, stem(round_, side))
        status = None
        if os.path.isfile(path + '.status'):
            text = open(path + '.status').read().strip()
            status = int(text) if re.fullmatch(r'\d+', text) else None
        run = output.read(path + '.out', path + '.err') if os.path.isfile(path + '.out') \
            else output.RunOutput()
        steps.append(Step(round_, side, names[side], status, run))
    return steps


def step_problem(step):
    """Why a step failed by its exit status alone, or ''."""
    if step.status is None:
        return f'{step.name}: did not finish (no exit status)'
    return f'{step.name}: exit status {step.status}' if step.status else ''


def paired_rates(steps, rate_of):
    """(A rates, B rates) of the rounds whose two steps both gave a rate (`rate_of(step)`)."""
    by_round = {}
    for step in steps:
        by_round.setdefault(step.round, {})[step.side] = rate_of(step)
    pairs = [(sides[A], sides[B]) for sides in by_round.values()
             if sides.get(A) is not None and sides.get(B) is not None]
    return [a for a, _ in pairs], [b for _, b in pairs]

