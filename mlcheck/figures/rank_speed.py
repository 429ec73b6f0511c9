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


def solo_speeds(run):
    """{rank: samples/s of its median solo step} of the ranks with a positive solo throughput:
    the rank's speed, which the slow-rank rule compares. A moment of the machine (another job's
    burst, a stolen core for a second) slows the steps it falls on and with them the rank's
    throughput; the median step moves only when it covers half of the rank's solo steps, while
    a slow GPU or node slows every step (docs/per-rank.md has the figures). A rank that reported
    no step rates (a program before them) is its throughput."""
    speeds, facts = solo_throughputs(run), run.by_rank('solo')
    for rank in speeds:
        steps = [rate for rate in facts[rank].get('step_samples_per_s') or ()
                 if isinstance(rate, (int, float)) and rate > 0]
        if steps:
            speeds[rank] = statistics.median(steps)
    return speeds


def median_solo(run):
    speeds = solo_throughputs(run)
    return statistics.median(speeds.values()) if speeds else None


def slowest_rank_fraction(run):
    """The slowest rank's solo speed (its median step) over the ranks' upper quartile, or None
    without solo facts: the figure of the slow-rank rule."""
    speeds = solo_speeds(run)
    return min(speeds.values()) / upper_quartile(speeds.values()) if speeds else None


def communication_efficiency(run):
    """Distributed samples/s per device over the median solo samples/s, or None."""
    median = median_solo(run)
    per_device = run.result_value('samples_per_s_per_device')
    if not median or not isinstance(per_device, (int, float)):
        return None
    return per_device / median
