"""The cells of the likely cause (mlcheck.history.causes): what the measured runs of an upgrade
say, each against the noise.

A *cell* is one aspect of one test (a check in one image at one node count, with its settings):
its speed (every judged figure but the three below: rates, times, latency), its slowest
rank's fraction, its loader's rate, its memory (a peak memory figure: not a speed), on one set of
nodes its runs after used. A cell is *worse*,
*same* or *unclear* against the noise (_status); a test that failed after is one worse cell, a
loss of every figure; one not run after takes no part. Two cells that
differ only in image, or only in node count, give a *contrast* cell: worse where one lost
clearly more than the other (something acted beyond what both share).
"""

import dataclasses
import itertools
import math
import statistics
from dataclasses import dataclass, field

from mlcheck.figures.directions import LOWER, better, worse_by
from mlcheck.history import compare
from mlcheck.history.runs import nodes_of as _nodes
from mlcheck.history.samples import group

INTERCONNECT = 'InterconnectCheck'
LOADER_VAR = 'loader_images_per_s'      # the CIFAR-100 loader's own rate, when recorded
RANK_VAR = 'slowest_rank_fraction'      # falls when one rank's GPU is slower than its peers
# what a job held, not how fast it ran: no network layer, link nor fabric raises it, and a rise
# of one image's on every node is no node's (the sixth red-team's f22: read `nid004`)
MEMORY_VARS = frozenset({'peak_host_memory', 'peak_gpu_memory'})
# a figure that moves with several layers at once and singles out none: not evidence
IGNORED = {'communication_efficiency'}
Z = 3.5                 # how many spreads of the change make a loss clear
Z_SAME = 3.0            # ... and its absence (a true loss is at least SAME_BOUND thresholds)
SAME_BOUND = 3          # same: the loss is clearly under this many thresholds
FAILED = 1.0            # the loss of a run that failed
DEFAULT_NOISE = 0.05    # a repetition's spread where no figure has repetitions to measure one
SPEED, RANK, LOADER, BEYOND_IMAGE, BEYOND_NODES = 'speed', 'rank', 'loader', 'beyond image', 'beyond nodes'
MEMORY = 'memory'
# what a test's runs on some nodes lost beyond its runs on others: no layer that every run of the
# test goes through (the host stack, an image, the fabric) slows one set of its runs alone
BEYOND_OTHERS = 'beyond its other runs'


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
    runs: int = 0                  # the runs after it rests on
    run_noise: float = 0.0         # the spread of one of its runs after (relative)
    pooled: int = 0                # the tests a node's contrast pools (_beyond_others_on_nodes)
    whole: bool = False            # of all the test's runs after, on whatever nodes (_test_wide)
    # {variable: (loss, spread)} of each figure: the median hides a latency loss beside an
    # unchanged busbw (candidates.Evidence._clears); {} where not kept (a contrast's)
    figures: dict = field(default_factory=dict, repr=False)

    @property
    def training(self):
        return self.check != INTERCONNECT


def cells_of(judged, after, rule=compare.Rule()):
    """[Cell] of one partition's judged comparisons: each test's aspects on each set of nodes its
    runs after used (each judged against all of before: the baseline ran fine), then the
    contrasts, and each test over all its runs (_test_wide)."""
    runs = group(after, lambda s: s.key)
    # the noise of a run: before's spread (the baseline has no fault, where after's spread also
    # holds the split between runs on a slow node and the rest), pooled as variances weighted by
    # their degrees of freedom (a median of few repetitions' spreads falls short of the noise),
    # one figure at a time (the slowest rank's fraction, a ratio of one job's ranks, moves less)
    noise = {var: _pooled(of) for var, of in group(judged, lambda c: c.key[2]).items()}
    # a figure no test repeated has no spread of its own: it takes the widest that was measured
    # here, never a guess narrower than what was seen (the 1-node busbw of two runs, one a side,
    # moved 26 %, which a 5 % guess called a clear loss while MNIST's measured spread was wide)
    widest = max((n for n in noise.values() if n is not None), default=DEFAULT_NOISE)
    noise = {var: widest if n is None else n for var, n in noise.items()}
    # ... and after's spread, where it is wider (a partition busier after maintenance): a run
    # after is a draw of after's noise, not of before's; robust, so that the runs of a minority
    # on one slow node do not widen it (the cells are there to see them)
    noise_after = {var: _pooled_after(of) for var, of in group(judged, lambda c: c.key[2]).items()}
    figures, whole, apart = {}, {}, set()
    for c in judged:
        if c.key[2] in IGNORED or not c.before or not c.mean_before or c.key not in runs:
            continue        # not run after (or new, or 0 before: no relative change): no part
        test = (c.key[1], c.key[3], _aspect(c))
        before = c.mean_before, _own(c) if len(c.before) >= 2 else 0.0
        placed = group(runs[c.key], lambda s: _nodes(s.nodelist, s.num_nodes) or None)
        if len(placed) > 1:
            apart.add(c.key[1])
        for used, of in placed.items():
            found = _figure(c, of, (noise[c.key[2]], noise_after[c.key[2]]), rule, before)
            if found:
                figures.setdefault(_failed(test, found) + (used,), []).append((c, found, len(of)))
        found = _figure(c, runs[c.key], (noise[c.key[2]], noise_after[c.key[2]]), rule, before)
        if found:
            whole.setdefault(_failed(test, found) + (_used(runs[c.key]),), []).append(
                (c, found, len(runs[c.key])))
    ran = {c.key[1]: len(runs[c.key]) for c in judged if c.key in runs}
    cells = _uncorroborated(_cells(figures), ran)
    # the contrasts between tests: of all of a test's runs, where the noise is smallest
    tests = _cells(whole)
    return (cells + _contrasts([c for c in tests if c.aspect == SPEED], rule)
            + _beyond_others(cells, rule) + _beyond_others_on_nodes(cells, rule) + _test_wide(tests, apart)
            + _every_image(whole, rule))


def _every_image(whole, rule):
    """Cells of one check's aspect at one node count over every image that ran it (`whole`: each
    test's figures over all its runs, _figure's), each figure's loss pooled over the images by
    precision, where every figure is clearly unchanged: a layer that every image's jobs go
    through alike (the fabric, the host stack) would have slowed them all, and one image's three
    runs of the interconnect are too few to clear it (the sixth red-team's f18: the fabric at 2
    and 4 nodes kept beside the fabric at 8, the 2-node interconnect proposed again, whose 9 runs
    were unchanged). Evidence against those layers only: its image is none, so no image's
    candidate reaches it."""
    figures = {}
    for (name, _, aspect, used), found in whole.items():
        for c, (_, loss, spread, _), runs in found:
            if loss < FAILED and spread > 0:
                figures.setdefault((name.split()[0], c.num_nodes, aspect), {}).setdefault(c.key[2], []).append(
                    (c.image, loss, spread, used, runs))
    cells = []
    for (check, num_nodes, aspect), of in sorted(figures.items()):
        pooled = []
        for tests in of.values():
            weights = [1 / spread ** 2 for _, _, spread, _, _ in tests]
            loss = sum(w * t[1] for w, t in zip(weights, tests)) / sum(weights)
            pooled.append((_status(loss, math.sqrt(1 / sum(weights)), rule), loss, math.sqrt(1 / sum(weights))))
        each = {variable: p[1:] for variable, p in zip(of, pooled)}
        tests = next(iter(of.values()))
        if len({t[0] for t in tests}) < 2 or any(status != 'same' for status, _, _ in pooled):
            continue
        used = [t[3] for t in tests]
        cells.append(Cell(f'{check} %num_nodes={num_nodes} in every image', check, None, num_nodes, aspect, 'same',
                          statistics.median(p[1] for p in pooled), statistics.median(p[2] for p in pooled),
                          union_of(u[0] for u in used) if all(u[0] for u in used) else None,
                          common_to([u[1] or frozenset() for u in used]), runs=sum(t[4] for t in tests), whole=True,
                          figures=each))
    return cells


def images_of(cells, across=False):
    """The images of the speed cells (of those across nodes, with `across`), sorted; the cells
    over every image (_every_image) have none."""
    return sorted({c.image for c in cells if c.aspect == SPEED and c.image is not None and (c.num_nodes > 1 or not across)})


def _test_wide(whole, apart):
    """The cells of each test over all its runs after (`whole`), where they ran on several sets
    of nodes (`apart`: those tests), clearly worse or clearly unchanged: a layer that every node
    shares (the fabric, an image, the host stack) acts on all of them alike, and pooled they are
    clear where a busy partition's runs on each set of nodes, one or two, are too few (the sixth
    red-team's f18: the 2- and 4-node jobs, unchanged over 9 runs each, kept the fabric at those
    sizes standing; f22: one image's memory 30 % higher in every run, read as a node that two of
    its runs used). Evidence for the candidates, never a finding of its own: the report names a
    cause only where a test's runs on one set of nodes are worse (causes.local)."""
    return [dataclasses.replace(c, whole=True) for c in whole
            if c.test in apart and c.status != 'unclear' and c.loss < FAILED]


def _uncorroborated(cells, ran):
    """The cells, with each loss that rests on a minority of its test's runs after and is
    repeated on none of its nodes made unclear: no two other runs that lost used one of them
    (`ran`: {test: its runs after}). A job that shared its nodes' cores or links with another
    (interference: a few runs in a hundred, 2-4 spreads slower on a busy partition) is one such
    run; a node repeats its loss on its other runs. Another minority of the same test's runs
    that lost on other nodes does not corroborate it: two interfered runs of one test on no
    common node are interference, not two links (the third red-team's w9c: taken as
    corroboration, it read `the link of nid005, and beyond it the link of nid006 ...`, exit 1).
    A layer every run goes through slows the majority of the test's runs, not a minority."""
    worse = [c for c in cells if c.status == 'worse' and c.loss < FAILED]
    # ... but not the slowest rank's fraction: a job beside another slows every rank of it, which
    # all wait at each step, while a fall of one rank against its peers by three thresholds is a
    # GPU's (c46: nid012's one run, its fraction 0.73 against 0.97, read 'nothing got slower')
    single = [c for c in worse if 2 * c.runs < ran.get(c.test, 0) and c.used and c.aspect != RANK]
    if not single:
        return cells
    runs = {(o.test, o.used) for o in worse}
    for c in single:
        others = [used or frozenset() for test, used in runs if (test, used) != (c.test, c.used)]
        # two other runs on one of its nodes: two interfered runs of 4 nodes share one often
        if not any(sum(node in used for used in others) >= 2 for node in c.used):
            c.status = 'unclear'
    return cells


def _failed(test, found):
    """A failed run is a loss of every figure: one speed cell, whatever the figure."""
    return test[:2] + (SPEED,) if found[1] == FAILED else test


def _cells(figures):
    """[Cell] of {(name, settings, aspect, nodes): [(comparison, (status, loss, spread, run's
    spread), runs)]}."""
    cells = []
    for (name, _, aspect, used), found in figures.items():
        c = found[0][0]
        statuses = {status for _, (status, *_), _ in found}
        always = used if not isinstance(used, tuple) else used[1]
        used = used if not isinstance(used, tuple) else used[0]
        cells.append(Cell(name, name.split()[0], c.image, c.num_nodes, aspect,
                          'worse' if 'worse' in statuses else 'same' if statuses == {'same'} else 'unclear',
                          statistics.median(loss for _, (_, loss, *_), _ in found),
                          statistics.median(spread for _, (_, _, spread, _), _ in found), used, always or frozenset(),
                          runs=max(n for _, _, n in found),
                          run_noise=statistics.median(run for _, (*_, run), _ in found),
                          figures={c.key[2]: (loss, spread) for c, (_, loss, spread, _), _ in found}))
    return cells


def _used(runs):
    """(nodes any run used, nodes every run used), or (None, None) where one is not recorded."""
    sets = [_nodes(s.nodelist, s.num_nodes) for s in runs]
    if not all(sets):
        return None, None
    return union_of(sets), common_to(sets)


def union_of(sets):
    """The nodes of any of `sets`, each distinct set taken once: 1,080 records of one list of
    100,000 nodes are one set (the third security pass, F6: 108 million names otherwise)."""
    distinct = set(sets)
    return next(iter(distinct)) if len(distinct) == 1 else frozenset().union(*distinct)


def common_to(sets):
    """The nodes of every one of `sets` (at least one), each distinct set taken once."""
    distinct = set(sets)
    return next(iter(distinct)) if len(distinct) == 1 else frozenset.intersection(*distinct)


def _figure(c, runs, noise, rule, before):
    """(status, loss, spread of the loss, spread of one run after) of one figure's runs after on
    one set of nodes, against before's mean; a failed run makes it a loss of all; None for a
    figure with no direction."""
    if any(s.value is None for s in runs):
        return 'worse', FAILED, 0.0, 0.0
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
    # a repetition's spread: its own where measured, never under the partition's typical one,
    # nor under that of these runs after: they ran on the same nodes, so a fault slowed them
    # alike, and one far from the others (a job beside another) is noise, not a loss
    within = compare.stdev(values) / abs(mean_before) if len(values) >= 2 else 0.0
    noise, noise_after = noise
    run_before = max(own, noise, within)
    run_after = max(run_before, noise_after)
    spread = math.sqrt(run_before ** 2 / len(c.before) + run_after ** 2 / len(values))
    # the slowest rank's fraction names a slow GPU where it fell by more than the ranks of a job
    # differ from day to day: three thresholds, as a real one does (it moves with few ranks)
    least = SAME_BOUND * rule.threshold if c.key[2] == RANK_VAR else rule.threshold
    return _status(loss, spread, rule, least), loss, spread, run_after


def _aspect(comparison):
    return MEMORY if comparison.key[2] in MEMORY_VARS else {RANK_VAR: RANK, LOADER_VAR: LOADER}.get(
        comparison.key[2], SPEED)


def _pooled(comparisons):
    return _bound([(len(c.before) - 1, _own(c) ** 2) for c in comparisons
                   if len(c.before) >= 2 and c.mean_before])


def _pooled_after(comparisons):
    """After's relative spread of a run: 1.4826 x the median absolute deviation of every run
    after from its test's median (the median run itself left out), pooled over the tests; robust,
    so that a minority of runs on one slow node does not widen it. 0 where no test has two runs."""
    residuals = []
    for c in comparisons:
        if len(c.after) < 2:
            continue
        middle = statistics.median(c.after)
        if middle:
            # a deviation from the center of n runs is short of one from the true level, as
            # from their mean: sqrt(n / (n - 1))
            wider = math.sqrt(len(c.after) / (len(c.after) - 1))
            residuals += [wider * abs(v / middle - 1) for v in c.after if v != middle]
    return 1.4826 * statistics.median(residuals) if residuals else 0.0


def _bound(pooled):
    """The chi-square 1 % upper bound of a pooled spread [(degrees of freedom, variance)], None
    where nothing was repeated."""
    dof = sum(n for n, _ in pooled)
    if not dof:
        return None
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


def _beyond_others(cells, rule):
    """Each worse cell's loss beyond its test's runs on other nodes that are not worse (their
    mean: a busy partition's runs of one test on a slow node against those on healthy ones);
    only where clearly worse: a contrast that is unclear rules nothing out."""
    found = []
    rest = group([c for c in cells if c.status != 'worse' and c.used], lambda c: (c.test, c.aspect))
    for a in cells:
        # a memory rise on some runs only is no candidate's to tell by nodes (their links)
        if a.status != 'worse' or a.loss >= FAILED or not a.used or a.aspect == MEMORY:
            continue
        others = [b for b in rest.get((a.test, a.aspect), []) if a.used - b.always]
        if not others:
            continue
        loss = statistics.fmean(b.loss for b in others)
        spread = math.hypot(a.spread, math.sqrt(sum(b.spread ** 2 for b in others)) / len(others))
        if _status(a.loss - loss, spread, rule) == 'worse':
            other = Cell(a.test, a.check, a.image, a.num_nodes, a.aspect, 'same', loss, spread,
                         union_of(b.used for b in others), common_to(b.always for b in others))
            found.append(Cell(a.test, a.check, a.image, a.num_nodes, BEYOND_OTHERS, 'worse', a.loss - loss,
                              spread, a.used, a.always, other=other, runs=a.runs))
    return found


def _beyond_others_on_nodes(cells, rule):
    """What the runs that used one node lost beyond the same tests' runs on other nodes, pooled
    over the tests that ran both ways: on a busy partition under --repeat 3 each run on a slow
    node is a cell of one run, too near the noise alone, while its loss repeats over every test
    it ran. Across nodes and within one node apart (a link slows only the first). Each test's
    difference is weighted by its precision; the pooled loss must be clear (_status) and stay so
    with any one test left out: a run that shared its node with another job is one test, not a
    cause. Node by node, the clearest first, and the runs of a node found are left out of the
    next one's (a node that shared jobs with the slow one lost only through them). Only where
    placement varied: an idle partition's jobs always take the same nodes, and no test ran both
    ways."""
    speed = [c for c in cells if c.aspect == SPEED and c.used and c.loss < FAILED]
    found, explained = [], set()
    while True:
        best = None
        for across in (False, True):
            of = [c for c in speed if (c.num_nodes > 1) == across and not c.used & explained]
            # the cells of each node, indexed once: the work is the cells' sizes together, not
            # nodes times cells (issue 48's security re-checks: 2,000 jobs of one test on their own
            # 50 nodes each took minutes, R2; the same jobs given to two tests, F4). A node pools
            # only over two tests or more: the others are not tried.
            totals = {test: _sums(cs) for test, cs in group(of, lambda c: c.test).items()}
            # nodes in the same node sets have the same cells, pooled once (one list of 100,000
            # nodes in every record: the third security pass, F6)
            by_set = {}
            for c in of:
                by_set.setdefault(c.used, []).append(c)
            sets, in_sets = list(by_set.values()), {}
            for i, used in enumerate(by_set):
                for node in used:
                    in_sets.setdefault(node, []).append(i)
            pooled_of = {}
            for node in sorted(in_sets):
                key = tuple(in_sets[node])
                if key not in pooled_of:
                    on = [c for i in key for c in sets[i]]
                    pooled_of[key] = _pooled_beyond(on, totals, rule) if len({c.test for c in on}) > 1 else None
                pooled = pooled_of[key]
                if pooled and (best is None or pooled[0] / pooled[1] > best[0][0] / best[0][1]):
                    best = (pooled, node, across, of)
        if best is None:
            return found
        (loss, spread, cell, tests), node, across, of = best
        found.append(Cell(f'the runs on {node}', '', None, 2 if across else 1, BEYOND_OTHERS, 'worse',
                          loss, spread, frozenset([node]), frozenset([node]),
                          other=Cell('', '', None, cell.num_nodes, SPEED, 'same',
                                     used=union_of(c.used for c in of if node not in c.used)),
                          runs=cell.runs, pooled=tests))
        explained.add(node)


def _sums(cells):
    """(cells, runs, runs x loss, runs x loss squared, the largest run noise) of one test's cells."""
    return (len(cells), sum(c.runs for c in cells), math.fsum(c.runs * c.loss for c in cells),
            math.fsum(c.runs * c.loss ** 2 for c in cells), max(c.run_noise for c in cells))


def _pooled_beyond(on_node, totals, rule):
    """(loss, spread, a cell, tests) of the runs on a node (`on_node`: its cells) beyond the same
    tests' runs elsewhere (`totals`: _sums of each test's cells), pooled over the tests, where
    clear with each test left out too; else None. A run's spread is measured here, among each
    test's runs about their group's mean (on the node, elsewhere), its 1 % upper bound, never under
    the cells' (a robust spread of five runs falls short of it)."""
    terms, squares = [], []
    order = {test: i for i, test in enumerate(totals)}
    for test, cs in sorted(group(on_node, lambda c: c.test).items(), key=lambda kv: order[kv[0]]):
        count, runs_all, s1, s2, noise = totals[test]
        if len(cs) == count:
            continue        # no run of it elsewhere
        on = _sums(cs)
        runs = [on[1], runs_all - on[1]]
        means = [on[2] / runs[0], (s1 - on[2]) / runs[1]]
        # each side's sum of squares about its mean, from the sums (the others' without listing them)
        square = max(0.0, on[3] - runs[0] * means[0] ** 2) + max(0.0, (s2 - on[3]) - runs[1] * means[1] ** 2)
        squares.append((sum(runs) - 2, square, noise))
        terms.append((means[0] - means[1], 1 / runs[0] + 1 / runs[1], cs))
    if len(terms) < 2:
        return None
    dof = sum(n for n, _, _ in squares)
    run = max([max(r for _, _, r in squares)] + ([_bound([(dof, sum(q for _, q, _ in squares) / dof)])] if dof else []))
    if not run:
        return None
    terms = [(d, run ** 2 * share, on) for d, share, on in terms]
    pooled = [_weighted(terms[:i] + terms[i + 1:]) for i in range(len(terms))] + [_weighted(terms)]
    if any(_status(loss, spread, rule) != 'worse' for loss, spread in pooled):
        return None
    on = [c for _, _, cs in terms for c in cs]
    return pooled[-1] + (Cell('', '', None, on[0].num_nodes, SPEED, runs=sum(c.runs for c in on)), len(terms))


def _weighted(terms):
    """(mean, its spread) of [(difference, variance, _)] weighted by precision."""
    weights = [1 / var for _, var, _ in terms]
    return (sum(w * d for w, (d, _, _) in zip(weights, terms)) / sum(weights), math.sqrt(1 / sum(weights)))


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


def beyond_image_pooled(cells, rule=compare.Rule()):
    """What the training tests of one image lost beyond the same tests (check and node count) in
    the other images, pooled over its tests: within a node and across nodes apart (an image's
    network layer slows only the second), or, where neither is clear alone, all of them (a cell
    across nodes, which the network layer may explain). With one run a test each is too near its
    noise (a red-team's d31a: after --repeat 1, torch-2.9.1 20 % slower, its six cells 13-21 %
    each, read `no test is clearly worse` with every layer and node listed), while the loss
    repeats over every test of the image. A cell only where clearly worse with any one test left
    out too; its `used` are the nodes without whose runs it is no longer clear (a node that ran
    one of the tests cannot be the cause of them all). Each test's difference is weighted by its
    precision."""
    speed = [c for c in cells if c.aspect == SPEED and c.training and c.loss < FAILED and c.spread > 0
             and c.used]
    found = []
    for image in sorted({c.image for c in speed}):
        terms = []
        for a in speed:
            others = [b for b in speed if (b.check, b.num_nodes) == (a.check, a.num_nodes) and b.image != image]
            if a.image == image and others:
                base = statistics.fmean(b.loss for b in others)
                terms.append((a.loss - base, a.spread ** 2 + sum(b.spread ** 2 for b in others) / len(others) ** 2,
                              (a, others)))
        pools = [[t for t in terms if (t[2][0].num_nodes > 1) == across] for across in (False, True)]
        pooled = list(filter(None, (_pooled_image(image, of, rule) for of in pools)))
        found += pooled or list(filter(None, [_pooled_image(image, terms, rule)]))
    return found


def _pooled_image(image, terms, rule):
    """beyond_image_pooled()'s cell of `terms` [(difference, variance, (cell, its like cells in
    the other images))], or None where not clear with every test and with each one left out."""
    tests = sorted({a.test for _, _, (a, _) in terms})
    clear = lambda of: bool(of) and _status(*_weighted(of), rule) == 'worse'
    if len(tests) < 2 or not all(clear([t for t in terms if t[2][0].test != test]) for test in tests + [None]):
        return None
    needs = frozenset(node for node in union_of(a.used for _, _, (a, _) in terms)
                      if not clear([t for t in terms if node not in t[2][0].used]))
    others = [b for _, _, (_, of) in terms for b in of]
    across = any(a.num_nodes > 1 for _, _, (a, _) in terms)
    within = any(a.num_nodes == 1 for _, _, (a, _) in terms)
    loss, spread = _weighted(terms)
    where = '' if across and within else ' across nodes' if across else ' at 1 node'
    return Cell(f'the tests of image {image}{where}',
                '', image, 2 if across else 1, BEYOND_IMAGE, 'worse', loss, spread, needs, needs,
                other=Cell('', '', '', 2 if across else 1, SPEED, 'same', used=union_of(b.used for b in others),
                           always=common_to(b.used for b in others)),
                runs=sum(a.runs for _, _, (a, _) in terms), pooled=len(tests))
