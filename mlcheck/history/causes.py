"""Which layer broke, by elimination: from the judged comparisons of an upgrade, the candidates
(each node that ran a worse job, a GPU of it, its link, the fabric, the host stack, each image,
the data path, the binding) that the measured cells leave standing, rendered as one line:
`likely cause: <it>` where one is left, `cannot tell: A or B` and the run that would separate
them where several are, the smallest pair where no single one explains the cells.
docs/performance-history.md states the rule.

A *cell* is one aspect of one test (a check in one image at one node count, with its settings):
its speed (every judged figure but the two below: rates, times, latency, memory), its slowest
rank's fraction, its loader's rate, on one set of nodes its runs after used. A cell is *worse*,
*same* or *unclear* against the noise (_status); a test that failed after is one worse cell, a
loss of every figure; one not run after takes no part. Two cells that
differ only in image, or only in node count, give a *contrast* cell: worse where one lost
clearly more than the other (something acted beyond what both share).

Each candidate reaches each cell: `must` (it predicts a loss there), `may` (it can explain one)
or not at all (it predicts no loss there). A hypothesis (one candidate, or two) stands when it
reaches every worse cell and no same cell is one it must reach.
"""

import collections
import functools
import itertools
import math
import statistics
from dataclasses import dataclass, field

from mlcheck.errors import InputError
from mlcheck.figures import stack
from mlcheck.figures.directions import LOWER, better, worse_by
from mlcheck.history import compare, hostlist
from mlcheck.history.samples import group
from mlcheck.judging.sanity import PLACEMENT_SAID

INTERCONNECT = 'InterconnectCheck'
LOADER_VAR = 'loader_images_per_s'      # the CIFAR-100 loader's own rate, when recorded
RANK_VAR = 'slowest_rank_fraction'      # falls when one rank's GPU is slower than its peers
# a figure that moves with several layers at once and singles out none: not evidence
IGNORED = {'communication_efficiency'}
Z = 3.5                 # how many spreads of the change make a loss clear
Z_SAME = 3.0            # ... and its absence (a true loss is at least SAME_BOUND thresholds)
SAME_BOUND = 3          # same: the loss is clearly under this many thresholds
FAILED = 1.0            # the loss of a run that failed
DEFAULT_NOISE = 0.05    # a repetition's spread where no test has repetitions to measure one
MUST, MAY = 'must', 'may'
SPEED, RANK, LOADER, BEYOND_IMAGE, BEYOND_NODES = 'speed', 'rank', 'loader', 'beyond image', 'beyond nodes'


@dataclass
class Cell:
    test: str
    check: str
    image: str
    num_nodes: int
    aspect: str
    status: str = 'unclear'        # 'worse', 'same' or 'unclear'
    loss: float = 0.0              # median of its figures' losses (1: failed)
    spread: float = 0.0            # of that loss
    used: frozenset = None         # nodes any run after used (None: not recorded)
    always: frozenset = frozenset()  # nodes every run after used
    other: 'Cell' = None           # a contrast's cell that lost less

    @property
    def training(self):
        return self.check != INTERCONNECT


@dataclass(frozen=True)
class Verdict:
    """What the report says first: kind 'cause' (one candidate, or a pair: the second beyond the
    first), 'cannot tell' (hypotheses: tuples of candidates) or 'binding' (failed placement)."""
    kind: str
    hypotheses: tuple
    evidence: str
    separating: str = ''

    @property
    def layer(self):
        return _name(self.hypotheses[0]) if self.kind != 'cannot tell' else 'cannot tell'

    @property
    def named(self):
        """Every candidate the line lists."""
        return {c for h in self.hypotheses for c in h}

    def line(self):
        if self.kind != 'cannot tell':
            return f'likely cause: {self.layer}: {self.evidence}'
        listed = ' or '.join(_name(h) for h in self.hypotheses) or 'no one cause nor pair of causes fits'
        return (f'likely cause: cannot tell: {listed}: {self.evidence}'
                + (f'; to separate them: {self.separating}' if self.separating else ''))


def _name(hypothesis):
    return hypothesis[0] if len(hypothesis) == 1 else f'{hypothesis[0]}, and {hypothesis[1]} beyond it'


def likely_causes(comparisons, before=(), after=(), rule=compare.Rule()):
    """[Verdict] of judged comparisons (mlcheck.history.compare.compare); `before` and `after`
    are their samples, failed ones included: their node lists, software stacks and, where the
    record keeps it (the results database, not a perf log), why a test failed."""
    found = []
    several = len({c.key[0] for c in comparisons}) > 1
    for partition, judged in sorted(group(comparisons, lambda c: c.key[0]).items()):
        side = lambda samples: [s for s in samples if s.partition == partition]
        for v in _of_partition(judged, side(before), side(after), rule):
            found.append(Verdict(v.kind, v.hypotheses,
                                 (f'on {partition}: ' if several else '') + v.evidence, v.separating))
    return found


def _of_partition(judged, before, after, rule):
    found = []
    reasons = {s.name: s.problem for s in after if s.value is None and s.problem}
    binding = sorted({c.key[1] for c in judged if c.verdict == compare.NO_RESULT
                      and PLACEMENT_SAID.search(reasons.get(c.key[1], ''))})
    if binding:
        found.append(Verdict('binding', (('binding',),), f'{_count(binding, "test")} failed the '
                             f'placement sanity ({_listed(binding)})'))
    rest = [c for c in judged if c.key[1] not in binding]
    cells = cells_of(rest, after, rule)
    # nothing clearly worse on its nodes, and yet a figure fails the gate: a loss too near the
    # noise to single out a cause, not "nothing got slower"
    if not any(c.status == 'worse' for c in cells) and not any(
            c.verdict in compare.FAILING and c.key in {s.key for s in after} for c in rest):
        return found
    return found + [diagnose(cells, _stack_changes(before, after))]


# --- the cells -------------------------------------------------------------------------------------

def cells_of(judged, after, rule=compare.Rule()):
    """[Cell] of one partition's judged comparisons: each test's aspects on each set of nodes its
    runs after used (each judged against all of before: the baseline ran fine), then the
    contrasts."""
    runs = group(after, lambda s: s.key)
    # the noise of a run: before's spread (the baseline has no fault, where after's spread also
    # holds the split between runs on a slow node and the rest), pooled as variances weighted by
    # their degrees of freedom (a median of few repetitions' spreads falls short of the noise),
    # one figure at a time (the slowest rank's fraction, a ratio of one job's ranks, moves less)
    noise = {var: _pooled(of) for var, of in group(judged, lambda c: c.key[2]).items()}
    figures, whole = {}, {}
    for c in judged:
        if c.key[2] in IGNORED or not c.before or not c.mean_before or c.key not in runs:
            continue        # not run after (or new, or 0 before: no relative change): no part
        test = (c.key[1], c.key[3], _aspect(c))
        before = c.mean_before, _own(c) if len(c.before) >= 2 else 0.0
        for used, of in group(runs[c.key], lambda s: _nodes(s.nodelist) or None).items():
            found = _figure(c, of, noise[c.key[2]], rule, before)
            if found:
                figures.setdefault(_failed(test, found) + (used,), []).append((c, found))
        found = _figure(c, runs[c.key], noise[c.key[2]], rule, before)
        if found:
            whole.setdefault(_failed(test, found) + (_used(runs[c.key]),), []).append((c, found))
    cells = _cells(figures)
    # the contrasts between tests: of all of a test's runs, where the noise is smallest
    return cells + _contrasts([c for c in _cells(whole) if c.aspect == SPEED], rule)


def _failed(test, found):
    """A failed run is a loss of every figure: one speed cell, whatever the figure."""
    return test[:2] + (SPEED,) if found[1] == FAILED else test


def _cells(figures):
    """[Cell] of {(name, settings, aspect, nodes): [(comparison, (status, loss, spread))]}."""
    cells = []
    for (name, _, aspect, used), found in figures.items():
        c = found[0][0]
        statuses = {status for _, (status, _, _) in found}
        always = used if not isinstance(used, tuple) else used[1]
        used = used if not isinstance(used, tuple) else used[0]
        cells.append(Cell(name, name.split()[0], c.image, c.num_nodes, aspect,
                          'worse' if 'worse' in statuses else 'same' if statuses == {'same'} else 'unclear',
                          statistics.median(loss for _, (_, loss, _) in found),
                          statistics.median(spread for _, (_, _, spread) in found), used, always or frozenset()))
    return cells


def _used(runs):
    """(nodes any run used, nodes every run used), or (None, None) where one is not recorded."""
    sets = [_nodes(s.nodelist) for s in runs]
    if not all(sets):
        return None, None
    return frozenset().union(*sets), frozenset.intersection(*sets)


def _figure(c, runs, noise, rule, before):
    """(status, loss, spread of the loss) of one figure's runs after on one set of nodes, against
    before's mean; a failed run makes it a loss of all; None for a figure with no direction."""
    if any(s.value is None for s in runs):
        return 'worse', FAILED, 0.0
    values = [s.value if s.unit == c.unit else compare.in_unit(s.value, s.unit, c.unit) for s in runs]
    mean_before, own = before
    if None in values or mean_before == 0:
        return None
    change = sum(values) / len(values) / mean_before - 1
    loss = worse_by(c.key[2], c.unit, change)
    if loss is None:
        return None
    if better(c.key[2], c.unit) == LOWER:
        loss = change / (1 + change)    # as the share of speed lost: a time +43 % is a rate -30 %
    # a repetition's spread: its own where measured, never under the partition's typical one
    spread = max(own, noise) * math.sqrt(1 / len(c.before) + 1 / len(values))
    # the slowest rank's fraction names a slow GPU where it fell by more than the ranks of a job
    # differ from day to day: three thresholds, as a real one does (it moves with few ranks)
    least = SAME_BOUND * rule.threshold if c.key[2] == RANK_VAR else rule.threshold
    return _status(loss, spread, rule, least), loss, spread


def _aspect(comparison):
    return {RANK_VAR: RANK, LOADER_VAR: LOADER}.get(comparison.key[2], SPEED)


def _pooled(comparisons):
    pooled = [(len(c.before) - 1, _own(c) ** 2) for c in comparisons if len(c.before) >= 2 and c.mean_before]
    dof = sum(n for n, _ in pooled)
    if not dof:
        return DEFAULT_NOISE
    # an upper bound of the noise, not its estimate: with few degrees of freedom the estimate
    # falls well short one time in a hundred (9 of them: under half the noise), so the bound
    # of the chi-square's 1 % quantile (Wilson and Hilferty's approximation)
    low = max(1 - 2 / (9 * dof) - 2.33 * math.sqrt(2 / (9 * dof)), 0.2) ** 3
    return math.sqrt(sum(n * v for n, v in pooled) / dof / low)


def _own(c):
    """Before's relative standard deviation."""
    return compare.stdev(c.before, c.mean_before) / abs(c.mean_before)


def _status(loss, spread, rule, least=None):
    if loss > (rule.threshold if least is None else least) and loss > Z * spread:
        return 'worse'
    if loss < rule.threshold and loss + Z_SAME * spread < SAME_BOUND * rule.threshold:
        return 'same'
    return 'unclear'


def _contrasts(cells, rule):
    """Worse or unclear cells of what one cell lost beyond another's that differs only in image,
    or only in node count (speed aspects of tests that ran after)."""
    found = []
    speed = [c for c in cells if c.status != 'unclear']
    for a, b in itertools.permutations(speed, 2):
        if a.check != b.check or a.status != 'worse':
            continue
        if a.image != b.image and a.num_nodes == b.num_nodes:
            aspect = BEYOND_IMAGE
        elif a.image == b.image and a.num_nodes > b.num_nodes:
            aspect = BEYOND_NODES
        else:
            continue
        beyond = a.loss - b.loss
        spread = math.hypot(a.spread, b.spread)
        status = _status(beyond, spread, rule)
        if status != 'same':
            found.append(Cell(a.test, a.check, a.image, a.num_nodes, aspect, status, beyond, spread,
                              a.used, a.always, other=b))
    return found


# --- the candidates and what each predicts -----------------------------------------------------

def candidates(cells):
    """{name: (reach(cell) -> MUST, MAY or None, the node it is of or None)} of the candidates
    the cells make possible."""
    found = {'host stack': (_host, None)}
    images = sorted({c.image for c in cells if c.aspect == SPEED})
    for image in images:
        found[f'image {image}'] = (lambda c, image=image: _image(c, image), None)
    if any(c.num_nodes > 1 for c in cells):
        found['fabric'] = (_fabric, None)
    worse_nodes = sorted(set().union(*(c.used or () for c in cells if c.status != 'same')))
    has_rank = any(c.aspect == RANK for c in cells)
    for node in worse_nodes:
        found[f'node {node}'] = (lambda c, node=node: _node(c, node, gpu=False), node)
        if has_rank:
            found[f'a GPU of {node}'] = (lambda c, node=node: _node(c, node, gpu=True), node)
        if any(c.num_nodes > 1 and node in (c.used or ()) for c in cells):
            found[f'the link of {node}'] = (lambda c, node=node: _link(c, node), node)
    if any(c.aspect == LOADER for c in cells):
        found['data path'] = (_data_path, None)
    if has_rank:
        found['binding'] = (_binding, None)
    return found


def _host(c):
    # the host's libraries slow every image alike, so nothing beyond another image or count
    if c.aspect == SPEED:
        return MUST if c.training else MAY
    return MAY if c.aspect == LOADER else None


def _image(c, image):
    if c.image != image:
        return None
    if c.aspect == SPEED:
        return MUST if c.training else MAY
    return MAY if c.aspect in (LOADER, BEYOND_NODES) or c.aspect == BEYOND_IMAGE and c.other.image != image \
        else None


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
    if c.aspect in (BEYOND_IMAGE, BEYOND_NODES):
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
    if on is False or c.num_nodes < 2 or c.aspect not in (SPEED, BEYOND_NODES, BEYOND_IMAGE, LOADER):
        return None
    if c.aspect == BEYOND_IMAGE:
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

    @classmethod
    def of(cls, cells):
        ev = cls(cells)
        by = lambda status: frozenset(i for i, c in enumerate(cells) if c.status == status)
        ev.worse, ev.same, ev.unclear = by('worse'), by('same'), by('unclear')
        # a node's candidates reach only the cells whose runs used it (or not recorded where)
        on = collections.defaultdict(list)
        for i, c in enumerate(cells):
            for node in c.used if c.used is not None else ():
                on[node].append(i)
        unknown = [i for i, c in enumerate(cells) if c.used is None]
        everywhere = range(len(cells))
        for name, (reach, node) in candidates(cells).items():
            marks = [(i, reach(cells[i])) for i in (everywhere if node is None else on[node] + unknown)]
            ev.must[name] = frozenset(i for i, m in marks if m == MUST)
            ev.reach[name] = frozenset(i for i, m in marks if m)
        return ev

    def stands(self, hypothesis):
        reach = frozenset().union(*(self.reach[c] for c in hypothesis))
        must = frozenset().union(*(self.must[c] for c in hypothesis))
        return self.worse <= reach and not (self.same & must)

    def hidden(self, hypothesis):
        """Unclear cells the hypothesis predicts unchanged: a second cause may hide there."""
        return self.unclear - frozenset().union(*(self.reach[c] for c in hypothesis))

    def standing(self):
        """The hypotheses left: every single candidate that stands, or else every pair; each with
        the pairs that a cause hidden in its unclear cells would make of it."""
        names = list(self.reach)
        left = [(n,) for n in names if self.stands((n,))]
        if not left:
            left = [pair for pair in itertools.combinations(names, 2) if self.stands(pair)
                    and not any(self.stands((n,)) for n in pair)]
            left = [_ordered(pair, self) for pair in left]
        more = []
        for h in left:
            hidden = self.hidden(h)
            if hidden and len(h) == 1:
                more += [_ordered(h + (n,), self) for n in names if n not in h
                         and self.reach[n] & hidden and self.stands(h + (n,))]
            elif hidden:
                more.append(h + ('another cause',))
        return left, [h for h in dict.fromkeys(more) if h not in left]


def _ordered(pair, ev):
    """The broader cause first: 'host stack, and image X beyond it'."""
    return tuple(sorted(pair, key=lambda n: -len(ev.must[n]) if n in ev.must else 0))


def diagnose(cells, stacks=None):
    """The Verdict of one partition's cells (at least one worse)."""
    ev = Evidence.of(cells)
    left, more = ev.standing()
    worse = [cells[i] for i in sorted(ev.worse) if cells[i].aspect in (SPEED, RANK, LOADER)]
    what = _what(worse, cells) if worse else (f'figures fail the gate, none by more than {Z:g} '
                                              'spreads of the noise on the nodes it ran on')
    if worse and len(left) == 1 and not more:
        return Verdict('cause', left, f'{what}; {_support(left[0], ev, {} if stacks is None else stacks)}')
    hypotheses = tuple(left + more)
    if not hypotheses:
        # none fits every cell: those that explain the losses, though some cell they predict
        # worse is not (one model of an image spared, a second cause that hides the first)
        covering = tuple((n,) for n in ev.reach if ev.worse <= ev.reach[n])
        return Verdict('cannot tell', covering,
                       f'{what}; none of these also leaves unchanged what it should slow, nor does a '
                       'pair', separating(covering, cells) if covering else
                       f'{RUN} --repeat 5 (more repetitions, to clear the noise)')
    why = (f'{len(ev.unclear)} cell(s) too close to the noise to clear another cause; '
           if more else '') + 'the cells fit each'
    stated = [s for s in (_stack_note(h, {} if stacks is None else stacks, cells) for h in left) if s]
    return Verdict('cannot tell', hypotheses, '; '.join([what, why] + stated),
                   separating(hypotheses, cells))


def _what(worse, cells):
    tests = sorted({(c.image, c.num_nodes) for c in worse})
    images = sorted({i for i, _ in tests})
    counts = sorted({n for _, n in tests})
    failed = len({c.test for c in worse if c.loss == 1.0})
    losses = [-c.loss for c in worse if c.loss < 1.0]
    measured = ', '.join(filter(None, [_range_of(losses), f'{failed} failed' if failed else '']))
    return (f'{_count(sorted({c.test for c in worse}), "test")} worse ({measured}: '
            f'{_listed(images)} at {_counts(counts)})')


def _support(hypothesis, ev, stacks):
    """What rules the others out: the cells it predicts unchanged that are, and its stack."""
    cells = ev.cells
    reach = frozenset().union(*(ev.reach[c] for c in hypothesis))
    fine = sorted({(cells[i].image, cells[i].num_nodes) for i in ev.same - reach
                   if cells[i].aspect == SPEED})
    parts = []
    if fine:
        parts.append(f'unchanged: {_listed([f"{i} at {_counts([n])}" for i, n in fine], 6)}')
    rank = [cells[i] for i in ev.worse if cells[i].aspect == RANK]
    if rank:
        parts.append(f'{RANK_VAR} {_range_of([-c.loss for c in rank])}')
    note = _stack_note(hypothesis, stacks, cells)
    return '; '.join(parts + ([note] if note else [])) or 'no other candidate fits'


def _stack_note(hypothesis, stacks, cells):
    """The recorded stack changes that fit the hypothesis: those every image shares for the host
    stack or the fabric, an image's own (less the shared ones) for an image."""
    images = sorted({c.image for c in cells if c.aspect == SPEED})
    shared = [change for change in stacks.get(images[0], [])
              if all(change in stacks.get(i, []) for i in images)] if len(images) > 1 else []
    notes = []
    for name in hypothesis:
        if name.startswith('image '):
            own = [c for c in stacks.get(name[len('image '):], []) if c not in shared]
            notes.append(f'{name[len("image "):]}\'s stack: {stack.change_line(own)}' if own else '')
        elif name in ('host stack', 'fabric'):
            notes.append(f'{stack.change_line(shared)} in every image' if shared else '')
    return '; '.join(filter(None, notes))


# --- the run that separates -----------------------------------------------------------------------

RUN = 'reframe -c checks/ -r'


def separating(hypotheses, cells):
    """A command that runs what tells the first hypotheses apart."""
    names = {n for h in hypotheses for n in h}
    # the first two nodes named: a run that leaves them out tells them from the rest (all of them
    # out could leave no node to run on)
    nodes = sorted(dict.fromkeys(n.split()[-1] for h in hypotheses for n in h
                                 if n.startswith(('node ', 'a GPU of ', 'the link of '))))[:2]
    # ReFrame's -J passes `exclude=...` on as `#SBATCH --exclude=...` (`-J --exclude` is refused)
    exclude = f'-J exclude={",".join(nodes)}' if nodes else ''
    if any(n.startswith('the link of ') for n in names):
        return f'{RUN} -n {INTERCONNECT} -P num_nodes=2 {exclude} (the interconnect on other nodes)'
    if nodes:
        return f'{RUN} -P num_nodes=1 {exclude} (the checks on other nodes)'
    images = sorted({c.image for c in cells if c.aspect == SPEED})
    counts = sorted({c.num_nodes for c in cells})
    if 'fabric' in names and 1 not in counts:
        return f'{RUN} -P num_nodes=1 (the checks within one node)'
    if 'data path' in names:
        return f'{RUN} -n CIFAR100ResNetCheck (it records {LOADER_VAR})'
    if any(n.startswith('image ') for n in names) and len(images) < 2:
        return f'{RUN} -P image=host -P num_nodes={counts[0]} (the host\'s own Python beside the image)'
    return f'{RUN} --repeat 5 (more repetitions, to clear the noise)'


# --- helpers ---------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4096)
def _nodes(nodelist):
    """The node names of a recorded node list ('nid001,nid002' or 'nid[001-003]'); none where
    it is absent or unreadable (the node is then not judged)."""
    try:
        return frozenset(hostlist.expand(nodelist)) if nodelist else frozenset()
    except InputError:
        return frozenset()


class _stack_changes(dict):
    """{image: [(fact, old, new)]} of each image whose recorded stack differs, worked out for the
    images a line names (most verdicts name none)."""

    def __init__(self, before, after):
        super().__init__()
        self.sides = [group([s for s in ss if s.stack], lambda s: s.image) for ss in (before, after)]

    def get(self, image, default=None):
        if image not in self and all(image in side for side in self.sides):
            self[image] = stack.changes(*([_decoded(s.stack) for s in side[image]] for side in self.sides))
        return super().get(image, default)


@functools.lru_cache(maxsize=256)
def _decoded(text):
    return stack.decode(text)


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
