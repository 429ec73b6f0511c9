"""Sessions of a partition sweep generated from how a one-node training run takes its time, not
from the rule that judges them: each step of an epoch takes the node's step time, times the
run's conditions (clock, thermals, neighbours: normal about 1 with a relative standard deviation
`noise`) and a per-step jitter of 1 %; a node `slow` by f takes 1 / (1 - f) as long per step.
The throughput and the epoch time are both read off that one epoch, as the checks report them."""

import random
from dataclasses import dataclass

from mlcheck.history.samples import Sample

NAME = 'MNISTDistributedCheck %image=host %num_nodes=1'
STEPS, BATCH, STEP_S = 40, 256, 0.05


def node_name(i):
    return f'nid{i:05d}'


def session(n, noise, slow, rng, partition='lumi:gpu', time=1.79e9, repeats=1):
    """The records of one sweep of nodes nid00000.. of `partition`: {node: fraction slower};
    `repeats` runs per node (--repeat), each in conditions of its own."""
    found = []
    for i in range(n):
        host = node_name(i)
        step = STEP_S / (1 - slow.get(host, 0))
        for run in range(repeats):
            conditions = rng.gauss(1, noise)
            epoch = sum(step * conditions * rng.gauss(1, 0.01) for _ in range(STEPS))
            found += [Sample(partition, NAME, 'host', 1, 'samples_per_s', STEPS * BATCH / epoch,
                             'samples/s', time + run, jobid=str(i), nodelist=host),
                      Sample(partition, NAME, 'host', 1, 'epoch_time', epoch, 's', time + run,
                             jobid=str(i), nodelist=host)]
    return found


@dataclass
class Stability:
    """Counts over pairs of independent draws of the same partitions."""
    differ: int = 0        # healthy nodes drained in one draw and not the other
    healthy: int = 0       # healthy nodes drawn (each pair counts once)
    both: int = 0          # slow nodes drained in both draws
    kept: int = 0          # slow nodes judged healthy in neither draw (drained or not judged)
    slow: int = 0          # slow nodes drawn
    unsure: int = 0        # healthy nodes not judged in a draw (each draw counts)


def draw_pairs(n, noise, slow_count, pairs, seed, repeats=1):
    """Over `pairs` partitions of n nodes, each with `slow_count` nodes 25 % slow, judged twice
    from independent draws of `repeats` runs per node: a Stability."""
    from mlcheck.history import nodes
    rng = random.Random(seed)
    found = Stability()
    for _ in range(pairs):
        slow = {node_name(i): 0.25 for i in rng.sample(range(n), slow_count)}
        first, second = (nodes.judge(session(n, noise, slow, rng, repeats=repeats))
                         for _ in range(2))
        found.differ += len((set(first.drain) ^ set(second.drain)) - set(slow))
        found.healthy += n - len(slow)
        found.both += len(set(first.drain) & set(second.drain) & set(slow))
        found.kept += len(set(slow) - set(first.healthy) - set(second.healthy))
        found.slow += len(slow)
        found.unsure += len(set(first.not_judged) - set(slow)) + len(set(second.not_judged) - set(slow))
    return found
