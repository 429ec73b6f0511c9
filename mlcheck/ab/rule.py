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
`inconclusive`, with the rounds that would decide at the spread measured and the estimate's
distance to the threshold. An image slow in some rounds (a round far below the rest: more than
twice the threshold and OUTLIER robust sds under the median, whatever rounds lie far above) is
never `same`, `not slower` nor `faster`: slower for the users who land on those runs. A `slower`
that rests on one such round alone, or on the first rounds alone (a cold start longer than the
warm-up step), is `inconclusive`, naming them. The reason names such rounds by number and the
side that ran first in each, and promises no rounds where rounds lie far from the rest on either
side: a machine event hits one round (the side that ran second), an image's loss recurs.

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
                 'side that ran second, here B): rerun; such a round that recurs with the same image is the image')
NOT_AN_EVENT = ('B ran first in it, so other work starting mid-round (which slows the side that ran second) '
                'does not explain it: rerun; such a round that recurs with the same image is the image')
RECUR = 'rerun; such rounds that recur with the same image are the image'
COLD_ROUNDS = 3               # the most first rounds a cold start longer than the warm-up step is looked for in
NEAR = 0.5                    # an estimate nearer the threshold than this share of it: no practical number of rounds decides
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


def rounds_to_decide(sd, threshold, alpha, distance=None):
    """Rounds whose t-interval (one side at `alpha`) would rule out a loss of `threshold` for an
    unchanged image POWER of the time, at a spread `sd` of log(B/A): n = (z_a + z_b)^2 sd^2 / d^2,
    with z_a and z_b the t quantiles of n - 1 degrees of freedom (the spread is itself estimated
    from the rounds: the normal's quantiles promised 90 % where 87-89 % were decided). `distance`:
    d, that of log(B/A)'s true mean from the boundary to reach (default: an unchanged image's,
    -log(1 - threshold))."""
    d = -math.log(1 - threshold) if distance is None else distance

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
    far_slow: tuple = ()    # the rounds (1, 2, ...) far below the rest
    far_fast: tuple = ()    # the rounds far above the rest
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
        verdict = dataclasses.replace(judge_look(ratios, threshold, alphas[most], names, (n,)),
                                      far_slow=(), far_fast=())
        return inconclusive(verdict, f'{verdict.figures}: inconclusive, {fewer}', threshold, most, alphas[most])
    for look in reached:
        verdict = judge_look(ratios[:look], threshold, alphas[look], names, tuple(reached))
        # an early look stops the job to fail it, never to pass it: a slowdown in one run of
        # four misses the first 6 rounds 18 % of the time, all 30 rounds 0.02 %
        if verdict.verdict == 'slower' or (look == most and verdict.decided):
            return verdict
    if going_on and n < most:     # what holds it back, if anything but the interval, and no rounds
        held = verdict.reason if verdict.verdict == 'inconclusive' and (verdict.far_slow or verdict.far_fast or
                                                                       'slower only by' in verdict.reason) \
            else f'{verdict.figures}: inconclusive'
        return inconclusive(verdict, f'{held}; undecided after {n} of up to {most} rounds; the job goes on')
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
    decide: the rounds at the spread measured, sized from the estimate's distance to the
    threshold (the boundary a pass or a `slower` must cross), or that no practical number does
    where the estimate sits near the threshold and they pass the most; none where rounds lie far from the rest on either
    side (more rounds leave them there, and they widen the spread), and instead of a number the
    one round whose removal alone decides, where one does."""
    if threshold is not None and not verdict.far_slow and not verdict.far_fast:
        # a job of fewer rounds than the first look sizes them as for unchanged images, and names
        # no round: its estimate is too rough to size by, its rounds too few to judge without one
        rough = verdict.rounds < FIRST_LOOKS[0]
        distance = -math.log(1 - threshold) if rough else abs(math.log(verdict.ratio) - math.log(1 - threshold))
        needed = rounds_to_decide(verdict.sd, threshold, alpha, distance) if distance > 0 else math.inf
        lowest = None if rough or len(ratios) < 3 else min(range(len(ratios)), key=ratios.__getitem__)
        without = judge_look(ratios[:lowest] + ratios[lowest + 1:], threshold, alpha, examine=False) \
            if needed > most and lowest is not None and ratios[lowest] < 1 - 2 * threshold else None
        if without is not None and without.decided:
            said += (f'; one round alone keeps it undecided, {far_rounds(ratios, [lowest + 1])}: without it '
                     f'the rounds say {without.verdict}; {rerun_words([lowest + 1])}')
        elif needed > most and distance < -NEAR * math.log(1 - threshold):
            said += (f'; the estimate {verdict.ratio:.3f} sits near {1 - threshold:.3f} (1 - threshold): no '
                     f'practical number of rounds decides (at this spread {needed} or more, were the estimate '
                     "the truth); the change is about the threshold's size")
        else:
            said += (f'; about {needed} rounds would decide at this spread and estimate (-S ab_rounds={needed})'
                     if needed > most else f'; {most} rounds decide at this spread {POWER:.0%} of the time'
                     + ('; these did not' if verdict.rounds >= most else ''))
    return Verdict('inconclusive', said, **{k: getattr(verdict, k) for k in (
        'ratio', 'low', 'high', 'rounds', 'sd', 'slow_rounds', 'far_slow', 'far_fast', 'looks', 'figures')})


def far_rounds(ratios, numbers):
    """'round 13 (B/A 0.674, A ran first)' or 'rounds 1 (...), 2 (...)': the side that ran
    second takes a machine event that begins mid-round."""
    said = ', '.join(f'{r} (B/A {ratios[r - 1]:.3f}, {rounds.first(r)} ran first)' for r in numbers)
    return f'round{"s" if len(numbers) > 1 else ""} {said}'


def rerun_words(slow):
    """What to do about rounds `slow` where B was slow: rerun, and the machine-event story only
    where it fits (one round, B second in it: work starting mid-round slows the side that ran
    second)."""
    if len(slow) > 1:
        return RECUR
    return MACHINE_EVENT if rounds.first(slow[0]) == rounds.A else NOT_AN_EVENT


def cold_rounds(logs, threshold):
    """How many of the first rounds (up to COLD_ROUNDS, leaving MIN_ROUNDS) lie each more than
    twice the threshold below the median of the rounds after them: a cold start longer than the
    warm-up step would put them there."""
    k = 0
    while k < COLD_ROUNDS and len(logs) - k - 1 >= MIN_ROUNDS and \
            logs[k] < statistics.median(logs[k + 1:]) + math.log(1 - 2 * threshold):
        k += 1
    return k


def judge_look(ratios, threshold, alpha, names=('A', 'B'), looks_=(), examine=True):
    """The Verdict of one look at `ratios` (B/A of each round), its interval two-sided with
    `alpha` on each side (the look's share of the false `slower`). `examine`: whether a `slower`
    that rests on one far round, or on the first rounds alone, is held back (the look at the
    rounds without them does not)."""
    a, b = names
    n = len(ratios)
    logs = [math.log(r) for r in ratios]
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = t_quantile(1 - alpha, n - 1) * sd / math.sqrt(n)
    ratio, low, high = math.exp(mean), math.exp(mean - half), math.exp(mean + half)
    slow = sum(r < 1 - 2 * threshold for r in ratios)
    fast = sum(r > 1 + 2 * threshold for r in ratios)
    # rounds far from the rest: more than twice the threshold and OUTLIER robust sds from the
    # median (from the rest, not from 1: a half-speed round among rounds 10 % faster is far)
    centre = statistics.median(logs)
    spread = 1.4826 * statistics.median(abs(x - centre) for x in logs)
    far_slow = [i for i, x in enumerate(logs, 1)
                if x < centre + min(math.log(1 - 2 * threshold), -OUTLIER * spread)]
    far_fast = [i for i, x in enumerate(logs, 1)
                if x > centre + max(math.log(1 + 2 * threshold), OUTLIER * spread)]
    # an image slow in some rounds, far from the rest, is slow for the users who land on those
    # runs, whatever its other rounds say: never same, not slower nor faster (rounds far above
    # the rest do not cancel it; an unchanged image's rounds are seldom far from the rest)
    said = (f'{b} against {a}: B/A {ratio:.3f} [{low:.3f}, {high:.3f}] over {n} rounds '
            f'({1 - 2 * alpha:.1%} interval), threshold {threshold:.3f}')
    rounds_past = (f'{slow} of {n} rounds below {1 - 2 * threshold:.3f} (twice the threshold), '
                   f'{fast} above {1 + 2 * threshold:.3f}')
    far = ''
    if far_slow:
        far = (f'{len(far_slow)} of {n} far below the rest: {far_rounds(ratios, far_slow)} (more than '
               f'{2 * threshold:.3f} and {OUTLIER} robust sds under the median), {len(far_fast)} far above')
        if far_slow == list(range(1, len(far_slow) + 1)):
            far += '; the first rounds: a cold start (page cache, a first load) that the warm-up step did not take?'
    elif far_fast:
        far = (f'{len(far_fast)} of {n} far above the rest: {far_rounds(ratios, far_fast)}, none far below: '
               'no number of rounds is promised (more rounds leave them there)')
    found = dict(ratio=ratio, low=low, high=high, rounds=n, sd=sd, slow_rounds=slow, looks=looks_, figures=said,
                 far_slow=tuple(far_slow), far_fast=tuple(far_fast))
    if high < 1 and ratio < 1 - threshold:
        cold = cold_rounds(logs, threshold) if examine else 0
        if examine and len(far_slow) == 1 and not judge_look(
                [r for i, r in enumerate(ratios, 1) if i != far_slow[0]], threshold, alpha, examine=False).verdict == 'slower':
            why = (f'slower only by one round far below the rest, {far_rounds(ratios, far_slow)}: without it not '
                   f'slower; {rerun_words(far_slow)}')
        elif cold and judge_look(ratios[cold:], threshold, alpha, examine=False).verdict != 'slower':
            why = (f'slower only by the first rounds, {far_rounds(ratios, list(range(1, cold + 1)))}: without them '
                   'not slower; a cold start (page cache, a first load) longer than the warm-up step? rerun; '
                   'first rounds slow again are the image\'s first load, which its users pay too')
        else:
            return Verdict('slower', f'{said}: slower; {rounds_past}' + (f'; {far}' if far_slow else ''), **found)
        return Verdict('inconclusive', f'{said}: inconclusive, {why}', **found)
    if low > 1 and ratio > 1 + threshold and not far_slow:
        return Verdict('faster', f'{said}: faster', **found)
    if low > 1 - threshold and not far_slow:
        if high < 1 + threshold:
            return Verdict('same', f'{said}: same, a change of the threshold ruled out', **found)
        return Verdict('not slower', f'{said}: not slower, a loss of the threshold ruled out '
                       '(whether faster, cannot tell)', **found)
    if far_slow and (low > 1 - threshold):
        why = f'slow in some rounds, never same, not slower nor faster: {far}'
    elif high < 1:
        why = 'B is slower than A (the interval below 1), by more than the threshold or by less: cannot tell'
    else:
        why = 'the interval reaches past the threshold'
    if far and not why.startswith('slow in some'):
        why += f'; {far}'
    if far_slow:
        why += f'; {rerun_words(far_slow)}'
    return Verdict('inconclusive', f'{said}: inconclusive, {why}', **found)
