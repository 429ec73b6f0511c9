"""A slow node on a busy partition, seen in all the runs that used it (issue 49).

The physics: a node that got slower with the upgrade (a power cap, its NIC at half speed) slows
every run that uses it, by a similar fraction, and only after. Where a busy partition put each
test's repetitions on whichever nodes were free, that node's runs spread over many tests, one or
two of each: no test's rows see them beyond the noise (they are a minority of its runs), nor does
any cell of the likely cause (mlcheck.history.cells). Together they do. Each run's speed is its
residual from the same test's other runs on its side (the median of their logarithms), in units
of that figure's robust spread on that side; a node's runs after are ranked against its own runs
before (Mann-Whitney's one-sided test: exact whatever the shape of the noise, a heavy tail of
runs slowed by a job beside them included), so a node that was always a little slower than the
others is not named: only what changed. Every node and kind tried is controlled together
(Bonferroni at `level`), and a node is named only where its runs lost more than the threshold.

Two kinds of run per node, as the two kinds of slow node slow them: its training runs (a node
that computes slower slows each one, within a node and across) and its runs across nodes (a
link that sends slower slows only those, the interconnect's most).
"""

import bisect
import functools
import math
import statistics
from dataclasses import dataclass

from mlcheck.history.cells import INTERCONNECT, LOADER_VAR, common_to
from mlcheck.history.runs import runs_of
from mlcheck.history.samples import group

TRAINING, ACROSS = 'training runs', 'runs across nodes'
WITHIN = 'training runs within one node'     # not tried: what tells a slow node from its link
# a node's runs of one kind a side: fewer cannot reach a level of 1 in 10,000 or so over the
# partition's nodes (4 runs against 4: 1 in 70 at best)
MIN_RUNS = 4
# a test needs this many runs on a side for a residual from its other runs
MIN_TEST_RUNS = 3
# a node named is left out of the next one's runs: at most this many are named
MOST = 4


@dataclass(frozen=True)
class Scored:
    """One run's speed against its test's other runs on its side."""
    nodes: frozenset
    kind: frozenset       # of TRAINING, ACROSS
    residual: float       # log of its rate over the median of the others' (negative: slower)
    z: float              # ... in the robust spreads of its figures on its side
    always: frozenset     # the nodes every run of its test on its side used


@dataclass(frozen=True)
class SlowNode:
    nodes: tuple          # the node, or nodes that ran exactly the same runs (not told apart)
    kind: str             # TRAINING or ACROSS
    runs: int             # its runs of that kind after
    slower: int           # ... slower than its runs before by more than the threshold
    loss: float           # the share of speed its runs after lost against its runs before
    before: float         # the share its runs before lost against their tests' other runs
    beyond_others: float  # the share its runs after lost against the other nodes' runs after
    runs_before: int
    others: int           # the other nodes' runs of that kind after
    p: float              # the rank test's one-sided chance, against the others' runs after
    p_before: float       # ... against its own runs before


# the share of the report's false alarm (compare.Rule.false_alarm) that the nodes tried spend
# together: the first test, against the other nodes' runs after, is all that a partition where
# nothing changed can fail (Bonferroni over the nodes and kinds tried)
LEVEL_SHARE = 0.5
# the second, against the node's own runs before, tells a node that got slower from one that
# always was: a node as slow before passes it 1 time in 20, and its loss must then also exceed
# the threshold against its own runs before
CONFIRM = 0.05


def slow_nodes(before, after, threshold, level, confirm=CONFIRM):
    """[SlowNode] of one partition's samples (failed runs are no speed: left out), the clearest
    first. A node is named where its runs of a kind after are slower than the same kind of runs
    after on every other node (at `level` over every node and kind tried) and than its own runs
    before (at `confirm`), each by their ranks, and lost more than the `threshold` against its
    runs before. The runs of a node named are left out of the next one's (a node that shared
    jobs with the slow one lost through them)."""
    sides = {'before': _scored(before, 'before'), 'after': _scored(after, 'after')}
    found, explained, tries = [], set(), None
    for _ in range(MOST):
        trials = _trials(sides, explained, threshold)
        tries = tries or len(trials)
        named = [t for t in trials if t.p <= level / tries and t.p_before <= confirm and t.loss > threshold]
        if not named:
            return found
        best = min(named, key=lambda t: (t.p, -t.loss))
        found.append(best)
        explained |= set(best.nodes)
    return found


def _trials(sides, explained, threshold):
    """[SlowNode] of every node (nodes of the same runs once) and kind with the runs to test."""
    kept = {side: [r for r in runs if not r.nodes & explained] for side, runs in sides.items()}
    # the runs of each node, gathered by distinct node set (1,080 records of one list of 100,000
    # nodes are one set: issue 48's third security pass, F6), nodes of the same sets tried once
    on = {side: _by_node(runs) for side, runs in kept.items()}
    same = group(sorted(on['after'][1]), lambda n: tuple(tuple(on[side][1].get(n, ())) for side in ('after', 'before')))
    # each kind's runs after in the order of their speed, once: the rest of a node's keep it
    ordered = {kind: sorted((r for r in kept['after'] if kind in r.kind), key=lambda r: r.z) for kind in (TRAINING, ACROSS)}
    trials = []
    for of_sets, nodes in same.items():
        node = nodes[0]
        for kind in (TRAINING, ACROSS):
            after, before = ([r for k in sets for r in on[side][0][k] if kind in r.kind and node not in r.always]
                             for side, sets in zip(('after', 'before'), of_sets))
            if min(len(after), len(before)) < MIN_RUNS:
                continue
            rest = [r for r in ordered[kind] if node not in r.nodes]
            if len(rest) < MIN_RUNS:
                continue
            p = _slower([r.z for r in after], [r.z for r in rest], ordered=True)
            p_before = _slower([r.z for r in after], [r.z for r in before])
            middle = [statistics.median(r.residual for r in runs) for runs in (after, before, rest)]
            trials.append(SlowNode(tuple(nodes), kind, len(after),
                                   sum(r.residual - middle[1] < math.log1p(-threshold) for r in after),
                                   -math.expm1(middle[0] - middle[1]), -math.expm1(middle[1]),
                                   -math.expm1(middle[0] - middle[2]), len(before), len(rest),
                                   p, p_before))
    return trials


def _by_node(runs):
    """([[Scored] of each distinct node set], {node: [index of its sets]})."""
    sets = list(group(runs, lambda r: r.nodes).values())
    members = {}
    for k, of in enumerate(sets):
        for node in of[0].nodes:
            members.setdefault(node, []).append(k)
    return sets, members


def within_loss(before, after, node):
    """(runs, share lost) of `node`'s training runs within one node after against its own before
    (None where either side has fewer than 2): a link cannot slow them, a slow node does."""
    sides = [[r.residual for r in _scored(samples, side) if WITHIN in r.kind and node in r.nodes
              and node not in r.always] for samples, side in ((after, 'after'), (before, 'before'))]
    if min(map(len, sides)) < 2:
        return len(sides[0]), None
    return len(sides[0]), -math.expm1(statistics.median(sides[0]) - statistics.median(sides[1]))


# past this many pairs, Mann-Whitney's statistic is judged by its normal approximation (with its
# continuity correction, as scipy's), under it by its exact distribution
EXACT_PAIRS = 10_000


def _slower(runs, than, ordered=False):
    """The one-sided chance that `runs` rank this far below `than` under no change (Mann-Whitney:
    exact where no two tie and the pairs are few, else the normal approximation of its statistic),
    its statistic counted in one pass over `than` sorted (`ordered`: it already is)."""
    than = than if ordered else sorted(than)
    # the pairs where the run is the faster, ties half: few where the runs are the slower
    u = sum(bisect.bisect_left(than, z) + (bisect.bisect_right(than, z) - bisect.bisect_left(than, z)) / 2
            for z in runs)
    pairs = len(runs) * len(than)
    if pairs <= EXACT_PAIRS and len(set(runs) | set(than)) == len(runs) + len(than):
        return _exact(len(runs), len(than))[int(u)]
    z = (u + 0.5 - pairs / 2) / math.sqrt(pairs * (len(runs) + len(than) + 1) / 12)
    return 0.5 * math.erfc(-z / math.sqrt(2))


@functools.lru_cache(maxsize=256)
def _exact(n, m):
    """[P(U <= u)] of Mann-Whitney's statistic U for samples of n and m under no change: the
    coefficients of the Gaussian binomial (n + m choose n) in q, over (n + m choose n)."""
    n, m = min(n, m), max(n, m)
    counts = [1]
    for i in range(1, n + 1):
        # (m + i choose i): times (1 - q^(m + i)), over (1 - q^i), to its degree i x m
        counts = counts + [0] * m
        counts = [c - (counts[j - m - i] if j >= m + i else 0) for j, c in enumerate(counts)]
        for j in range(i, len(counts)):
            counts[j] += counts[j - i]
    total = math.comb(n + m, n)
    cumulative, running = [], 0
    for c in counts:
        running += c
        cumulative.append(running / total)
    return cumulative


def _scored(samples, side):
    """[Scored] of one side's runs that passed, recorded their nodes, and whose test ran at least
    MIN_TEST_RUNS times on this side: their rates (a unit per second, not the loader's), each as
    its log against the median of the test's other runs, in that figure's robust spread (1.4826
    x the median absolute residual of its check, figure and node count on this side)."""
    runs = [r for r in runs_of(samples, side) if r.nodes and not r.failed]
    residuals = {}      # (run index, figure) -> log residual
    for _, of in group([(i, var, unit, value) for i, r in enumerate(runs) for var, value, unit in r.figures
                        if unit.endswith('/s') and var != LOADER_VAR and value and value > 0],
                       lambda f: (runs[f[0]].test_key, f[1], f[2])).items():
        if len(of) < MIN_TEST_RUNS:
            continue
        logs = [math.log(value) for *_, value in of]
        for (i, var, unit, _), residual in zip(of, _from_others(logs)):
            residuals[(i, (runs[i].test.split()[0], var, unit, runs[i].num_nodes))] = residual
    spread = {figure: 1.4826 * statistics.median(abs(v) for _, v in of)
              for figure, of in group(list(residuals.items()), lambda kv: kv[0][1]).items()}
    always = {key: common_to([r.nodes for r in of]) for key, of in group(runs, lambda r: r.test_key).items()}
    scored = []
    for i, of in group([(i, figure, v) for (i, figure), v in residuals.items() if spread[figure] > 0],
                       lambda f: f[0]).items():
        r = runs[i]
        training = r.test.split()[0] != INTERCONNECT
        kind = frozenset(([TRAINING] if training else []) + ([ACROSS] if r.num_nodes > 1 else [])
                         + ([WITHIN] if training and r.num_nodes == 1 else []))
        if kind:
            scored.append(Scored(r.nodes, kind, statistics.fmean(v for *_, v in of),
                                 statistics.fmean(v / spread[figure] for _, figure, v in of), always[r.test_key]))
    return scored


def _from_others(values):
    """Each value less the median of the others (one sort, not one per value)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranked = [values[i] for i in order]
    out = [0.0] * len(values)
    for rank, i in enumerate(order):
        out[i] = values[i] - _median_without(ranked, rank)
    return out


def _median_without(ranked, rank):
    """The median of sorted `ranked` less its element at `rank`, by index."""
    m = len(ranked) - 1
    at = lambda k: ranked[k if k < rank else k + 1]
    return at(m // 2) if m % 2 else (at(m // 2 - 1) + at(m // 2)) / 2
