"""The candidates of the likely cause (mlcheck.history.causes), what each predicts of the cells
(mlcheck.history.cells), and which of them the cells leave standing.

Each candidate reaches each cell: `must` (it predicts a loss there), `may` (it can explain one)
or not at all (it predicts no loss there). A hypothesis (one candidate, or two) stands when it
reaches every worse cell and no same cell it must reach excludes the loss it predicts there.
"""

import collections
import itertools
import re
from dataclasses import dataclass, field

from mlcheck.history import hostlist
from mlcheck.history.cells import (BEYOND_IMAGE, BEYOND_NODES, BEYOND_OTHERS, FAILED, INTERCONNECT, LOADER, MEMORY,
                                   RANK, SPEED, Z_SAME, images_of)
from mlcheck.history.samples import group

MUST, MAY = 'must', 'may'


def candidates(cells, nodes=None):
    """{name: (reach(cell) -> MUST, MAY or None, the node it is of or None)} of the candidates
    the cells make possible. `nodes`: {the name a node's candidates take: the node whose reach
    they have} (node_groups), every node of a cell not unchanged by default."""
    found = {'host stack': (_host, None)}
    images = images_of(cells)
    for image in images:
        found[f'image {image}'] = (lambda c, image=image: _image(c, image), None)
    # what a job holds: a rise of it slows nothing, so the speed's candidates leave it unexplained
    remembered = sorted({c.image for c in cells if c.aspect == MEMORY and c.status != 'same'})
    if remembered:
        found[of_memory('host stack')] = (lambda c: MUST if c.aspect == MEMORY else None, None)
    for image in remembered:
        found[of_memory(f'image {image}')] = (
            lambda c, image=image: MUST if c.aspect == MEMORY and c.image == image else None, None)
    if any(c.check == INTERCONNECT for c in cells):
        found[of_communication('host stack')] = (_host_communication, None)
    if any(c.num_nodes > 1 for c in cells):
        found['fabric'] = (_fabric, None)
        # the fabric as only the larger jobs use it: each multi-node count but the smallest
        for size in sorted({c.num_nodes for c in cells if c.num_nodes > 1})[1:]:
            found[fabric_from(size)] = (lambda c, size=size: _fabric(c) if c.num_nodes >= size else None, None)
        for image in images:
            if any(c.num_nodes > 1 and c.image == image for c in cells):
                found[network_layer(image)] = (lambda c, image=image: _image_network(c, image), None)
    if nodes is None:
        nodes = {node: node for node in sorted(worse_nodes(cells))}
    has_rank = any(c.aspect == RANK for c in cells)
    across = set().union(*(c.used or () for c in cells if c.num_nodes > 1))
    for named, node in nodes.items():
        found[f'node {named}'] = (lambda c, node=node: _node(c, node, gpu=False), node)
        if has_rank:
            found[f'a GPU of {named}'] = (lambda c, node=node: _node(c, node, gpu=True), node)
        if node in across:
            found[f'the link of {named}'] = (lambda c, node=node: _link(c, node), node)
    if any(c.aspect == LOADER for c in cells):
        found['data path'] = (_data_path, None)
    if has_rank:
        found['binding'] = (_binding, None)
    return found


def worse_nodes(cells):
    """The nodes of the cells not unchanged: each a candidate."""
    return set().union(*(c.used or () for c in cells if c.status != 'same'))


NODES_APART = 64     # more nodes than this: those that reach the same cells alike are one candidate


def node_groups(cells):
    """{name: the node whose reach they share} of the candidate nodes, each alone where they are
    NODES_APART or fewer; past that, the nodes that every cell (and the cell it is measured
    against) holds alike are one candidate, named as a host list (`nid[00000-99999]`): they
    predict the same of every cell, so trying them one by one, and in pairs, only repeats the work
    (issue 48's third security pass, F3 and F6: 1,800 nodes in pairs took 13 s, one list of
    100,000 nodes over 1,080 records 755 MB). Work in proportion to the distinct node sets' sizes."""
    candidates = worse_nodes(cells)
    if len(candidates) <= NODES_APART:
        return {node: node for node in sorted(candidates)}
    # partition refinement: a node's group is split by each distinct set it is in or not in
    sets = {}
    for c in cells:
        for of in (c, c.other) if c.other is not None else (c,):
            for nodes in (of.used, of.always):
                if nodes:
                    sets.setdefault(frozenset(nodes), None)
    group = dict.fromkeys(candidates, 0)
    count = 1
    for nodes in sets:
        split = {}
        for node in nodes:
            if node in group:
                old = group[node]
                if old not in split:
                    split[old], count = count, count + 1
                group[node] = split[old]
    members = {}
    for node, g in group.items():
        members.setdefault(g, []).append(node)
    found = {}
    for of in members.values():
        of.sort()
        found[hostlist.compress(of) if len(of) > 1 else of[0]] = of[0]
    return dict(sorted(found.items()))


MEMORY_OF = ' (its memory)'


def of_memory(layer):
    """The candidate of a layer's memory (the host stack's, an image's): what every job through
    it holds, higher after (a library that allocates more, a leak), in every run on every node;
    its speed unchanged. A node's memory is the node's candidate, which may raise it."""
    return layer + MEMORY_OF


COMMUNICATION_OF = ' (its communication)'


def of_communication(layer):
    """The candidate of the host stack's communication: what every image's collectives go
    through on one node and across nodes alike (the GPU driver's peer-to-peer path, the kernel's
    network stack), which may raise the interconnect's latency and leave training as it was: a
    few microseconds more a collective is lost in a step of milliseconds (the fourth red-team's
    d26: latency +20 % in every job, 1-node ones too, read `host stack` with `none of these also
    leaves unchanged what it should slow`)."""
    return layer + COMMUNICATION_OF


def _host_communication(c):
    # the interconnect at every job size, every image alike (nothing beyond another image), a
    # collective's more hops maybe more; training not: a communication loss that slows it too
    # is the host stack's own candidate, which must slow training and may the interconnect
    if c.aspect == SPEED:
        return None if c.training else MUST
    return MAY if c.aspect == BEYOND_NODES else None


def _host(c):
    # the host's libraries slow every image alike, so nothing beyond another image or count
    if c.aspect == SPEED:
        return MUST if c.training else MAY
    return MAY if c.aspect in (LOADER, MEMORY) else None


def _image(c, image):
    if c.image != image:
        return None
    if c.aspect == SPEED:
        return MUST if c.training else MAY
    return MAY if c.aspect in (LOADER, BEYOND_NODES, MEMORY) or c.aspect == BEYOND_IMAGE and c.other.image != image \
        else None


def network_layer(image):
    """The candidate of an image's own network layer (its collective library's network plugin,
    its libfabric): what its jobs send across nodes."""
    return f'image {image} (its network layer)'


def _image_network(c, image):
    # as the fabric, in one image only: a plugin RCCL no longer loads, a libfabric built
    # without the site's provider; within a node its jobs use shared memory, unchanged
    if c.image != image:
        return None
    if c.aspect == BEYOND_IMAGE:
        return MAY if c.other.image != image and c.num_nodes > 1 else None
    return _fabric(c)


def fabric_from(size):
    """The candidate of the fabric as jobs of `size` nodes and more use it: a global link or a
    switch that only jobs that large cross (Slurm gives a 4-node job of an idle partition nid001-004,
    across two switches, a 2-node one nid001-002 on one), or the routing of large jobs. It predicts
    what the fabric does, at `size` nodes and above only: a fault that shows only at one job size
    keeps the fabric among the causes (a red-team's d11: every 4-node job 40 % slower, the 2-node
    ones unchanged, read `one of nid003/nid004 (its link)`, the fabric ruled out)."""
    return f'fabric at {size} nodes and above'


def fabric_size(name):
    """The job size of a fabric_from() candidate's name; None for any other name."""
    found = re.fullmatch(r'fabric at (\d+) nodes and above', name)
    return int(found.group(1)) if found else None


def _fabric(c):
    # the loader too: a parallel file system reads over the fabric
    if c.num_nodes < 2 or c.aspect not in (SPEED, BEYOND_NODES, LOADER):
        return None
    return MUST if c.aspect == SPEED and not c.training else MAY


def _on(c, node):
    """Whether the cell's runs all used `node` (True), some did (None: may), none did (False)."""
    if c.used is None:
        return None
    return True if node in c.always else None if node in c.used else False


def _more_often(contrast, node):
    """Whether the runs that lost more can have used `node` more often than the others: not when
    the others always used it too (Slurm's placement puts every job on the lowest nodes)."""
    other = contrast.other
    return other.used is None or node not in other.always


def _node(c, node, gpu):
    """A node slower (every GPU of it), or one GPU of it: a job waits for its slowest rank, and
    the slowest rank's fraction falls where that rank is slower than the job's other ranks."""
    on = _on(c, node)
    if on is False:
        return None
    if c.aspect in (BEYOND_IMAGE, BEYOND_NODES, BEYOND_OTHERS):
        return MAY if _more_often(c, node) else None
    if c.aspect == RANK:
        if gpu:
            return MUST if on else MAY
        return MAY if c.num_nodes > 1 else None     # a whole node alone: its ranks equally slow
    if c.aspect == SPEED:
        return MUST if on and c.training else MAY
    return MAY


def _link(c, node):
    on = _on(c, node)
    if on is False or c.num_nodes < 2 or c.aspect not in (SPEED, BEYOND_NODES, BEYOND_IMAGE, BEYOND_OTHERS, LOADER):
        return None
    if c.aspect in (BEYOND_IMAGE, BEYOND_OTHERS):
        return MAY if _more_often(c, node) else None
    return MUST if on and c.aspect == SPEED and not c.training else MAY


def _data_path(c):
    if c.check == INTERCONNECT or c.aspect == RANK:
        return None
    if c.aspect == LOADER:
        return MUST
    # only the tests that read their data through the loader it measures
    return MAY if c.check.startswith('CIFAR') and c.aspect in (SPEED, BEYOND_NODES) else None


def _binding(c):
    if not c.training:
        return None
    return MUST if c.aspect == RANK else MAY if c.aspect in (SPEED, LOADER, BEYOND_NODES) else None


# more candidates than this are not tried in pairs (their pairs grow with the square): the line
# says so instead (issue 48's third security pass, F3)
PAIRED = 200

# --- elimination --------------------------------------------------------------------------------

@dataclass
class Evidence:
    """The cells by status and each candidate's reach as index sets: standing() is set algebra."""
    cells: list
    worse: frozenset = field(default_factory=frozenset)
    same: frozenset = field(default_factory=frozenset)
    unclear: frozenset = field(default_factory=frozenset)
    must: dict = field(default_factory=dict)
    reach: dict = field(default_factory=dict)      # MUST or MAY
    cleared: dict = field(default_factory=dict)    # the same cells that rule each out (_clears)
    untried: int = 0       # the candidates, where too many to try in pairs (standing())

    @classmethod
    def of(cls, cells):
        ev = cls(cells)
        by = lambda status: frozenset(i for i, c in enumerate(cells) if c.status == status)
        ev.worse, ev.same, ev.unclear = by('worse'), by('same'), by('unclear')
        # a node's candidates reach only the cells whose runs used it (or not recorded where)
        nodes = node_groups(cells)
        tried = set(nodes.values())
        on = collections.defaultdict(list)
        by_set = {}
        for i, c in enumerate(cells):
            if c.used is not None:
                by_set.setdefault(c.used, []).append(i)
        for used, of in by_set.items():
            for node in (used & tried if len(used) > len(tried) else tried & used):
                on[node] += of
        for node in on:
            on[node].sort()
        unknown = [i for i, c in enumerate(cells) if c.used is None]
        everywhere = range(len(cells))
        for name, (reach, node) in candidates(cells, nodes).items():
            marks = [(i, reach(cells[i])) for i in (everywhere if node is None else on[node] + unknown)]
            ev.must[name] = frozenset(i for i, m in marks if m == MUST)
            ev.reach[name] = frozenset(i for i, m in marks if m)
            ev.cleared[name] = frozenset(i for i in ev.same & ev.must[name] if ev._clears(i, name))
        return ev

    def _clears(self, i, name):
        """Whether the same cell `i`, which candidate `name` must slow, rules it out: where the
        cells of its kind (aspect, training or not) that moved are ones `name` must slow, only
        if its loss is clearly under theirs, pooled (the gap Z_SAME spreads of the two): the
        candidate predicts there the loss it caused where they moved, and a real fault may be
        under three thresholds (the fourth red-team's d19: the host stack 8 % slower, cleared by
        MNIST at 4 nodes over every image, 4.5 % +- 3.1 %, beside its moved cell's 18 % +- 5 %).
        Where none did, the premise that a real loss is at least SAME_BOUND thresholds, which
        the same cell's interval excludes."""
        c = self.cells[i]
        moved = [self.cells[j] for j in self.worse & self.must[name]]
        moved = [m for m in moved if m.aspect == c.aspect and m.training == c.training and m.loss < FAILED]
        if not moved:
            return True
        # figure by figure where both keep theirs (a latency loss beside an unchanged busbw: the
        # fourth red-team's d25), else the cells' medians; the figure that moved most decides
        shared = set(c.figures).intersection(*(m.figures for m in moved))
        pairs = [([m.figures[v] for m in moved], c.figures[v]) for v in sorted(shared)] or [
            ([(m.loss, m.spread) for m in moved], (c.loss, c.spread))]
        gaps = [_gap(losses, own) for losses, own in pairs if all(spread > 0 for _, spread in losses)]
        if not gaps:
            return True
        return max(gaps, key=lambda gap: gap[1])[0] > Z_SAME

    def stands(self, hypothesis):
        reach = frozenset().union(*(self.reach[c] for c in hypothesis))
        return self.worse <= reach and not any(self.cleared[c] for c in hypothesis)

    def hidden(self, hypothesis):
        """Unclear cells the hypothesis predicts unchanged: a second cause may hide there."""
        return self.unclear - frozenset().union(*(self.reach[c] for c in hypothesis))

    def standing(self):
        """The hypotheses left: every single candidate that stands, or else every pair; each with
        the pairs that a cause hidden in its unclear cells would make of it."""
        names = list(self.reach)
        left = [(n,) for n in names if self.stands((n,))]
        paired = len(names) <= PAIRED
        if not left and paired:
            left = [pair for pair in itertools.combinations(names, 2) if self.stands(pair)
                    and not any(self.stands((n,)) for n in pair)]
            left = [_ordered(pair, self) for pair in left]
        elif not left:
            self.untried = len(names)
        more = []
        for h in left:
            hidden = self.hidden(h)
            if hidden and len(h) == 1 and not paired:
                more.append(h + ('another cause',))
            elif hidden and len(h) == 1:
                more += [_ordered(h + (n,), self) for n in names if n not in h
                         and self.reach[n] & hidden and self.stands(h + (n,))]
            elif hidden:
                more.append(h + ('another cause',))
        return left, [h for h in dict.fromkeys(more) if h not in left]


def _gap(losses, own):
    """(the spreads by which the loss that [(loss, spread)] predict, pooled by precision, is
    above `own` (loss, spread); how clear their pool is on its own, in its spreads)."""
    weight = sum(1 / spread ** 2 for _, spread in losses)
    predicted = sum(loss / spread ** 2 for loss, spread in losses) / weight
    return (predicted - own[0]) / (1 / weight + own[1] ** 2) ** 0.5, predicted * weight ** 0.5


def _ordered(pair, ev):
    """The broader cause first: 'host stack, and image X beyond it'."""
    return tuple(sorted(pair, key=lambda n: -len(ev.must[n]) if n in ev.must else 0))



def leaning(ev, names, after=None):
    """[(z, name, loss beyond, its spread)] of the candidates `names`, the likeliest first: what
    the training speed cells each predicts slower (its `must`) lost beyond those it leaves alone
    (or beyond nothing, where it reaches all), each cell weighted by its precision, in spreads.
    Where no cell is clear alone (one run after a --repeat 3 baseline), the losses together still
    point: every run of one image 10-15 % slower, the others not (the sixth red-team's f23-f26
    listed every layer and node alike). `after`: as if each test had that many runs after, at the
    spread of one measured (the runs the baseline has stay as they are)."""
    speed = [i for i, c in enumerate(ev.cells) if c.aspect == SPEED and c.training and not c.whole
             and c.spread > 0 and c.loss < 1 and c.status != 'worse']
    variance = {i: _spread_with(ev.cells[i], after) ** 2 for i in speed}
    weight = lambda of: sum(1 / variance[i] for i in of)
    mean = lambda of: sum(ev.cells[i].loss / variance[i] for i in of) / weight(of)
    found = []
    for name in names:
        slowed = [i for i in speed if i in ev.must.get(name, ())]
        spared = [i for i in speed if i not in ev.reach.get(name, ())]
        if not slowed:
            continue
        base = (mean(spared), 1 / weight(spared)) if spared else (0.0, 0.0)
        beyond = lambda of: (mean(of) - base[0], (1 / weight(of) + base[1]) ** 0.5)
        loss, spread = beyond(slowed)
        # a layer under several images (the host stack, a node) slows each alike: where one
        # image lost clearly more than the others, it stands for them by its least (the sixth
        # red-team's e02: torch-2.14.1 15 % slower read `most likely host stack`)
        images = list(group(slowed, lambda i: ev.cells[i].image).values())
        if len(images) > 1 and _unalike([(mean(of), weight(of)) for of in images]):
            loss, spread = min((beyond(of) for of in images), key=lambda ls: ls[0] / ls[1])
        found.append((loss / spread, name, loss, spread))
    return sorted(found, reverse=True)


# the chance under which the images' losses are not alike (their chi-square about their mean):
# loose, so that two images slower and one not (e02, at 9 %) are caught; a host stack's alike
# losses are taken image by image one time in ten, which costs a lean only where each is short
UNALIKE = 0.1


def _unalike(means):
    """Whether the [(mean loss, weight)] of the images differ beyond their spreads."""
    from scipy.stats import chi2
    total = sum(w for _, w in means)
    middle = sum(m * w for m, w in means) / total
    return chi2.sf(sum(w * (m - middle) ** 2 for m, w in means), len(means) - 1) < UNALIKE


def _spread_with(c, after):
    """The spread of a cell's loss with `after` runs after (None: as measured): its baseline's
    part as it is, its runs' shrunk."""
    if after is None or not c.runs:
        return c.spread
    own = c.run_noise ** 2 / c.runs
    return max(c.spread ** 2 - own, 0.0) ** 0.5 if after == float('inf') else (
        max(c.spread ** 2 - own, 0.0) + c.run_noise ** 2 / after) ** 0.5
