"""Which layer broke: from the judged comparisons of an upgrade, the likely causes (a node, the
fabric, the host stack, one image, the data path, the binding), each with its evidence, or
`cannot tell` with the run that would separate the layers. docs/performance-history.md states
the rule with an example per layer.

A run cell is one check in one image at one node count. It is *worse* when one of its rates
(a unit per second) fails the gate or the test failed after, *fine* when every rate it has was
judged and none fails. A layer is named only when every cell it predicts worse is worse, every
cell it predicts fine is fine, and the fine cells' mean loss is under a third of the worse
ones' (a real change shared by all cells is then not taken for a split one); else `cannot tell`.
"""

import re
import statistics
from dataclasses import dataclass, field

from mlcheck.errors import InputError
from mlcheck.figures import stack
from mlcheck.history import compare, hostlist
from mlcheck.history.samples import group

INTERCONNECT = 'InterconnectCheck'
LOADER_VAR = 'loader_images_per_s'     # the CIFAR-100 loader's own rate, when recorded
# the placement sanity's failure reasons (mlcheck.judging.sanity: cpu_affinity, one_gpu_per_rank,
# the ranks per node)
BINDING_WORDS = re.compile(r'runs on cores .*\(mask |local rank .* outside |GPU\(s\); expected exactly'
                           r'|ranks ran on \d+ node\(s\)|node \S+ ran \d+ ranks, expected')
CONTRAST = 3      # the fine cells' mean loss must be under 1/CONTRAST of the worse cells'


@dataclass(frozen=True)
class Cause:
    layer: str          # 'node nid001', 'fabric', 'host stack', 'image X', 'data path', 'binding', 'cannot tell'
    evidence: str

    def line(self):
        return f'likely cause: {self.layer}: {self.evidence}'


@dataclass
class Cell:
    check: str
    image: str
    num_nodes: int
    worse: list = field(default_factory=list)    # losses of its rates (positive: slower)
    failing: bool = False
    failed: bool = False                          # no result after
    judged: bool = False
    nodes: set = field(default_factory=set)      # that any of its runs used
    always: set = field(default_factory=set)     # that every one of its runs used
    loader: float = None                          # the loss of its loader figure, if recorded
    loader_failing: bool = False

    @property
    def loss(self):
        """Its median loss; a failed cell counts as wholly lost."""
        return 1.0 if self.failed else statistics.median(self.worse) if self.worse else 0.0


def likely_causes(comparisons, before=(), after=()):
    """[Cause] of judged comparisons (mlcheck.history.compare.compare); `before` and `after` are
    their samples, failed ones included: their node lists, software stacks and, where the record
    keeps it (the results database, not a perf log), why a test failed."""
    found = []
    for partition, judged in sorted(group(comparisons, lambda c: c.key[0]).items()):
        side = lambda samples: [s for s in samples if s.partition == partition]
        causes = _of_partition(judged, side(before), side(after))
        prefix = f'on {partition}: ' if len({c.key[0] for c in comparisons}) > 1 else ''
        found += [Cause(c.layer, prefix + c.evidence) for c in causes]
    return found


def _of_partition(judged, before, after):
    causes = []
    reasons = {s.name: s.problem for s in after if s.value is None and s.problem}
    binding = sorted({c.key[1] for c in judged if c.verdict == compare.NO_RESULT
                      and BINDING_WORDS.search(reasons.get(c.key[1], ''))})
    if binding:
        causes.append(Cause('binding', f'{_count(binding, "test")} failed the placement sanity '
                                       f'({_listed(binding)})'))
    cells = _cells([c for c in judged if c.key[1] not in binding], before + after)
    loader_bound = _data_path(cells)
    if loader_bound:
        causes.append(loader_bound)
        # their training figures lost less than the loader's: the data path explains them
        cells = {name: c for name, c in cells.items() if c.loader is None}
    if not any(c.failing for c in cells.values()):
        return causes
    stacks = _stack_changes(before, after)
    fitting = [cause for cause in (layer(cells, stacks) for layer in (_host, _image, _fabric, _node))
               if cause]
    if len(fitting) == 1:
        return causes + fitting
    if fitting:
        layers = [c.layer for c in fitting]
        return causes + [Cause('cannot tell', f'{" or ".join(layers)}: the runs fit each; '
                               f'{_separating(layers)}. ' + '; '.join(c.line()[len('likely cause: '):]
                                                                 for c in fitting))]
    return causes + [Cause('cannot tell', _why_not(cells))]


def _separating(layers):
    if any(layer.startswith('node') for layer in layers):
        return 'run the checks at 1 node on each node (the partition sweep), and each image apart'
    return 'run each image at 1 node and at several'


def _cells(judged, samples):
    nodes, always = {}, {}
    for s in samples:
        used = _nodes(s.nodelist)
        nodes.setdefault(s.name, set()).update(used)
        always[s.name] = always.get(s.name, used) & used
    cells = {}
    for c in judged:
        check, rate = c.key[1].split()[0], c.unit.endswith('/s')
        if not rate and c.verdict != compare.NO_RESULT:
            continue
        # a test with its parameters (a node sweep's copies are tests of their own)
        cell = cells.setdefault(c.key[1], Cell(check, c.image, c.num_nodes))
        if c.key[2] == LOADER_VAR:
            if c.worse is not None:
                cell.loader, cell.loader_failing = c.worse, c.verdict in compare.FAILING
            continue
        cell.nodes, cell.always = nodes.get(c.key[1], set()), always.get(c.key[1], set())
        if c.verdict == compare.NO_RESULT:
            cell.failing = cell.failed = cell.judged = True
        elif c.worse is not None and c.verdict not in (compare.ONLY_BEFORE, compare.ONLY_AFTER):
            cell.judged = True
            cell.worse.append(c.worse)
            cell.failing |= c.verdict in compare.FAILING
    return {key: cell for key, cell in cells.items() if cell.judged}


def _split(cells, predicted_worse):
    """Whether exactly the predicted cells are worse, the rest fine, with the loss contrast."""
    hit = [c for c in cells if predicted_worse(c)]
    rest = [c for c in cells if not predicted_worse(c)]
    if not hit or not all(c.failing for c in hit) or any(c.failing for c in rest):
        return None
    if rest and _mean_loss(rest) * CONTRAST >= _mean_loss(hit):
        return None
    return hit, rest


def _host(cells, stacks):
    training = [c for c in cells.values() if c.check != INTERCONNECT]
    images, counts = sorted({c.image for c in training}), {c.num_nodes for c in training}
    if len(images) < 2 or 1 not in counts or not training or not all(c.failing for c in training):
        return None
    return Cause('host stack', f'every image slower at every node count, 1 node too '
                               f'({_range(training)}){_shared_changes(stacks, images)}')


def _image(cells, stacks):
    training = [c for c in cells.values() if c.check != INTERCONNECT]
    images = sorted({c.image for c in training})
    for image in images:
        split = _split(training, lambda c: c.image == image)
        if len(images) >= 2 and split:
            hit, rest = split
            counts = sorted({c.num_nodes for c in hit})
            change = stack.change_line(stacks.get(image, []))
            return Cause(f'image {image}', f'only {image} slower, at {_counts(counts)} ({_range(hit)}); '
                         f'{_listed(sorted(set(images) - {image}))} unchanged there'
                         + (f'; its stack: {change}' if change else ''))
    return None


def _fabric(cells, stacks):
    training = [c for c in cells.values() if c.check != INTERCONNECT]
    links = [c for c in cells.values() if c.check == INTERCONNECT]
    images = sorted({c.image for c in training})
    split = _split(training, lambda c: c.num_nodes > 1)
    across = [c for c in links if c.num_nodes > 1]
    within = [c for c in links if c.num_nodes == 1]
    if len(images) < 2 or not split or not any(c.num_nodes == 1 for c in training):
        return None
    if not across or not within or not _split(links, lambda c: c.num_nodes > 1):
        return None
    hit, _ = split
    return Cause('fabric', f'every image slower at {_counts(sorted({c.num_nodes for c in hit}))} '
                           f'({_range(hit)}), unchanged at 1 node; busbw across nodes '
                           f'{_range(across)}, within a node unchanged{_shared_changes(stacks, images)}')


def _suspect_nodes(cells):
    """Nodes every worse cell ran on and no fine one did (none without fine cells)."""
    worse = [c for c in cells.values() if c.failing]
    fine = [c for c in cells.values() if not c.failing]
    if not worse or not fine or any(not c.nodes for c in cells.values()):
        return set()
    return set.intersection(*(c.nodes for c in worse)) - set().union(*(c.nodes for c in fine))


def _node(cells, stacks=None):
    """`node N`: two or more runs on N alone are worse, the runs on 2 other nodes alone fine
    (per-node data: a node sweep, or 1-node tests that stayed on one node); every run that always
    used N is worse, and every worse run used N."""
    alone = group([c for c in cells.values() if len(c.nodes) == 1], lambda c: next(iter(c.nodes)))
    bad = [node for node, found in alone.items() if all(c.failing for c in found)]
    good = [node for node, found in alone.items() if not any(c.failing for c in found)]
    if len(bad) != 1 or len(good) < 2 or len(bad) + len(good) != len(alone):
        return None
    node = bad[0]
    worse = [c for c in cells.values() if c.failing]
    on_it = [c for c in cells.values() if node in c.always]
    if len(alone[node]) < 2 or not all(node in c.nodes for c in worse) \
            or not all(c.failing for c in on_it):
        return None
    if _mean_loss(sum((alone[n] for n in good), [])) * CONTRAST >= _mean_loss(alone[node]):
        return None
    return Cause(f'node {node}', f'runs on {node} alone slower ({_range(alone[node])}), on '
                                 f'{_listed(sorted(good))} alone unchanged; every slower or failed '
                                 f'run used {node} ({_range(worse)})')


def _data_path(cells):
    """'data path' where the loader figure failed in two thirds or more of the tests that have it,
    and it lost on average CONTRAST times as much as their training figures."""
    measured = [c for c in cells.values() if c.loader is not None]
    if not measured or 3 * sum(c.loader_failing for c in measured) < 2 * len(measured):
        return None
    if _mean_loss(measured) * CONTRAST >= statistics.fmean(c.loader for c in measured):
        return None
    return Cause('data path', f'{LOADER_VAR} {_range_of([-c.loader for c in measured])} in the '
                              f'tests that have it, their training figures {_range(measured)}')


def _why_not(cells):
    """What the slower runs are, and which run would separate the layers."""
    worse = [c for c in cells.values() if c.failing]
    images = sorted({c.image for c in cells.values() if c.check != INTERCONNECT})
    counts = sorted({c.num_nodes for c in cells.values()})
    bad_images = sorted({c.image for c in worse})
    bad_counts = sorted({c.num_nodes for c in worse})
    what = (f'{_count(worse, "run")} slower or failed ({_range(worse)}: '
            f'{_listed(bad_images)} at {_counts(bad_counts)})')
    advice = []
    suspects = sorted(_suspect_nodes(cells))
    if suspects:
        advice.append(f'each ran on {_listed(suspects)} and no unchanged run did: run the checks '
                      'at 1 node on each node (the partition sweep)')
    if len(images) < 2:
        advice.append(f'run a second image at {_counts(counts)} (one image or the host stack)')
    if 1 not in counts:
        advice.append(f'run {_listed(bad_images)} at 1 node (the fabric or the host stack)')
    if not any(c.check == INTERCONNECT and c.num_nodes > 1 for c in cells.values()) \
            and all(n > 1 for n in bad_counts):
        advice.append('run the interconnect check at 1 and 2 nodes (the fabric or the images\' '
                      'own communication)')
    checks = {c.check for c in cells.values() if c.check != INTERCONNECT}
    if len({c.check for c in worse}) == 1 < len(checks) and not any(
            c.loader is not None for c in cells.values()):
        advice.append(f'only {worse[0].check} slower: the data path or its model; its loader '
                      f'figure {LOADER_VAR} is not recorded')
    if not advice and len(worse) == 1:
        cell = worse[0]
        advice.append(f'one run only: repeat {cell.check} in {cell.image} at {cell.num_nodes} '
                      'node(s) on other nodes, and at other node counts')
    advice = '; '.join(advice) or ('they fit no one layer (several at once, or too close to the '
                                   'noise): repeat with --repeat 5 and compare again')
    return f'{what}; {advice}'


def _nodes(nodelist):
    """The node names of a recorded node list ('nid001,nid002' or 'nid[001-003]'); none where
    it is absent or unreadable (the node is then not judged)."""
    try:
        return set(hostlist.expand(nodelist)) if nodelist else set()
    except InputError:
        return set()


def _stack_changes(before, after):
    """{image: [(fact, old, new)]} of each image whose recorded stack differs."""
    sides = [group([s for s in ss if s.stack], lambda s: s.image) for ss in (before, after)]
    return {image: stack.changes(*([stack.decode(s.stack) for s in side[image]] for side in sides))
            for image in set(sides[0]) & set(sides[1])}


def _shared_changes(stacks, images):
    """'; libfabric 1.20 -> 1.22 in every image' of the changes that every image shares."""
    shared = [change for change in stacks.get(images[0], [])
              if all(change in stacks.get(image, []) for image in images)]
    return f'; {stack.change_line(shared)} in every image' if shared else ''


def _mean_loss(cells):
    return statistics.fmean(c.loss for c in cells)


def _range(cells):
    """'-31 % to -38 %, 2 failed' of the cells' losses."""
    failed = sum(c.failed for c in cells)
    return ', '.join(filter(None, [_range_of([-c.loss for c in cells if not c.failed]),
                                   f'{failed} failed' if failed else '']))


def _range_of(changes):
    changes = sorted(changes, reverse=True)
    if not changes or _percent(changes[0]) == _percent(changes[-1]):
        return _percent(changes[0]) if changes else ''
    return f'{_percent(changes[0])} to {_percent(changes[-1])}'


def _percent(change):
    return f'{100 * change:+.0f} %'


def _counts(counts):
    """'1 node', '2 and 4 nodes', '1, 2 and 4 nodes'."""
    if counts == [1]:
        return '1 node'
    words = list(map(str, counts))
    return (', '.join(words[:-1]) + ' and ' if len(words) > 1 else '') + words[-1] + ' nodes'


def _count(items, noun):
    return f'{len(items)} {noun}{"s" if len(items) != 1 else ""}'


def _listed(names, most=4):
    return ', '.join(names[:most]) + (f' and {len(names) - most} more' if len(names) > most else '')
