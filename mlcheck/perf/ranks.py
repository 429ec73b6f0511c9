"""Per-rank speed: each rank's throughput training alone (its `solo` fact), against the median.

The solo phase of the training programs (src/pytorch/ddp_common.py) times every rank alone, with
no communication, before the distributed phase. Two figures come from it:

- the slowest rank's solo throughput as a fraction of the median rank's: a slow GPU or node
  shows here, and the ranks below the partition's fraction are named (mlcheck.judging.sanity);
- communication efficiency: distributed throughput per device over the median solo throughput,
  both from one job, so what is lost is lost to the gradient exchange (and waiting for the
  slowest rank), not to a different node or a different day. See docs/per-rank.md.
"""

import statistics


def solo_throughputs(run):
    """{rank: samples/s alone} of the ranks that reported a positive solo throughput."""
    return {rank: fact['samples_per_s'] for rank, fact in run.by_rank('solo').items()
            if isinstance(fact.get('samples_per_s'), (int, float)) and fact['samples_per_s'] > 0}


def median_solo(run):
    speeds = solo_throughputs(run)
    return statistics.median(speeds.values()) if speeds else None


def slowest_rank_fraction(run):
    """The slowest rank's solo throughput over the median rank's, or None without solo facts."""
    speeds = solo_throughputs(run)
    return min(speeds.values()) / statistics.median(speeds.values()) if speeds else None


def communication_efficiency(run):
    """Distributed samples/s per device over the median solo samples/s, or None."""
    median = median_solo(run)
    per_device = run.result_value('samples_per_s_per_device')
    if not median or not isinstance(per_device, (int, float)):
        return None
    return per_device / median


def slow_ranks(run, fraction):
    """[(rank, samples/s)] of the ranks below `fraction` of the median, slowest first, and the
    median. When every rank is equally slow, none is: that is a regression, not an outlier."""
    speeds = solo_throughputs(run)
    if not speeds:
        return [], None
    median = statistics.median(speeds.values())
    slow = sorted(((r, s) for r, s in speeds.items() if s < fraction * median), key=lambda rs: rs[1])
    return slow, median
