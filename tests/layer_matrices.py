"""Generated before/after samples of the suite's matrix (MNIST, CIFAR-100 and the interconnect
check x images x node counts x repetitions) with one cause of known truth injected at its layer:
what mlcheck.history.causes must name. Used by tests/test_causes.py and bench/layer_causes.py.

Each repetition is one draw of normal noise of the run, shared by the figures it derives (its
rate, rate per GPU, time); the injected cause scales the runs its layer reaches."""

import dataclasses

from mlcheck.figures import stack
from mlcheck.history.samples import Sample

IMAGES = ('torch-2.9.1', 'torch-2.12.0', 'torch-2.14.1')
COUNTS = (1, 2, 4)
NODES = tuple(f'nid{i:03d}' for i in range(1, 5))
GPUS = 2
# check: [(variable, unit, value per node at full speed)]; a time's value is its run length
FIGURES = {
    'MNISTDistributedCheck': [('samples_per_s', 'samples/s', 1000.0),
                              ('samples_per_s_per_gpu', 'samples/s', 500.0), ('train_time', 's', 12.0)],
    'CIFAR100ResNetCheck': [('images_per_s', 'images/s', 400.0),
                            ('images_per_s_per_gpu', 'images/s', 200.0),
                            ('loader_images_per_s', 'images/s', 3000.0)],
    'InterconnectCheck': [('busbw', 'GB/s', 40.0), ('latency', 'us', 20.0)],
}
CAUSES = ('host stack', 'fabric', 'image', 'node', 'data path')
STACK = {'torch': '2.9.1', 'nccl': '2.21.5', 'libfabric': '1.20.1', 'cuda': '12.4',
         'gpu_driver': '550.54', 'kernel': '5.14.21'}


def nodes_of(image_index, num_nodes, repetition):
    """Where a run lands: the images' 1-node runs on different nodes, each repetition moved on."""
    first = (image_index + repetition) % len(NODES)
    return [NODES[(first + k) % len(NODES)] for k in range(num_nodes)]


def reached(cause, target, check, image, nodes, var):
    """The share of the effect a run's figure takes: 1 where the injected layer reaches it."""
    if cause == 'host stack':
        return 1.0
    if cause == 'fabric':
        return 1.0 if len(nodes) > 1 else 0.0
    if cause == 'image':
        return 1.0 if image == target else 0.0
    if cause == 'node':
        return 1.0 if target in nodes else 0.0
    if cause == 'data path':
        return 0.0 if check != 'CIFAR100ResNetCheck' else 1.0 if var == 'loader_images_per_s' else 0.2
    return 0.0


def matrix(rng, cause, effect, noise, repetitions, target=None, images=IMAGES, counts=COUNTS,
           checks=tuple(FIGURES), sweep=False, fail=False, with_loader=True):
    """(before, after) [Sample] of the matrix, the cause injected after with relative `effect`
    (0.2: a fifth of the throughput lost) or, with `fail`, as failures of the runs it reaches.
    `sweep` adds 1-node runs of each check in the first image on each node, as a per-node sweep
    does."""
    runs = [(check, i, image, n, '') for check in checks for i, image in enumerate(images)
            for n in counts]
    if sweep:
        runs += [(check, 0, images[0], 1, node) for check in checks for node in NODES]
    sides = []
    for side in ('before', 'after'):
        found = []
        for check, i, image, n, pinned in runs:
            name = f'{check} %image={image} %num_nodes={n}' + (f' %$nid={pinned}' if pinned else '')
            facts = dict(STACK)
            if side == 'after' and cause == 'fabric':
                facts['libfabric'] = '1.22.0'
            if side == 'after' and cause == 'image' and image == target:
                facts['torch'] = '2.9.1.post1'
            for r in range(repetitions):
                nodes = [pinned] if pinned else nodes_of(i, n, r)
                draw = rng.gauss(0, noise)
                for var, unit, per_node in FIGURES[check]:
                    if var == 'loader_images_per_s' and not with_loader:
                        continue
                    share = reached(cause, target, check, image, nodes, var) if side == 'after' else 0
                    if fail and share:
                        value = None
                    else:
                        speed = (1 - effect * share) * (1 + draw)
                        value = per_node / speed if unit in ('s', 'us') else per_node * n * speed
                    found.append(Sample('sim:cluster', name, image, n, var, value, unit,
                                        time=1e9 + r * 600 + (side == 'after') * 86400,
                                        jobid=str(r), nodelist=','.join(nodes),
                                        settings='epochs=3', stack=stack.encode(facts)))
        sides.append(found)
    return sides[0], sides[1]


def truth(cause, target):
    """The layer line's name a right answer gives."""
    return {'image': f'image {target}', 'node': f'node {target}'}.get(cause, cause)


def draw_case(rng, effects=(0.0, 0.5), noises=(0.01, 0.10)):
    """A case of random cause, target, effect, noise and repetitions: its matrix() arguments."""
    cause = rng.choice(CAUSES)
    target = rng.choice(IMAGES) if cause == 'image' else rng.choice(NODES) if cause == 'node' \
        else None
    return dict(cause=cause, target=target, effect=rng.uniform(*effects),
                noise=rng.uniform(*noises), repetitions=rng.randint(3, 5),
                sweep=cause == 'node' or rng.random() < 0.3)


def outcome(causes, cause, target):
    """'right' when the true layer is named and no other, 'wrong' when another layer is named,
    else 'cannot tell'."""
    named = {c.layer for c in causes if c.layer != 'cannot tell'}
    right = truth(cause, target)
    if named - {right}:
        return 'wrong'
    return 'right' if right in named else 'cannot tell'


def renamed(samples, **changes):
    return [dataclasses.replace(s, **changes) for s in samples]
