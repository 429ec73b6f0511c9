"""The A/B job: rounds of one short step of each of two images on the job's nodes, in a balanced
order (A B, B A, A B, ...: a drift within a round falls on both sides alike), each step's
output and exit status in files of its own, read back as one RunOutput per step.

A is the image compared with (`-S compare_with`, the current one), B the test's own image (the
candidate): B/A below 1 is B slower.
"""

import math
import os
import re
from dataclasses import dataclass

from mlcheck.judging import output

A, B = 'A', 'B'
COMPARISONS = ('compare_with', 'compare_layers')     # the knobs that make a job A/B rounds
# what A/B runs of 42e5ead recorded in run_settings beside the comparison, though neither is an
# input of the figures: the most rounds, and the verdict (an outcome); keys leave them out
NOT_INPUTS = ('ab_rounds', 'ab_verdict')
DIR = 'ab'                      # in the stage directory
SRUN = 'mlcheck_ab_srun'        # the job's own launcher line, wrapped as a shell function
STEP_FUNCTION = {A: 'mlcheck_ab_step_a', B: 'mlcheck_ab_step_b'}
RUN = 'mlcheck_ab_run'          # runs one step of a side into its files
ROUND, INDEX = 'mlcheck_ab_round', 'mlcheck_ab_index'     # the job's shell variables
WARM_UP = 'warm-up'             # ab/warm-up-A|B.out|.err|.status: each side's untimed first step


def is_ab(settings):
    """Whether recorded settings (`name=value;...`) are those of an A/B run."""
    return any(item.partition('=')[0] in COMPARISONS for item in settings.split(';'))


def first(round_):
    """The side that runs first in round `round_` (1, 2, ...): A in odd rounds, B in even ones."""
    return A if round_ % 2 else B


def order(rounds):
    """[(round, side)] of `rounds` rounds: A B, then B A, alternately."""
    return [(r, side) for r in range(1, rounds + 1) for side in ((A, B) if first(r) == A else (B, A))]


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


def round_lines(most, looks, look):
    """The job script's lines running the rounds, up to `most`, each step writing its output and
    exit status, and `look` (a command taking the round just run, printing `stop` once the rule
    decides) after the rounds of `looks`: the job stops as soon as it is decided. Before round 1,
    one untimed step of each side (WARM_UP, never judged): a cold image's first load (page
    cache, first-time imports) is then no round's cost."""
    path = f'{DIR}/r$(printf %02d "${ROUND}")'

    def steps(sides):
        return '; '.join(f'{RUN} {side} $(({INDEX} + {i})) "{path}-{side}"' for i, side in enumerate(sides))
    return [
        f'{RUN}() {{    # $1: A or B, $2: the step\'s index (its port), $3: its files\' stem',
        f'    if [ "$1" = {A} ]; then {STEP_FUNCTION[A]} "$2"; else {STEP_FUNCTION[B]} "$2"; fi >"$3.out" 2>"$3.err"',
        '    echo $? >"$3.status"',
        '}',
        f'mkdir -p {DIR}',
        # the warm-up's ports follow the rounds' (2 x most steps): none lingers into a round's
        '; '.join(f'{RUN} {side} {2 * most + i} {DIR}/{WARM_UP}-{side}' for i, side in enumerate((A, B))),
        f'for (({ROUND} = 1; {ROUND} <= {most}; {ROUND}++)); do',
        f'    {INDEX}=$((2 * {ROUND} - 2))',
        # the balanced order of order(): A B in odd rounds, B A in even ones
        f'    if (({ROUND} % 2)); then {steps((A, B))}; else {steps((B, A))}; fi',
        f'    case " {" ".join(map(str, looks))} " in',
        f'        *" ${ROUND} "*) [ "$({look} ${ROUND} 2>>{DIR}/looks.err)" = stop ] && break ;;',
        '    esac',
        'done']


def rounds_run(stagedir):
    """How many rounds the job began: it stops early once decided (or at its time limit)."""
    round_ = 0
    while any(os.path.isfile(os.path.join(stagedir, stem(round_ + 1, side) + '.out')) for side in (A, B)):
        round_ += 1
    return round_


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


def warm_up_problems(stagedir, names):
    """A line for each side's warm-up step that failed (`names`: {side: image name}): never
    judged for its rate, but an image whose first step fails has failed. None for a job of
    before the warm-up step (no files)."""
    found = []
    for side in (A, B):
        path = os.path.join(stagedir, DIR, f'{WARM_UP}-{side}')
        status = open(path + '.status').read().strip() if os.path.isfile(path + '.status') else None
        if status is None and os.path.isfile(path + '.out'):
            found.append(f'warm-up {names[side]}: did not finish (no exit status)')
        elif status not in (None, '0'):
            found.append(f'warm-up {names[side]}: exit status {status or "(empty)"}')
    return found


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



def judged_rates(steps, fact):
    """(A rates, B rates, failed steps' lines) of `steps`, the rate of a step the result fact
    `fact` of its output: what the rule judges, in the job's looks and in the check's verdict."""
    def rate(step):     # a rate of 0 (or less), NaN or infinite is no rate: its ratio has no logarithm
        value = step.run.result_value(fact)
        return value if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None
    failed = [problem for problem in map(step_problem, steps) if problem]
    failed += [f'{step.name}: no finite {fact} above 0 in its output' for step in steps
               if step.status == 0 and rate(step) is None]
    return (*paired_rates(steps, rate), failed)
