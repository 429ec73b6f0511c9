"""Upgrade scenarios written from how a partition behaves, not from the rule that diagnoses them
(mlcheck.history.causes): each carries its truth, the cause or pair of causes injected.

- Placement as Slurm does it: jobs one at a time on an idle partition, a 1-node job on the
  lowest-numbered node, an N-node job on the N lowest ('slurm'); or jobs side by side, each on
  the next free nodes round the partition ('spread'); or a busy partition, where each job gets
  whichever nodes other users' jobs left free ('busy': any N of the partition, drawn anew).
- A run's figures share one draw of its noise (1-5 %); 1-5 repetitions a side.
- Faults act where the hardware or software they break is used: a node slows every job on it (a
  job waits for its slowest rank) and, among faster nodes, lowers the slowest rank's fraction;
  one GPU lowers that fraction wherever it runs; a node's link or the fabric slows what crosses
  nodes (the interconnect fully, training by its share of communication); the host stack every
  job; an image its own jobs, or makes them fail; the data path the loader and CIFAR-100 a
  little; the binding every training job's slowest rank.
- Faults seen on real partitions since: a node's NIC at half speed (its link), on a busy
  partition where a minority of the runs land on it; an image whose RCCL no longer loads its
  network plugin (its jobs across nodes fall back to sockets, within a node unchanged; its stack
  records the plugin before and none after); a node whose GPU driver did not load after a
  kernel update (every job on it fails its one-GPU promise, every job elsewhere passes); one run
  that failed once among passes, or ran 30-60 % slower once (beside another job on shared
  cores): a transient, which no layer caused.
- Images retired (before only) and new (after only), node counts dropped or added after, stack
  changes recorded or not.
"""

import functools
import random

from mlcheck.figures import stack
from mlcheck.history.samples import Sample

NODES = tuple(f'nid{i:03d}' for i in range(1, 9))
IMAGES = ('torch-2.9.1', 'torch-2.12.0', 'torch-2.14.1')
RETIRED, NEW = 'torch-2.8.0', 'torch-2.15.0'
COUNTS = (1, 2, 4)
GPUS = 2
# check: [(variable, unit, value per node at full speed)]
FIGURES = {
    'MNISTDistributedCheck': [('samples_per_s', 'samples/s', 1000.0),
                              ('train_time', 's', 12.0), ('slowest_rank_fraction', 'fraction', 0.98)],
    'CIFAR100ResNetCheck': [('images_per_s', 'images/s', 400.0),
                            ('loader_images_per_s', 'images/s', 3000.0)],
    'InterconnectCheck': [('busbw', 'GB/s', 40.0), ('latency', 'us', 20.0)],
}
COMMUNICATION = {'MNISTDistributedCheck': 0.5, 'CIFAR100ResNetCheck': 0.4}   # share of a step
STACK = {'torch': '2.9.1', 'nccl': '2.21.5', 'libfabric': '1.20.1', 'cuda': '12.4',
         'gpu_driver': '550.54', 'kernel': '5.14.21', 'net_plugin': 'aws-ofi-rccl 1.4.0'}
SINGLE = ('node', 'gpu', 'link', 'fabric', 'host stack', 'image', 'image fails', 'data path', 'binding')
PAIRS = (('host stack', 'image'), ('fabric', 'image'), ('node', 'image'), ('host stack', 'fabric'))
# the families of issue 49, each drawn with its own shape of site and session (draw_physics)
PHYSICS = ('one image, image', 'one image, fabric', 'image network', 'node fails', 'busy slow nic',
           'transient failure', 'transient slowdown', 'fabric at one size', 'image, one run after')
# what a rank says when its node's GPU driver did not load (judging.sanity's one-GPU promise)
NO_GPU = "sanity: rank {rank} uses device 'cpu' and sees 0 GPU(s); expected exactly 1"
TRANSIENT = 'sanity: rank 3 exited with status 1: NCCL watchdog timeout (collective ALLREDUCE)'
EFFECTS = (0.25, 0.5)


def partition(count):
    """The node names of a partition of `count` nodes."""
    return tuple(f'nid{i:03d}' for i in range(1, count + 1))


def placement(mode, jobs, nodes=NODES, rng=None):
    """Each job's nodes: jobs [(key, num_nodes)] in the order they are submitted."""
    cursor, found = 0, {}
    for key, n in jobs:
        if mode == 'slurm':
            found[key] = nodes[:n]
        elif mode == 'busy':
            found[key] = tuple(sorted(rng.sample(nodes, n)))
        else:
            found[key] = tuple(nodes[(cursor + k) % len(nodes)] for k in range(n))
            cursor = (cursor + n) % len(nodes)
    return found


class Fault:
    """One injected cause: its kind, where it acts (a node or an image) and its size."""

    def __init__(self, kind, target, effect, run=None):
        self.kind, self.target, self.effect = kind, target, effect
        self.run = run      # a transient's one run: (check, image, num_nodes, repetition)

    @property
    def truth(self):
        """The candidate names of the cause: none for a transient (no layer caused it)."""
        if self.kind.startswith('transient'):
            return ()
        return ({'node': f'node {self.target}', 'gpu': f'a GPU of {self.target}',
                 'link': f'the link of {self.target}', 'image': f'image {self.target}',
                 'image fails': f'image {self.target}', 'node fails': f'node {self.target}',
                 'image net': f'image {self.target} (its network layer)',
                 'fabric size': f'fabric at {self.target} nodes and above'}.get(self.kind, self.kind),)

    def failure(self, check, image, nodes, r):
        """Why the job failed ('' where it ran)."""
        if self.kind == 'image fails' and image == self.target:
            return 'sanity: ImportError: libamdhip64.so.6: cannot open shared object file'
        if self.kind == 'node fails' and self.target in nodes:
            return NO_GPU.format(rank=2 * nodes.index(self.target))
        if self.kind == 'transient' and (check, image, len(nodes), r) == self.run:
            return TRANSIENT
        return ''

    def speeds(self, check, image, nodes):
        """(speed of the job, speed of its slowest rank against its peers, loader speed)."""
        e, kind, on = self.effect, self.kind, self.target in nodes
        across = len(nodes) > 1
        comm = 1.0 if check == 'InterconnectCheck' else COMMUNICATION.get(check, 0)
        if kind == 'node' and on:
            return 1 - e, 1 - e if across else 1.0, 1 - e
        if kind == 'gpu' and on:
            return 1 - e, 1 - e, 1.0
        if kind in ('link', 'fabric') and across and (on or kind == 'fabric'):
            return 1 - e * comm, 1.0, 1.0
        if kind == 'fabric size' and len(nodes) >= self.target:
            # a global link or switch only jobs this large cross, or their routing
            return 1 - e * comm, 1.0, 1.0
        if kind == 'image net' and across and image == self.target:
            # sockets instead of the plugin: what crosses nodes, in that image only
            return 1 - e * comm, 1.0, 1.0
        if kind == 'host stack' or kind == 'image' and image == self.target:
            return 1 - e, 1.0, 1.0
        if kind == 'data path' and check == 'CIFAR100ResNetCheck':
            return 1 - 0.2 * e, 1.0, 1 - e
        if kind == 'binding' and check != 'InterconnectCheck':
            return 1 - e, 1 - e, 1.0
        return 1.0, 1.0, 1.0

    def stack_change(self, facts, image):
        if self.kind == 'host stack':
            facts['gpu_driver'] = '560.35'
        elif self.kind == 'fabric':
            facts['libfabric'] = '1.22.0'
        elif self.kind == 'image net' and image == self.target:
            del facts['net_plugin']     # RCCL did not load it: the job records none
        elif self.kind.startswith('image') and image == self.target:
            facts['torch'] += '.post1'


def draw(rng, family=None):
    """A scenario: its family, truth (a frozenset of candidate names) and (before, after)."""
    family = family or rng.choice(SINGLE + PAIRS)
    if family in PHYSICS:
        return draw_physics(rng, family)
    kinds = family if isinstance(family, tuple) else (family,)
    mode = rng.choice(('slurm', 'spread'))
    shape = {}
    change = rng.random()
    if change < 0.15:
        shape['before_images'] = IMAGES + (RETIRED,)
    elif change < 0.3:
        shape['after_images'] = IMAGES + (NEW,)
    elif change < 0.4:
        shape['after_counts'] = (1, 2)
    elif change < 0.5:
        shape['before_counts'] = COUNTS + (8,)
    faults = []
    for kind in kinds:
        if kind in ('node', 'gpu', 'link'):
            # a node the partition's jobs use: the lowest ones under Slurm's placement
            target = rng.choice(NODES[:2] if mode == 'slurm' else NODES)
        elif kind.startswith('image'):
            target = rng.choice(IMAGES)
        else:
            target = None
        faults.append(Fault(kind, target, rng.uniform(*EFFECTS)))
    before, after = build(rng, faults, mode, noise=rng.uniform(0.01, 0.05),
                          repetitions=(rng.randint(1, 5), rng.randint(1, 5)),
                          recorded=rng.random() < 0.5, **shape)
    truth = frozenset(name for f in faults for name in f.truth)
    return family if isinstance(family, str) else ' + '.join(family), truth, before, after


def draw_physics(rng, family):
    """A scenario of one of issue 49's families (PHYSICS), in the shape of site it came from."""
    mode = rng.choice(('slurm', 'busy'))
    nodes = partition(rng.choice((8, 16)))
    reps = (rng.randint(1, 5), rng.randint(1, 5))
    shape = {}
    if family.startswith('one image'):
        # a site that ships one image: nothing beside it to contrast with
        image = rng.choice(IMAGES)
        shape = dict(before_images=(image,), after_images=(image,))
        kind = family.split(', ')[1]
        faults = [Fault(kind, image if kind == 'image' else None, rng.uniform(*EFFECTS))]
    elif family == 'image network':
        faults = [Fault('image net', rng.choice(IMAGES), rng.uniform(0.5, 0.9))]
    elif family == 'node fails':
        # a node the partition's jobs use: the lowest ones under Slurm's placement
        faults = [Fault('node fails', rng.choice(nodes[:2] if mode == 'slurm' else nodes), 1.0)]
    elif family == 'busy slow nic':
        # the documented --repeat 5 on a busy partition of 16; a NIC at half speed
        mode, nodes, reps = 'busy', partition(16), (5, 5)
        faults = [Fault('link', rng.choice(nodes), 0.5)]
    elif family == 'fabric at one size':
        # every 4-node job 30-50 % slower across nodes, the smaller ones not (a red-team's d11)
        nodes, reps = partition(16), (5, rng.randint(3, 5))
        faults = [Fault('fabric size', 4, rng.uniform(0.3, 0.5))]
    elif family == 'image, one run after':
        # the baseline at --repeat 5, the upgrade checked with one run of each test (d31)
        mode, nodes, reps = 'busy', partition(16), (5, 1)
        faults = [Fault('image', rng.choice(IMAGES), rng.uniform(0.2, 0.4))]
    else:
        reps = (reps[0], max(reps[1], 2))      # one run among others
        run = (rng.choice(tuple(FIGURES)), rng.choice(IMAGES), rng.choice(COUNTS), rng.randrange(reps[1]))
        faults = [Fault('transient', None, 0.0, run) if family == 'transient failure' else
                  Fault('transient slow', None, rng.uniform(0.3, 0.6), run)]
    before, after = build(rng, faults, mode, noise=rng.uniform(0.01, 0.05), repetitions=reps,
                          recorded=rng.random() < 0.5, nodes=nodes, **shape)
    return family, frozenset(name for f in faults for name in f.truth), before, after


def build(rng, faults, mode='slurm', noise=0.02, repetitions=(5, 5), recorded=True,
          checks=tuple(FIGURES), before_images=IMAGES, after_images=IMAGES, before_counts=COUNTS,
          after_counts=COUNTS, nodes=NODES, tail=0.0):
    """(before, after) [Sample]: every check in every image at every count, each repetition a
    job placed by `mode` on the partition's `nodes`; `faults` act after. `noise` is one spread,
    or (before's, after's): a partition busier after maintenance spreads its runs wider. `tail`
    is the share of runs that shared their nodes' cores or links with another job
    (interference): each such run 2-4 spreads slower, a heavy tail on the slow side."""
    sides = []
    spreads = noise if isinstance(noise, tuple) else (noise, noise)
    for side, images, counts, reps, noise in (
            ('before', before_images, before_counts, repetitions[0], spreads[0]),
            ('after', after_images, after_counts, repetitions[1], spreads[1])):
        jobs = [((check, image, n, r), n) for r in range(reps) for check in checks
                for image in images for n in counts]
        found = []
        active = tuple(faults) if side == 'after' else ()
        for (check, image, n, r), used in placement(mode, jobs, nodes, rng).items():
            found += _runs(rng, check, image, n, r, used, active, noise, side,
                           _stack(image, active if recorded else ()), tail)
        sides.append(found)
    return sides[0], sides[1]


@functools.lru_cache(maxsize=64)
def _stack(image, faults):
    facts = dict(STACK)
    for f in faults:
        f.stack_change(facts, image)
    return stack.encode(facts)


def _runs(rng, check, image, n, r, nodes, faults, noise, side, stack_text, tail=0.0):
    job, rank, loader = 1.0, 1.0, 1.0
    for f in faults:
        speeds = f.speeds(check, image, nodes)
        job, rank, loader = job * speeds[0], min(rank, speeds[1]), loader * speeds[2]
        if f.kind == 'transient slow' and (check, image, n, r) == f.run:
            job *= 1 - f.effect     # this one job shared its cores with another
    failed = next(filter(None, (f.failure(check, image, nodes, r) for f in faults)), '')
    shared = 1 + rng.gauss(0, noise)
    if tail and rng.random() < tail:
        shared -= rng.uniform(2, 4) * noise     # another job on its cores or links
    found = []
    for var, unit, full in FIGURES[check]:
        if failed:
            value = None
        elif var == 'slowest_rank_fraction':
            value = full * rank * (1 + rng.gauss(0, noise / 2))
        elif var == 'loader_images_per_s':
            value = full * n * loader * shared
        elif unit in ('s', 'us'):
            value = full / (job * shared)
        else:
            value = full * (n if not var.endswith('per_gpu') else 1) * job * shared
        found.append(Sample('sim:cluster', f'{check} %image={image} %num_nodes={n}', image, n, var,
                            value, unit, time=1e9 + r * 600 + (side == 'after') * 86400,
                            jobid=f'{side}{r}', nodelist=','.join(nodes), settings='epochs=3',
                            stack=stack_text, problem=failed))
    return found


def outcome(verdicts, truth, gate=True):
    """'right' (the truth named alone), 'cannot tell' (listing every cause of the truth), 'wrong'
    (a confident line that is not the truth, a cannot-tell that does not list it), 'missed' (no
    line where a figure fails the gate: `gate`) or 'not seen' (no line, and nothing fails it: a
    fault within the noise)."""
    found = [v for v in verdicts if v.kind != 'binding' or 'binding' in truth]
    if not found:
        return 'missed' if gate else 'not seen'
    # the line a reader acts on: the first (failed runs are located before the passing runs
    # are judged on their own)
    v = found[0]
    if v.kind != 'cannot tell':
        return 'right' if set(v.hypotheses[0]) == truth else 'wrong'
    return 'cannot tell' if truth <= v.named else 'wrong'


def run(count, seed=1, family=None, families=None):
    """[(family, truth, outcome, verdict line)] of `count` scenarios (of `family`, or one drawn
    from `families`, by default those of SINGLE and PAIRS), judged as the report does (its one
    table of evidence: the gate fails where it has a line to show)."""
    from mlcheck.history.evidence import EvidenceTable
    rng = random.Random(seed)
    results = []
    for _ in range(count):
        name, truth, before, after = draw(rng, family or (rng.choice(families) if families else None))
        table = EvidenceTable.of(before, after)
        # the gate fails on runs after that a line must locate: a test not run after at all
        # (a retired node count) is said by the report's own line (no cause located), not a cause
        ran = {s.key for s in after}
        gate = bool([c for c in table.failing() if c.key in ran] or table.failed('after'))
        found = table.verdicts
        results.append((name, truth, outcome(found, truth, gate), found[-1].line() if found else ''))
    return results
