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


def session(n, noise, slow, rng, partition='lumi:gpu', time=1.79e9, repeats=1, slow_runs=None):
    """The records of one sweep of nodes nid00000.. of `partition`: {node: fraction slower};
    `repeats` runs per node (--repeat), each in conditions of its own; `slow_runs` {(node,
    run): fraction slower} in that run only (a GPU that throttles now and then)."""
    found = []
    for i in range(n):
        host = node_name(i)
        step = STEP_S / (1 - slow.get(host, 0))
        for run in range(repeats):
            conditions = rng.gauss(1, noise) / (1 - (slow_runs or {}).get((host, run), 0))
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


# --- sweeps as Slurm runs them, appended to one perf log (issue 47) ---------------------------
# Written from how a sweep runs, not from the rule that judges it: `reframe --distribute=idle
# --repeat R` makes one job per idle node, test and repetition; Slurm starts them as ReFrame's
# max_jobs slots free up (ReFrame submits them in its order: test by test, node by node, each
# repetition after the one before), so a job ends when its slot's previous job ended plus its own
# run time; a node drained before the sweep is not idle and runs nothing. The sweeps of one
# partition are days apart (maintenance to maintenance) and appended to the same perf log.

MAX_JOBS = 8
TESTS = ('MNISTDistributedCheck %image=host %num_nodes=1',
         'CIFAR100ResNetCheck %image=host %num_nodes=1')
FIGURES = (('samples_per_s', 'samples/s', 970.0), ('epoch_time', 's', 12.0))


@dataclass
class PlannedSweep:
    """What happens in one sweep: the nodes that run it, the (node, test, repetition) runs that
    fail (a flaky GPU, a broken node), the tests whose data is missing on most nodes, the slow
    nodes {node: fraction}."""
    nodes: list
    repeats: int
    failing: set
    broken_tests: dict          # {test: the nodes it fails on}
    slow: dict


def plan_sweep(rng, all_nodes, unavailable, repeats, tests):
    """A sweep over the idle nodes: a few flaky nodes fail one repetition of one test (any one),
    a few broken nodes fail every run, sometimes a test fails on most nodes (its data moved)."""
    idle = [n for n in all_nodes if n not in unavailable]
    failing = set()
    for node in rng.sample(idle, min(len(idle), rng.randint(0, 4))):      # flaky
        failing.add((node, rng.choice(tests), rng.randrange(repeats)))
    for node in rng.sample(idle, min(len(idle), rng.randint(0, 2))):      # broken
        failing.update((node, test, r) for test in tests for r in range(repeats))
    broken_tests = {}
    if rng.random() < 0.4:
        test, share = rng.choice(tests), rng.uniform(0.6, 1.0)
        broken_tests[test] = {n for n in idle if rng.random() < share}
        failing.update((n, test, r) for n in broken_tests[test] for r in range(repeats))
    slow = {n: rng.uniform(0.2, 0.5) for n in rng.sample(idle, min(len(idle), rng.randint(0, 3)))}
    return PlannedSweep(idle, repeats, failing, broken_tests, slow)


def run_sweep(rng, plan, start, tests, partition='sim:cluster', first_job=1):
    """The perf log records of `plan` run from `start`: jobs in ReFrame's order, ended as Slurm's
    MAX_JOBS slots run them (each run 60-600 s, times the node's slowness)."""
    slots = [start] * MAX_JOBS
    found, job = [], first_job
    for test in tests:
        for node in plan.nodes:
            for rep in range(plan.repeats):
                slot = min(range(MAX_JOBS), key=slots.__getitem__)
                factor = 1 - plan.slow.get(node, 0)
                slots[slot] += rng.uniform(60, 600) / factor
                job += 1
                fails = (node, test, rep) in plan.failing
                conditions = rng.gauss(1, 0.02)
                for var, unit, base in FIGURES:
                    value = base * conditions * (factor if unit != 's' else 1 / factor)
                    found.append(Sample(partition, test, 'host', 1, var, None if fails else value,
                                        unit, slots[slot], jobid=str(job), nodelist=node,
                                        result='fail' if fails else 'pass'))
    return sorted(found, key=lambda s: s.time), job
