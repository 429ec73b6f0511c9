"""The paired A/B verdict: is image B slower than image A, from rounds run on the same nodes?

Each round runs one short step of each image back to back (A B B A A B ...), so what drifts
slowly across the job (the node's clocks, other jobs on the fabric) is common to a round's two
steps and cancels in its ratio B/A of the main rate. The rule, after AMD CVS's regression gate
(cvs/lib/regression_lib.py): `slower` needs the median B/A below 1 - threshold AND the rounds
separated (B's upper quartile below A's lower quartile) AND, beyond CVS, the median's
distribution-free interval below 1 (no change ruled out); `inconclusive`, never a pass, when
rounds are too few, a step failed, or the ratios' spread is wider than the threshold.
The threshold is what an A=A control on these nodes supports (threshold_of_control), capped by
the partition's ceiling. Rates of the rule on modelled noise: docs/ab-images.md.
"""

import math
import statistics
from dataclasses import dataclass

MIN_ROUNDS = 5
VERDICTS = ('slower', 'same', 'faster', 'inconclusive')
CONTROL_MADS = 3        # the A=A threshold: median + 3 MAD of |B/A - 1|


@dataclass(frozen=True)
class Verdict:
    verdict: str            # one of VERDICTS
    reason: str             # one line, naming both images and the ratio
    ratio: float = None     # median of the rounds' B/A
    low: float = None       # the median's confidence interval (median_interval)
    high: float = None
    rounds: int = 0

    @property
    def fails(self):
        return self.verdict in ('slower', 'inconclusive')


def quartiles(values):
    """(lower, upper) quartile, interpolated between order statistics."""
    q1, _, q3 = statistics.quantiles(values, n=4, method='inclusive')
    return q1, q3


def median_interval(values, confidence=0.9):
    """A distribution-free interval for the median: the order statistics x(k), x(n+1-k) with the
    largest k whose binomial(n, 1/2) coverage is at least `confidence` (x(1), x(n) if none)."""
    xs, n = sorted(values), len(values)
    k = 1
    while k < n // 2 + 1:
        # the next interval, x(k+1) to x(n-k), covers the median with 1 - 2 P(Bin(n, 1/2) <= k)
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
        if 1 - 2 * tail < confidence:
            break
        k += 1
    return xs[k - 1], xs[n - k]


def mad(values):
    centre = statistics.median(values)
    return statistics.median(abs(v - centre) for v in values)


def threshold_of_control(ratios, ceiling):
    """The threshold an A=A control's ratios support: median + 3 MAD of |B/A - 1|, at most `ceiling`."""
    deviations = [abs(r - 1) for r in ratios]
    return min(statistics.median(deviations) + CONTROL_MADS * mad(deviations), ceiling)


def judge(a_rates, b_rates, threshold, names=('A', 'B'), failed=(), min_rounds=MIN_ROUNDS):
    """The Verdict of rounds whose main rates (higher is faster) were `a_rates[i]`, `b_rates[i]`;
    `failed`: one line per failed step; `names`: the two images, as the reason names them."""
    a, b = names
    if failed:
        return Verdict('inconclusive',
                       f'{b} against {a}: inconclusive, {len(failed)} step(s) failed: {failed[0]}',
                       rounds=len(a_rates))
    if len(a_rates) != len(b_rates):
        raise ValueError(f'{len(a_rates)} rates of A against {len(b_rates)} of B')
    if len(a_rates) < min_rounds:
        return Verdict('inconclusive', f'{b} against {a}: inconclusive, {len(a_rates)} round(s) completed, '
                       f'fewer than {min_rounds}', rounds=len(a_rates))
    ratios = [y / x for x, y in zip(a_rates, b_rates)]
    ratio = statistics.median(ratios)
    low, high = median_interval(ratios)
    (a_low, a_high), (b_low, b_high) = quartiles(a_rates), quartiles(b_rates)
    said = (f'{b} against {a}: B/A {ratio:.3f} [{low:.3f}, {high:.3f}] over {len(ratios)} rounds, '
            f'threshold {threshold:.3f}')
    found = dict(ratio=ratio, low=low, high=high, rounds=len(ratios))
    # and the median's interval clear of 1: steps noisier than the threshold separate the
    # quartiles of a few rounds by chance (an A=A control on the quiet simulated partition,
    # 5 rounds of +-15 % steps, made B/A 0.823 [0.797, 1.088] with the quartiles apart)
    if ratio < 1 - threshold and b_high < a_low and high < 1:
        return Verdict('slower', f'{said}: slower, B upper quartile {b_high:.4g} below A lower '
                       f'quartile {a_low:.4g}', **found)
    if ratio > 1 + threshold and b_low > a_high and low > 1:
        return Verdict('faster', f'{said}: faster', **found)
    if low < 1 - threshold or high > 1 + threshold:
        # what the interval does rule out: a change of B, when it lies on one side of 1
        side = ('slower', 'below') if high < 1 else ('faster', 'above') if low > 1 else None
        shown = (f'; B is {side[0]} than A (the interval {side[1]} 1), by more than the threshold '
                 'or by less: cannot tell' if side else '')
        return Verdict('inconclusive', f'{said}: inconclusive, the ratios spread wider than the '
                       f'threshold{shown} (more rounds narrow it: -S ab_rounds)', **found)
    return Verdict('same', f'{said}: same', **found)
