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

from mlcheck.figures import stack
from mlcheck.history import compare
from mlcheck.history.samples import group

INTERCONNECT = 'InterconnectCheck'
LOADER_VAR = 'loader_images_per_s'     # the CIFAR-100 loader's own rate, when recorded
# words of the placement sanity's failure reasons (mlcheck.judging.sanity)
BINDING_WORDS = re.compile(r'affinity|cpu mask|binding|local rank|visible devices', re.I)
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
    nodes: set = field(default_factory=set)

    @property
    def loss(self):
        """Its median loss; a failed cell counts as wholly lost."""
        return 1.0 if self.failed else statistics.median(self.worse) if self.worse else 0.0


def likely_causes(comparisons, after=(), reasons=None, before=()):
    """[Cause] of judged comparisons (mlcheck.history.compare.compare); `before` and `after` are
    the samples (for node lists and software stacks), `reasons` an optional {test name: failure
    reason} (the report has none: perf logs do not record why a test failed)."""
    found = []
    for partition, judged in sorted(group(comparisons, lambda c: c.key[0]).items()):
        side = lambda samples: [s for s in samples if s.partition == partition]
        causes = _of_partition(judged, side(before), side(after), reasons or {})
        prefix = f'on {partition}: ' if len({c.key[0] for c in comparisons}) > 1 else ''
        found += [Cause(c.layer, prefix + c.evidence) for c in causes]
    return found


def _of_partition(judged, before, after, reasons):
    causes = []
    binding = sorted({c.key[1] for c in judged if c.verdict == compare.NO_RESULT
                      and BINDING_WORDS.search(reasons.get(c.key[1], ''))})
    if binding:
        causes.append(Cause('binding', f'{_count(binding, "test")} failed the placement sanity '
                                       f'({_listed(binding)})'))
    loader = [c for c in judged if c.key[2] == LOADER_VAR]
    cells = _cells([c for c in judged if c.key[2] != LOADER_VAR and c.key[1] not in binding],
                   before + after)
    worse = [c for c in cells.values() if c.failing]
    causes += _data_path(loader, cells)
    if not worse:
        return causes
    stacks = _stack_changes(before, after)
    for layer in (_host, _image, _fabric):
        named = layer(cells, stacks)
        if named:
            return causes + [_unless_one_node(named, cells)]
    return causes + [_node(cells) or Cause('cannot tell', _why_not(cells))]


def _cells(judged, samples):
    nodes = {s.name: _nodes(s.nodelist) for s in samples}
    cells = {}
    for c in judged:
        check, rate = c.key[1].split()[0], c.unit.endswith('/s')
        if not rate and c.verdict != compare.NO_RESULT:
            continue
        cell = cells.setdefault((check, c.image, c.num_nodes), Cell(check, c.image, c.num_nodes))
        cell.nodes |= nodes.get(c.key[1], set())
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
    images, counts = {c.image for c in training}, {c.num_nodes for c in training}
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
            change = stacks.get(image)
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


def _unless_one_node(cause, cells):
    """The named layer, unless every worse cell ran on one node that no fine cell ran on: then
    that node could be the cause as well."""
    suspects = _suspect_nodes(cells)
    if not suspects:
        return cause
    return Cause('cannot tell', f'{cause.layer} or node {_listed(sorted(suspects))}: every slower run '
                 f'used it and no unchanged one did; run the checks at 1 node on it and on '
                 f'another node (the partition sweep). {cause.layer}: {cause.evidence}')


def _suspect_nodes(cells):
    worse = [c for c in cells.values() if c.failing]
    if any(not c.nodes for c in cells.values()):
        return set()
    shared = set.intersection(*(c.nodes for c in worse))
    fine_nodes = set().union(*(c.nodes for c in cells.values() if not c.failing))
    return shared - fine_nodes


def _node(cells):
    """`node N`: every worse cell ran on N, no fine one did, and a 1-node run on N is worse
    while 1-node runs on other nodes are fine (per-node data, e.g. from the sweep)."""
    suspects = _suspect_nodes(cells)
    if len(suspects) != 1:
        return None
    node = next(iter(suspects))
    alone = [c for c in cells.values() if c.num_nodes == 1]
    on_it = [c for c in alone if c.nodes == {node}]
    elsewhere = [c for c in alone if node not in c.nodes]
    if not on_it or not elsewhere or not _split(list(cells.values()), lambda c: node in c.nodes):
        return None
    worse = [c for c in cells.values() if c.failing]
    return Cause(f'node {node}', f'every slower or failed run used {node} ({_range(worse)}), 1-node '
                                 f'runs on {_listed(sorted(set().union(*(c.nodes for c in elsewhere))))} '
                                 'unchanged')


def _data_path(loader, cells):
    worse = [c for c in loader if c.verdict in compare.FAILING]
    if not worse:
        return []
    lost = statistics.median(1.0 if c.worse is None else c.worse for c in worse)
    training = [c for c in cells.values() if c.check == worse[0].key[1].split()[0]]
    if training and _mean_loss(training) * CONTRAST >= lost:
        return [Cause('cannot tell', f'the loader figure {LOADER_VAR} is {-lost:+.0%} and its '
                      'training figures lost as much: the data path or the whole run')]
    return [Cause('data path', f'{LOADER_VAR} {-lost:+.0%} in {_count(worse, "test")}, its '
                               f'training figures {_range(training) if training else "not compared"}')]


def _why_not(cells):
    """What the slower runs are, and which run would separate the layers."""
    worse = [c for c in cells.values() if c.failing]
    images = sorted({c.image for c in cells.values() if c.check != INTERCONNECT})
    counts = sorted({c.num_nodes for c in cells.values()})
    bad_images = sorted({c.image for c in worse})
    bad_counts = sorted({c.num_nodes for c in worse})
    what = (f'{_count(worse, "run")} slower or failed ({_range(worse)}: '
            f'{_listed(bad_images)} at {_counts(bad_counts)})')
    if len(images) < 2:
        advice = f'run a second image at {_counts(counts)} (image or host stack)'
    elif 1 not in counts:
        advice = f'run {_listed(bad_images)} at 1 node (fabric or the host stack)'
    elif not any(c.check == INTERCONNECT and c.num_nodes > 1 for c in cells.values()) \
            and all(n > 1 for n in bad_counts):
        advice = 'run the interconnect check at 1 and 2 nodes (fabric or the images\' own communication)'
    elif len(worse) == 1:
        cell = worse[0]
        advice = (f'one run only: repeat {cell.check} in {cell.image} at {cell.num_nodes} node(s) '
                  f'on other nodes, and at other node counts')
    else:
        advice = ('they fit no one layer (mixed, or too close to the noise): repeat with '
                  '--repeat 5 and compare again')
    return f'{what}; {advice}'


def _nodes(nodelist):
    """The node names of a node list: 'nid001,nid002' or Slurm's 'nid[001-003,007]'."""
    found = set()
    for prefix, ranges, plain in re.findall(r'([^,\[]+)\[([^\]]*)\]|([^,\[\]]+)', nodelist or ''):
        if plain:
            found.add(plain.strip())
            continue
        for part in ranges.split(','):
            low, _, high = part.partition('-')
            for n in range(int(low), int(high or low) + 1):
                found.add(f'{prefix}{n:0{len(low)}d}')
    return found


def _stack_changes(before, after):
    """{image: change line} of each image whose recorded stack differs."""
    sides = [group([s for s in ss if s.stack], lambda s: s.image) for ss in (before, after)]
    lines = {}
    for image in set(sides[0]) & set(sides[1]):
        changed = stack.changes(*([stack.decode(s.stack) for s in side[image]] for side in sides))
        lines[image] = changed
    return lines


def _shared_changes(stacks, images):
    """'; libfabric 1.20 -> 1.22 in every image' for the changes every image shares."""
    each = [set(stacks.get(image) or ()) for image in images]
    shared = [change for change in stacks.get(images and sorted(images)[0], []) or []
              if all(change in mine for mine in each)] if each and all(each) else []
    return f'; {stack.change_line(shared)} in every image' if shared else ''


def _mean_loss(cells):
    return statistics.fmean(c.loss for c in cells)


def _range(cells):
    losses = sorted(-c.loss for c in cells if not c.failed)
    failed = sum(c.failed for c in cells)
    text = (f'{losses[0]:+.0%}' if losses[0] == losses[-1] else f'{losses[0]:+.0%} to {losses[-1]:+.0%}') \
        if losses else ''
    return ', '.join(filter(None, [text, f'{failed} failed' if failed else '']))


def _counts(counts):
    if counts == [1]:
        return '1 node'
    return ' and '.join([', '.join(map(str, counts[:-1])), str(counts[-1])][-2:] if len(counts) > 1
                        else [str(counts[0])]) + ' nodes'


def _count(items, noun):
    return f'{len(items)} {noun}{"s" if len(items) != 1 else ""}'


def _listed(names, most=4):
    return ', '.join(names[:most]) + (f' and {len(names) - most} more' if len(names) > most else '')
