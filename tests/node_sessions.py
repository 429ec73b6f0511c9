"""Sessions of a partition sweep generated from how a one-node training run takes its time, not
from the rule that judges them: each step of an epoch takes the node's step time, times the
run's conditions (clock, thermals, neighbours: normal about 1 with a relative standard deviation
`noise`) and a per-step jitter of 1 %; a node `slow` by f takes 1 / (1 - f) as long per step.
The throughput and the epoch time are both read off that one epoch, as the checks report them."""

import random

from mlcheck.history.samples import Sample

NAME = 'MNISTDistributedCheck %image=host %num_nodes=1'
STEPS, BATCH, STEP_S = 40, 256, 0.05


def node_name(i):
    return f'nid{i:05d}'


def session(n, noise, slow, rng, partition='lumi:gpu', time=1.79e9):
    """The records of one sweep of nodes nid00000.. of `partition`: {node: fraction slower}."""
    found = []
    for i in range(n):
        host = node_name(i)
        conditions = rng.gauss(1, noise)
        step = STEP_S / (1 - slow.get(host, 0))
        epoch = sum(step * conditions * rng.gauss(1, 0.01) for _ in range(STEPS))
        found += [Sample(partition, NAME, 'host', 1, 'samples_per_s', STEPS * BATCH / epoch,
                         'samples/s', time, jobid=str(i), nodelist=host),
                  Sample(partition, NAME, 'host', 1, 'epoch_time', epoch, 's', time,
                         jobid=str(i), nodelist=host)]
    return found


def draw_pairs(n, noise, slow_count, pairs, seed):
    """Over `pairs` partitions of n nodes, each with `slow_count` nodes 25 % slow, judged twice
    from independent draws: (healthy nodes named in one draw and not the other, healthy nodes,
    slow nodes named in both, slow nodes)."""
    from mlcheck.history import nodes
    rng = random.Random(seed)
    differ = healthy = both = slow_total = 0
    for _ in range(pairs):
        slow = {node_name(i): 0.25 for i in rng.sample(range(n), slow_count)}
        first, second = (set(nodes.judge(session(n, noise, slow, rng)).drain) for _ in range(2))
        differ += len((first ^ second) - set(slow))
        healthy += n - len(slow)
        both += len(first & second & set(slow))
        slow_total += len(slow)
    return differ, healthy, both, slow_total
