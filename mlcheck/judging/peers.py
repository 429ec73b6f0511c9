"""One against its peers: the one rule behind every "is this one worse than the others?" judgement
(a rank training alone, a GPU's power, a node pair's bandwidth, a node of a partition sweep).

The reference is the peers' upper quartile (the nearest-rank 75th percentile; why not their
median: mlcheck.figures.quartiles, which the figures comparing one rank with the others share).

A member is named when it is below the reference by more than `threshold` (a fraction of the
reference) and, where `spread_factor` is set, by more than that many times the peers' spread. The
spread is estimated from the upper quarter alone, (q(7/8) - q(3/4)) / 0.4758, the normal
distribution's distance between those quantiles in standard deviations: like the reference, the
low ones cannot widen it while they are fewer than three quarters of the peers. With fewer than 8
values it is not estimated (None) and the threshold alone judges.

When every member is equally low, none is named: that is a regression, judged against history
(mlcheck.history.compare), not an outlier.
"""

from dataclasses import dataclass

from mlcheck.figures.quartiles import quantile, upper_quartile

# normal quantiles z(7/8) - z(3/4): the upper quarter's width in standard deviations
UPPER_QUARTER_WIDTH = 1.1503493803760079 - 0.6744897501960817
MIN_FOR_SPREAD = 8   # fewer values give no usable spread estimate


@dataclass(frozen=True)
class Verdict:
    named: list          # [(member, value)] below the peers, lowest first
    reference: float     # the peers' upper quartile (None without values)
    spread: float        # the peers' estimated standard deviation (None below MIN_FOR_SPREAD values)
    limit: float = None  # a member below this is named (None without values)

    def shortfall(self, value):
        """How far `value` is below the reference, as a fraction of it (0.2: 20 % below)."""
        return 1 - value / self.reference if self.reference else None


def spread(values):
    """The peers' standard deviation estimated from their upper quarter, or None with fewer than
    MIN_FOR_SPREAD values."""
    if len(values) < MIN_FOR_SPREAD:
        return None
    ordered = sorted(values)
    return (quantile(ordered, 7 / 8) - quantile(ordered, 3 / 4)) / UPPER_QUARTER_WIDTH


def below_peers(values, threshold, spread_factor=0.0, spread_of=spread):
    """The members of `values` ({member: value}, higher is better) that are below the peers'
    upper quartile by more than `threshold` of it and, with a spread_factor, by more than that
    many standard deviations of the peers, as `spread_of` estimates them from the values."""
    if not values:
        return Verdict([], None, None)
    reference = upper_quartile(values.values())
    sigma = spread_of(list(values.values())) if spread_factor else None
    limit = (1 - threshold) * reference
    if sigma is not None:
        limit = min(limit, reference - spread_factor * sigma)
    named = sorted(((m, v) for m, v in values.items() if v < limit), key=lambda mv: mv[1])
    return Verdict(named, reference, sigma, limit)
