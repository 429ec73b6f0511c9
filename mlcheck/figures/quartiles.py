"""The reference a member is held against among its peers: their nearest-rank upper quartile.

Not their median: while the low ones are at most half of the peers, the upper quartile is one of
the healthy values (it is the ceil(0.75 n)-th smallest, above the k <= n/2 lowest), so a slow node
of two, or half the GPUs of a job, cannot drag the reference down to themselves. The median sits
halfway between two equal groups and names neither.

The figures that compare one rank with the others (rank_speed, gpu_use) divide by it, and the one
rule of one against its peers (mlcheck.judging.peers) names members below it.
"""

import math


def quantile(ordered, q):
    """The nearest-rank q-quantile of sorted values: always one of them."""
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def upper_quartile(values):
    """The smallest of `values` that at least three quarters of them do not exceed: always one of
    the values, and the larger of two."""
    return quantile(sorted(values), 0.75)
