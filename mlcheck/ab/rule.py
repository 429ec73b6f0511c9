"""The paired A/B verdict: is image B slower than image A, from rounds run on the same nodes?

Each round runs one short step of each image back to back (A B, B A, A B ...), so what drifts
slowly across the job (the node's clocks, other jobs on the fabric) is common to a round's two
steps and cancels in its ratio B/A of the main rate. The round is the unit, as Kalibera and
Jones build intervals from whole runs: the estimate is the mean of log(B/A) over rounds (the
geometric mean of B/A), its interval a t-interval over rounds (rounds - 1 degrees of freedom).

Three answers with a stated meaning, as Chromium's Pinpoint answers DIFFERENT / SAME / UNKNOWN:
`slower` = the interval below 1 and the estimate past the threshold (`faster` the mirror);
`same` = the interval inside 1 +- threshold; `not slower` = the interval rules out a loss of the
threshold's size, but not a gain (the knob asks "is B slower?": the check passes); otherwise
`inconclusive`, with the rounds that would decide at the spread measured. An image slow in some
rounds (more rounds far below the rest than far above it: past twice the threshold and OUTLIER
robust sds from the median) is never `same` nor `not slower`: slower for the users who land on those runs.
The reason names such rounds by number and the side that ran first in each, and promises no
rounds where they widen the interval: a machine event hits one round, an image's loss recurs.

The job runs until decided: the rule looks after 6 and 12 rounds and after the most the job may
run (`ab_rounds`), and stops at the first look that finds B `slower`; a passing verdict waits for
the last look, so that a slowdown in some runs has every round to show in. The chance of a false `slower` is
split across the looks in proportion to their rounds, so that an image against itself is called
`slower` at most FALSE_SLOWER of the time over all of them (a union bound; measured rates:
docs/ab-images.md). The job script calls look.py between rounds; the check's verdict walks the
same looks over the rounds read back, so the two always agree.
"""

import dataclasses
import functools
import math
import statistics

from mlcheck.ab import rounds

MIN_ROUNDS = 5
FIRST_LOOKS = (6, 12)         # then the most the job may run
FALSE_SLOWER = 0.05           # the most often an unchanged image is called slower, all looks together
POWER = 0.9                   # of the rounds advised: an unchanged image decided this often
OUTLIER = 4                   # robust sds (1.4826 MAD) from the median: a round far from the rest
MACHINE_EVENT = ('one such round alone may be a machine event (other work starting mid-round slows the '
                 'side that ran second): rerun; such a round that recurs with the same image is the image')
PLAUSIBLE = 20                # a round's B/A past 1/20-20 is a reading in other units, not an image
PASSING = ('same', 'faster', 'not slower')
VERDICTS = ('slower', 'same', 'faster', 'not slower', 'inconclusive')


def looks(most):
    """The rounds after which the rule looks: those of FIRST_LOOKS below `most`, and `most`."""
    return tuple(n for n in FIRST_LOOKS if n < most) + (most,)


def split(looks_, false_slower=FALSE_SLOWER):
    """Each look's share of `false_slower`, in proportion to its rounds (6, 12, 24: 0.71, 1.43,
    2.86 %): an early look with few rounds decides only a large change anyway."""
    return tuple(false_slower * n / sum(looks_) for n in looks_)


@functools.lru_cache(maxsize=None)     # a few looks' quantiles, asked for again and again
def t_quantile(p, df):
    from scipy.stats import t      # here: the job's look imports no more than it needs
    return float(t.ppf(p, df))


def z_quantile(p):
    return statistics.NormalDist().inv_cdf(p)


def rounds_to_decide(sd, threshold, alpha):
    """Rounds whose t-interval (one side at `alpha`) would rule out a loss of `threshold` for an
    unchanged image POWER of the time, at a spread `sd` of log(B/A): n = (z_a + z_b)^2 sd^2 / d^2,
    with z_a and z_b the t quantiles of n - 1 degrees of freedom (the spread is itself estimated
    from the rounds: the normal's quantiles promised 90 % where 87-89 % were decided)."""
    d = -math.log(1 - threshold)

    def enough(n):
        return (t_quantile(1 - alpha, n - 1) + t_quantile(POWER, n - 1)) ** 2 * sd ** 2 / d ** 2 <= n
    n = max(MIN_ROUNDS, math.ceil((z_quantile(1 - alpha) + z_quantile(POWER)) ** 2 * sd ** 2 / d ** 2))
    while not enough(n):
        n += 1
    return n


def supported_threshold(sd, rounds, alpha):
    """The smallest threshold that `rounds` rounds at a spread `sd` of log(B/A) decide for an
    unchanged image POWER of the time: the inverse of rounds_to_decide."""
    return 1 - math.exp(-(t_quantile(1 - alpha, rounds - 1) + t_quantile(POWER, rounds - 1)) * sd / math.sqrt(rounds))


def control_line(verdict, most, ceiling, false_slower=FALSE_SLOWER):
    """What an A=A control's Verdict says of the partition: the threshold that `most` rounds
    decide at the spread measured, and where that passes `ceiling`, the rounds that would."""
    if verdict.sd is None:      # a failed step, or fewer than 2 rounds: nothing measured
        return f'A=A control: no spread measured: {verdict.reason}'
    alpha = split(looks(most), false_slower)[-1]
    supported = supported_threshold(verdict.sd, most, alpha)
    line = (f'A=A control: log(B/A) spread {verdict.sd:.3f} (sd) over {verdict.rounds} rounds: with up '
            f'to {most} rounds this partition supports threshold {supported:.3f} (an unchanged image '
            f'decided about {POWER:.0%} of the time)')
    if supported > ceiling:
        line += (f'; past the ceiling {ceiling:g}: with {most} rounds this partition cannot judge at '
                 f'{ceiling:g}, about {rounds_to_decide(verdict.sd, ceiling, alpha)} rounds would')
    return line


@dataclasses.dataclass(frozen=True)
class Verdict:
    verdict: str            # one of VERDICTS
    reason: str             # one line, naming both images and the ratio
    ratio: float = None     # geometric mean of the rounds' B/A
    low: float = None       # its t-interval at the look's confidence
    high: float = None
    rounds: int = 0         # the rounds judged (the look that decided, or the last reached)
    sd: float = None        # standard deviation of log(B/A) over those rounds
    slow_rounds: int = 0    # rounds below 1 - 2 x threshold
    far_slow: tuple = ()    # the rounds (1, 2, ...) far below the rest, where more than far above
    looks: tuple = dataclasses.field(default=(), compare=False)     # the rounds of every look taken
    figures: str = dataclasses.field(default='', compare=False)     # the reason's words before the verdict

    @property
    def fails(self):
        return self.verdict not in PASSING

    @property
    def decided(self):
        return self.verdict != 'inconclusive'


def rate_problems(a_rates, b_rates):
    """A line for each rate that is not a finite number above 0 (its ratio has no logarithm)."""
    return [f'round {round_} {side}: rate {rate!r} is not a number above 0'
            for round_, pair in enumerate(zip(a_rates, b_rates), 1) for side, rate in zip('AB', pair)
            if isinstance(rate, bool) or not isinstance(rate, (int, float))
            or not (math.isfinite(rate) and rate > 0)]


def judge(a_rates, b_rates, threshold, names=('A', 'B'), failed=(), most=None,
          false_slower=FALSE_SLOWER, going_on=False):
    """The Verdict of rounds whose main rates (higher is faster) were `a_rates[i]`, `b_rates[i]`,
    of a job that may run `most` rounds (default: the rounds given): the first look that decides,
    or the last look reached. `failed`: one line per failed step; `names`: the two images;
    `going_on`: the job's own look between rounds (the job runs on unless B is `slower`)."""
    a, b = names
    n = len(a_rates)

    def refused(why):
        return Verdict('inconclusive', f'{b} against {a}: inconclusive, {why}', rounds=n)
    if len(a_rates) != len(b_rates):
        return refused(f'{len(a_rates)} rates of A against {len(b_rates)} of B')
    failed = [*failed, *rate_problems(a_rates, b_rates)]
    if failed:
        return refused(f'{len(failed)} step(s) failed: {"; ".join(failed)}')
    ratios = [y / x for x, y in zip(a_rates, b_rates)]
    wild = [f'round {i} B/A {r:.4g}' for i, r in enumerate(ratios, 1) if not 1 / PLAUSIBLE <= r <= PLAUSIBLE]
    if wild:
        return refused(f'{", ".join(wild[:3])}{" ..." if len(wild) > 3 else ""}: beyond the plausible '
                       f'1/{PLAUSIBLE:g}-{PLAUSIBLE:g} of one image against another (its rates in other units?)')
    most = most or n
    plan = looks(most)
    alphas = dict(zip(plan, split(plan, false_slower)))
    reached = [look for look in plan if look <= n]
    if not reached or reached[-1] < MIN_ROUNDS:
        fewer = f'{n} round(s) completed, fewer than {max(MIN_ROUNDS, plan[0])}'
        if n < 2:
            return refused(f'{fewer}: no spread to size the rounds by')
        # the figures of the rounds run, at the last look's share, and the rounds that would decide
        # (the guard's robust spread of so few rounds means nothing: no round is far from it)
        verdict = dataclasses.replace(judge_look(ratios, threshold, alphas[most], names, (n,)), far_slow=())
        return inconclusive(verdict, f'{verdict.figures}: inconclusive, {fewer}', threshold, most, alphas[most])
    for look in reached:
        verdict = judge_look(ratios[:look], threshold, alphas[look], names, tuple(reached))
        # an early look stops the job to fail it, never to pass it: a slowdown in one run of
        # four misses the first 6 rounds 18 % of the time, all 30 rounds 0.02 %
        if verdict.verdict == 'slower' or (look == most and verdict.decided):
            return verdict
    if going_on:
        return inconclusive(verdict, f'{verdict.figures}: inconclusive, undecided after {n} of up to '
                                     f'{most} rounds; the job goes on')
    if n > reached[-1]:     # the job ended between looks (its time limit): judge all it ran
        verdict = judge_look(ratios[:most], threshold, alphas[most], names, (*reached, min(n, most)))
        if verdict.verdict == 'slower':
            return verdict
    if min(n, most) < most:
        said = f'{verdict.figures}: inconclusive, the job ended after {n} of its {most} rounds'
    else:
        said = verdict.reason
    return inconclusive(verdict, said, threshold, most, alphas[most], ratios[:verdict.rounds])


def inconclusive(verdict, said, threshold=None, most=None, alpha=None, ratios=()):
    """An inconclusive Verdict with the figures of `verdict` and the reason `said`, and, given
    the threshold, the most rounds, the last look's share and the rounds' `ratios`, what would
    decide: the rounds at the spread measured, unless rounds far below the rest widen it, or one
    round below twice the threshold alone puts them past the most (more rounds would not help
    if it recurs, and the guard would block them: the reason names the round instead)."""
    if threshold is not None and not verdict.far_slow:
        needed = rounds_to_decide(verdict.sd, threshold, alpha)
        lowest = min(range(len(ratios)), key=ratios.__getitem__) if len(ratios) > 2 else None
        if needed > most and lowest is not None and ratios[lowest] < 1 - 2 * threshold and rounds_to_decide(
                statistics.stdev(math.log(r) for i, r in enumerate(ratios) if i != lowest), threshold, alpha) <= most:
            said += (f'; one round alone widens the interval past deciding, {far_rounds(ratios, [lowest + 1])}: '
                     f'without it {most} rounds would decide at this spread; {MACHINE_EVENT}')
        else:
            said += (f'; about {needed} rounds would decide at this spread (-S ab_rounds={needed})' if needed > most
                     else f'; {most} rounds decide at this spread {POWER:.0%} of the time'
                     + ('; these did not' if verdict.rounds >= most else ''))
    return Verdict('inconclusive', said, **{k: getattr(verdict, k) for k in (
        'ratio', 'low', 'high', 'rounds', 'sd', 'slow_rounds', 'far_slow', 'looks', 'figures')})


def far_rounds(ratios, numbers):
    """'round 13 (B/A 0.674, A ran first)' or 'rounds 1 (...), 2 (...)': the side that ran
    second takes a machine event that begins mid-round."""
    said = ', '.join(f'{r} (B/A {ratios[r - 1]:.3f}, {rounds.first(r)} ran first)' for r in numbers)
    return f'round{"s" if len(numbers) > 1 else ""} {said}'


def judge_look(ratios, threshold, alpha, names=('A', 'B'), looks_=()):
    """The Verdict of one look at `ratios` (B/A of each round), its interval two-sided with
    `alpha` on each side (the look's share of the false `slower`)."""
    a, b = names
    n = len(ratios)
    logs = [math.log(r) for r in ratios]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = t_quantile(1 - alpha, n - 1) * sd / math.sqrt(n)
    ratio, low, high = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
    slow = sum(r < 1 - 2 * threshold for r in ratios)
    fast = sum(r > 1 + 2 * threshold for r in ratios)
    # rounds far from the rest: past twice the threshold and OUTLIER robust sds from the median
    centre = statistics.median(logs)
    spread = 1.4826 * statistics.median(abs(x - centre) for x in logs)
    far_slow = [i for i, x in enumerate(logs, 1) if x < min(math.log(1 - 2 * threshold), centre - OUTLIER * spread)]
    far_fast = sum(x > max(math.log(1 + 2 * threshold), centre + OUTLIER * spread) for x in logs)
    # an image slow in some rounds, far from the rest, more often than fast in others: slow
    # for the users who land on those runs (an unchanged image's noise puts rounds past twice
    # the threshold on both sides alike, and seldom far from the rest)
    slow_in_some = len(far_slow) > far_fast
    said = (f'{b} against {a}: B/A {ratio:.3f} [{low:.3f}, {high:.3f}] over {n} rounds '
            f'({1 - 2 * alpha:.1%} interval), threshold {threshold:.3f}')
    rounds_past = (f'{slow} of {n} rounds below {1 - 2 * threshold:.3f} (twice the threshold), '
                   f'{fast} above {1 + 2 * threshold:.3f}')
    far = ''
    if slow_in_some:
        far = (f'{len(far_slow)} of {n} far below the rest: {far_rounds(ratios, far_slow)} (below '
               f'{1 - 2 * threshold:.3f} and {OUTLIER} robust sds under the median), {far_fast} far above')
        if far_slow == list(range(1, len(far_slow) + 1)):
            far += '; the first rounds: a cold start (page cache, a first load) that the warm-up step did not take?'
    found = dict(ratio=ratio, low=low, high=high, rounds=n, sd=sd, slow_rounds=slow, looks=looks_, figures=said,
                 far_slow=tuple(far_slow) if slow_in_some else ())
    if high < 1 and ratio < 1 - threshold:
        return Verdict('slower', f'{said}: slower; {rounds_past}' + (f'; {far}' if far else ''), **found)
    if low > 1 and ratio > 1 + threshold:
        return Verdict('faster', f'{said}: faster', **found)
    if low > 1 - threshold and not slow_in_some:
        if high < 1 + threshold:
            return Verdict('same', f'{said}: same, a change of the threshold ruled out', **found)
        return Verdict('not slower', f'{said}: not slower, a loss of the threshold ruled out '
                       '(whether faster, cannot tell)', **found)
    if low > 1 - threshold:
        why = f'slow in some rounds, never same: {far}'
    elif high < 1:
        why = 'B is slower than A (the interval below 1), by more than the threshold or by less: cannot tell'
    else:
        why = 'the interval reaches past the threshold'
    if slow_in_some:
        if not why.startswith('slow in some'):
            why += f'; {far}'
        why += f'; {MACHINE_EVENT}'
    return Verdict('inconclusive', f'{said}: inconclusive, {why}', **found)
