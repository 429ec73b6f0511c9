"""Per-rank speed: each rank's throughput training alone (its `solo` fact), against the ranks'
upper quartile.

The solo phase of the training programs (src/pytorch/solo_phase.py SoloPhase) times every rank
alone, with no communication, right before each timed epoch of the distributed phase: the same
steps, batches and load as the throughput it is compared with. Two figures come from it:

- the slowest rank's solo throughput as a fraction of the upper quartile's: a slow GPU or node
  shows here, and the ranks below the partition's fraction are named (mlcheck.judging.sanity).
  The reference is the upper quartile, not the median, so that a slow node at 2 nodes (half the
  ranks) cannot drag it down: it moves only when more than a quarter of the ranks are fast;
- communication efficiency: distributed throughput per device over the median solo throughput,
  both from one job, so what is lost is lost to the gradient exchange (and waiting for the
  slowest rank), not to a different node or a different day. See docs/per-rank.md.
"""

import statistics

from mlcheck.figures.quartiles import upper_quartile


def solo_throughputs(run):
    """{rank: samples/s alone} of the ranks that reported a positive solo throughput."""
    return run.positive('solo', 'samples_per_s')


def median_solo(run):
    speeds = solo_throughputs(run)
    return statistics.median(speeds.values()) if speeds else None


def slowest_rank_fraction(run):
    """The slowest rank's solo throughput over the ranks' upper quartile, or None without solo facts."""
    speeds = solo_throughputs(run)
    return min(speeds.values()) / upper_quartile(speeds.values()) if speeds else None


def communication_efficiency(run):
    """Distributed samples/s per device over the median solo samples/s, or None."""
    median = median_solo(run)
    per_device = run.result_value('samples_per_s_per_device')
    if not median or not isinstance(per_device, (int, float)):
        return None
    return per_device / median
