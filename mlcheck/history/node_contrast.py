"""A slow node on a busy partition, seen in all the runs that used it (issue 49).

The physics: a node that got slower with the upgrade (a power cap, its NIC at half speed) slows
every run that uses it, by a similar fraction, and only after. Where a busy partition put each
test's repetitions on whichever nodes were free, that node's runs spread over many tests, one or
two of each: no test's rows see them beyond the noise (they are a minority of its runs), nor does
any cell of the likely cause (mlcheck.history.cells). Together they do.

Like runs only: a node's runs are measured against the median of the same test's runs (check,
image, node count, inputs) on the same side that did not use it, never against a median its own
runs are part of; an image's fault slows every run of the test alike and moves none of these, a
node's slows its runs only. Each residual is put in its figure's spread (_spreads). Two tests, by
ranks (exact whatever the shape of the noise, a heavy tail of runs slowed by a job beside them
included):

1. the node's runs after against the other nodes' runs after (in the node's tests, each against
   the rest of those on other nodes; elsewhere against its test's other runs): Mann-Whitney,
   every node and kind tried controlled together (Bonferroni at `level`).
2. the node's runs after against its own runs before, each against its test's runs on other
   nodes on its side (the same reference on both sides: a node that always was slower loses
   nothing), like kind against like kind (_like; van Elteren's stratified rank sum), at CONFIRM
   x `level`: a node as slow before as after is named in at most that share of reports. Its
   runs after must also have lost more than the threshold against its runs before.

Why (the sixth red-team, on 8e4d574): each run was measured against the median of its test's
other runs, the node's own among them. At `--repeat 3` one slow run lowers the others' reference,
so a node's runs and the rest of their tests part about twice as far as the runs did (healthy
nodes named, in e37 beside an image's fault); a node capped 15 % on both sides measured 5-9 %
"slower than before" against references that held it on one side and not the other, and the
comparison with its runs before, at 5 %, let one such node in 20 through.

Two kinds of run per node, as the two kinds of slow node slow them: its training runs (a node
that computes slower slows each one, within a node and across) and its runs across nodes (a
link that sends slower slows only those, the interconnect's most).
"""

import bisect
import functools
import math
import statistics
from dataclasses import dataclass

from mlcheck.history.cells import INTERCONNECT, LOADER_VAR
from mlcheck.history.runs import runs_of
from mlcheck.history.samples import group

TRAINING, ACROSS = 'training runs', 'runs across nodes'
WITHIN = 'training runs within one node'     # not tried: what tells a slow node from its link
# a node's runs of one kind a side: fewer cannot reach a level of 1 in 10,000 or so over the
# partition's nodes (4 runs against 4: 1 in 70 at best)
MIN_RUNS = 4
# a test needs this many runs on a side for its runs to be ranked
MIN_TEST_RUNS = 3
# a node named is left out of the next one's runs: at most this many are named
MOST = 4
# a test of at most this many runs a side (any --repeat) has its other runs measured without the
# node's too: one run of 3 moves the median of the others by a spread
SMALL_TEST = 20


@dataclass(frozen=True)
class Scored:
    """One run that passed, with its rates' logs (a unit per second, not the loader's)."""
    nodes: frozenset
    kind: frozenset       # of TRAINING, ACROSS, WITHIN
    test: tuple           # its test's key on its side: like runs share it
    family: tuple         # (check, node count): its figures' spreads are measured over these
    logs: tuple           # ((figure, log of its value), ...)


@dataclass(frozen=True)
class SlowNode:
    nodes: tuple          # the node, or nodes that ran exactly the same runs (not told apart)
    kind: str             # TRAINING or ACROSS
    runs: int             # its runs of that kind after
    slower: int           # ... slower than its runs before by more than the threshold
    loss: float           # the share of speed its runs after lost against its runs before
    before: float         # the share its runs before lost against their tests' runs on other nodes
    beyond_others: float  # the share its runs after lost against their tests' runs on other nodes
    runs_before: int
    others: int           # the other nodes' runs of the same tests after
    p: float              # the stratified rank test's one-sided chance, against those
    p_before: float       # ... against its own runs before


# the share of the report's false alarm (compare.Rule.false_alarm) that the nodes tried spend
# together: the first test, against the other nodes' runs after, is all that a partition where
# nothing changed can fail (Bonferroni over the nodes and kinds tried); the second, against the
# node's own runs before, is at the same level: a node that always was as slow passes it no
# more often than that
LEVEL_SHARE = 0.5
# the second test's level, as a multiple of `level` (the first's over all the tries): twice it is
# the report's whole false alarm (--false-alarm, 1 %), the most a node as slow before as after
# may be named in. Measured (docs/performance-history.md): at 1 x a 10 % cap at --repeat 5 was
# named in 27 of 50 reports, at 2 x in 30 of 50; a node capped 15 % on both sides in none of 100.
CONFIRM = 2


def slow_nodes(before, after, threshold, level):
    """[SlowNode] of one partition's samples (failed runs are no speed: left out), the clearest
    first. A node is named where its runs of a kind after rank below the runs of the same tests
    after on other nodes (at `level` over every node and kind tried) and, against those tests'
    runs on other nodes, below its own runs before (at CONFIRM x `level`), and lost more than the
    `threshold` against its runs before. The runs of a node named are left out of the next
    one's (a node that shared jobs with the slow one lost through them)."""
    sides = {'before': _scored(before, 'before'), 'after': _scored(after, 'after')}
    found, explained, tries = [], set(), None
    for _ in range(MOST):
        trials = _trials(sides, explained, threshold)
        tries = tries or len(trials)
        named = [t for t in trials if t.p <= level / tries and t.p_before <= CONFIRM * level and t.loss > threshold]
        if not named:
            return found
        best = min(named, key=lambda t: (t.p, -t.loss))
        found.append(best)
        explained |= set(best.nodes)
    return found


def _trials(sides, explained, threshold):
    """[SlowNode] of every node (nodes of the same runs once) and kind with the runs to test."""
    kept = {side: [r for r in runs if not r.nodes & explained] for side, runs in sides.items()}
    tests = {side: _tests(runs) for side, runs in kept.items()}
    # the runs after against the others after in spreads measured over both sides (a slow
    # node's runs, which widen their tests' residuals after, are a minority of those), against
    # its runs before in each side's own (a partition noisier after is no change of the node)
    spread = _spreads(tests.values())
    for t in tests['after'].values():
        t.spread = {f: spread.get((t.runs[0].family, f)) for f in t.values}
    # the runs of each node, gathered by distinct node set (1,080 records of one list of 100,000
    # nodes are one set: issue 48's third security pass, F6), nodes of the same sets tried once
    on = {side: _by_node(runs) for side, runs in kept.items()}
    same = group(sorted(on['after'][1]), lambda n: tuple(tuple(on[side][1].get(n, ())) for side in ('after', 'before')))
    # each kind's runs after by test, their scores against all their tests' other runs, once
    alone = {kind: {key: [z for z in t.scores() if z is not None] for key, t in tests['after'].items() if kind in t.kind} for kind in (TRAINING, ACROSS)}
    ordered = {kind: sorted(z for zs in of.values() for z in zs) for kind, of in alone.items()}
    trials = []
    for of_sets, nodes in same.items():
        mine = {side: group([r for k in sets for r in on[side][0][k]], lambda r: r.test)
                for side, sets in zip(('after', 'before'), of_sets)}
        for kind in (TRAINING, ACROSS):
            # the node's runs and, in its tests, the others, each against that test's runs on
            # other nodes; in the tests it did not run, every run against all the others
            scored = {side: {key: tests[side][key].without(runs) for key, runs in mine[side].items()
                             if key in tests[side] and kind in tests[side][key].kind} for side in ('after', 'before')}
            after, before = ([v for own, *_ in scored[side].values() for v in own] for side in ('after', 'before'))
            if min(len(after), len(before)) < MIN_RUNS:
                continue
            minus = sorted(z for *_, dropped in scored['after'].values() for z in dropped)
            plus = sorted(z for _, others, _ in scored['after'].values() for z in others)
            rest = len(ordered[kind]) - len(minus) + len(plus)
            if rest < MIN_RUNS:
                continue
            # its runs after against its runs before of the same like kind (_like): a different
            # mix of them on each side is no change
            families = {side: group([(_like(tests[side][key].runs[0].family), run) for key in scored[side]
                                     for run in scored[side][key][0]], lambda fr: fr[0]) for side in ('after', 'before')}
            strata = [([run for _, run in runs], [run for _, run in families['before'][family]])
                      for family, runs in families['after'].items() if family in families['before']]
            shifts = [a[0] - b[0] for runs, than in strata for a in runs for b in than]
            if not shifts:
                continue
            loss = statistics.median(shifts)
            middle = [statistics.median(r for r, *_ in runs) for runs in (after, before)]
            trials.append(SlowNode(tuple(nodes), kind, len(after),
                                   sum(a[0] - statistics.median(b[0] for b in than) < math.log1p(-threshold)
                                       for runs, than in strata for a in runs),
                                   -math.expm1(loss), -math.expm1(middle[1]), -math.expm1(middle[0]),
                                   len(before), rest, _slower([z for _, z, _ in after], ordered[kind], minus, plus),
                                   _stratified([([z for *_, z in runs], [z for *_, z in than]) for runs, than in strata])))
    return trials


def _like(family):
    """What a slow node or link slows alike: the interconnect's runs, training within one node,
    training across nodes (a slow node slows a 1-node run more than one that also waits on the
    network; a slow link, the interconnect more than training)."""
    check, nodes = family
    return check == INTERCONNECT, nodes == 1


class Test:
    """One test's runs on one side, each figure's logs in order, and the spread of each figure:
    any run measured against the median of the test's runs that are not the run's own nor a
    given node's, without a pass over them per run."""

    def __init__(self, runs, spread):
        self.runs, self.kind = runs, runs[0].kind
        self.values, self.at = {}, {}
        for f in {f for r in runs for f, _ in r.logs}:
            ordered = sorted((v, i) for i, r in enumerate(runs) for g, v in r.logs if g == f)
            self.values[f] = [v for v, _ in ordered]
            self.at.update({(i, f): k for k, (_, i) in enumerate(ordered)})
        self.index = {id(r): i for i, r in enumerate(runs)}
        self.spread, self.own, self._scores = spread, spread, None

    def residuals(self, i, gone, own=False):
        """{figure: log of run i against the median of the figure's values less those at the
        indices `gone` (sorted, by figure) and its own (already in `gone` where `own`)}."""
        found = {}
        for f, v in self.runs[i].logs:
            removed = gone.get(f, []) if own else sorted(gone.get(f, []) + [self.at[i, f]])
            if len(self.values[f]) - len(removed) >= 1:
                found[f] = v - _median(self.values[f], removed)
        return found

    def z(self, found, own=False):
        """A run's residuals in its figures' spreads (its side's own where `own`), averaged."""
        spread = self.own if own else self.spread
        parts = [v / spread[f] for f, v in found.items() if spread.get(f)]
        return statistics.fmean(parts) if parts else None

    def scores(self):
        """[z of each run against all the test's other runs] (None where it has no spread), once."""
        if self._scores is None:
            self._scores = [self.z(self.residuals(i, {})) for i in range(len(self.runs))]
        return self._scores

    def without(self, mine):
        """([(log, z, z in its side's own spreads) of each run of `mine` against the test's runs on
        other nodes], [z of each of those against the rest of them], [the scores() they replace
        among the others' after]): none where fewer than 2 such runs."""
        own = {self.index[id(r)] for r in mine}
        if len(self.runs) - len(own) < 2 or len(self.runs) < MIN_TEST_RUNS:
            return [], [], [z for z in self.scores() if z is not None]     # no like runs: none of it
        gone = {f: sorted(self.at[i, f] for i in own if (i, f) in self.at) for f in self.values}
        mine_found = [self.residuals(i, gone, own=True) for i in sorted(own)]
        scored = [(statistics.fmean(found.values()), self.z(found), self.z(found, own=True)) for found in mine_found if found]
        # the others against the rest of them where the node's runs could move their median; in a
        # larger test (none of a --repeat) they keep their scores against all its other runs, and
        # only the node's own leave the others' (a pass over each test per node otherwise)
        if len(self.runs) <= SMALL_TEST:
            others = [self.z(self.residuals(i, gone)) for i in range(len(self.runs)) if i not in own]
            dropped = self.scores()
        else:
            others, dropped = [], [self.scores()[i] for i in own]
        return ([run for run in scored if None not in run], [z for z in others if z is not None],
                [z for z in dropped if z is not None])


def _tests(runs):
    """{test key: Test} of one side's runs of tests run MIN_TEST_RUNS times or more, each figure's
    spread its side's own."""
    built = {key: Test(of, {}) for key, of in group(runs, lambda r: r.test).items() if len(of) >= MIN_TEST_RUNS}
    spread = _spreads([built])
    for t in built.values():
        t.spread = t.own = {f: spread.get((t.runs[0].family, f)) for f in t.values}
    return built


def _spreads(sides):
    """{(check and node count, figure): its spread}: 1.4826 x the median absolute residual of its
    runs against their test's median (the median run itself left out), over `sides`' tests, each
    times sqrt(n / (n - 1)) for a test of n runs. Not against the median of the others: in a test
    of 3 or 5, one or two runs of a slow node move the others' median and so every residual of
    the test; the median of all the runs holds while they are fewer than half."""
    residuals = []
    for tests in sides:
        for t in tests.values():
            for f, values in t.values.items():
                n, middle = len(values), _median(values)
                scale = math.sqrt(n / (n - 1)) if n > 1 else 0.0
                residuals += [((t.runs[0].family, f), abs(v - middle) * scale)
                              for k, v in enumerate(values) if not (n % 2 and k == n // 2)]
    return {figure: 1.4826 * statistics.median(v for _, v in of)
            for figure, of in group(residuals, lambda kv: kv[0]).items()}


def _median(ranked, removed=()):
    """The median of sorted `ranked` less its elements at the sorted indices `removed`."""
    m = len(ranked) - len(removed)

    def at(j):          # the j-th of those kept
        for k in removed:
            if k <= j:
                j += 1
        return ranked[j]
    return at(m // 2) if m % 2 else (at(m // 2 - 1) + at(m // 2)) / 2


def _by_node(runs):
    """([[Scored] of each distinct node set], {node: [index of its sets]})."""
    sets = list(group(runs, lambda r: r.nodes).values())
    members = {}
    for k, of in enumerate(sets):
        for node in of[0].nodes:
            members.setdefault(node, []).append(k)
    return sets, members


def within_loss(before, after, node):
    """(runs, share lost) of `node`'s training runs within one node after against its own before,
    each against its test's runs on other nodes (None where either side has fewer than 2): a link
    cannot slow them, a slow node does."""
    sides = []
    for samples, side in ((after, 'after'), (before, 'before')):
        runs = _scored(samples, side)
        tests = _tests(runs)
        sides.append([log for key, mine in group([r for r in runs if WITHIN in r.kind and node in r.nodes],
                                                    lambda r: r.test).items() if key in tests
                      for log, *_ in tests[key].without(mine)[0]])
    if min(map(len, sides)) < 2:
        return len(sides[0]), None
    return len(sides[0]), -math.expm1(statistics.median(sides[0]) - statistics.median(sides[1]))


# past this many pairs, Mann-Whitney's statistic is judged by its normal approximation (with its
# continuity correction, as scipy's), under it by its exact distribution
EXACT_PAIRS = 10_000


# past this many pairs summed over its strata, a stratified rank test is judged by its normal
# approximation: its exact law is their laws convolved, a step per stratum over the pairs so far
EXACT_STRATIFIED_PAIRS = 2_000


def _stratified(strata):
    """The one-sided chance that, stratum by stratum, the runs rank this far below those they are
    compared with under no change: van Elteren's stratified rank sum over [(runs, than)], exact
    where no two tie and the pairs are few, else its normal approximation."""
    counted = [(len(runs), len(than), sum(sum((z > t) + (z == t) / 2 for t in than) for z in runs),
                len(set(runs) | set(than)) < len(runs) + len(than)) for runs, than in strata]
    u = sum(c[2] for c in counted)
    pairs = sum(n * m for n, m, *_ in counted)
    if pairs <= EXACT_STRATIFIED_PAIRS and not any(tied for *_, tied in counted):
        law = [1.0]
        for n, m, *_ in counted:
            cumulative = _exact(n, m)
            step = [cumulative[0]] + [b - a for a, b in zip(cumulative, cumulative[1:])]
            law = [sum(law[i] * step[k - i] for i in range(max(0, k - len(step) + 1), min(k, len(law) - 1) + 1))
                   for k in range(len(law) + len(step) - 1)]
        return min(1.0, sum(law[:int(u) + 1]))
    return _normal_tail(u, pairs, sum(n * m * (n + m + 1) / 12 for n, m, *_ in counted))


def _slower(runs, than, minus=(), plus=()):
    """The one-sided chance that `runs` rank this far below the sorted `than`, less the sorted
    `minus` and with the sorted `plus`, under no change (Mann-Whitney: exact where no two tie and
    the pairs are few, else the normal approximation of its statistic)."""
    below = lambda z: (bisect.bisect_left(than, z) - bisect.bisect_left(minus, z) + bisect.bisect_left(plus, z))
    at = lambda z: (bisect.bisect_right(than, z) - bisect.bisect_right(minus, z) + bisect.bisect_right(plus, z))
    # the pairs where the run is the faster, ties half: few where the runs are the slower
    u = sum(below(z) + (at(z) - below(z)) / 2 for z in runs)
    others = len(than) - len(minus) + len(plus)
    pairs = len(runs) * others
    tied = len(set(runs)) < len(runs) or any(at(z) > below(z) for z in runs)
    if pairs <= EXACT_PAIRS and not tied:
        return _exact(len(runs), others)[int(u)]
    return _normal_tail(u, pairs, pairs * (len(runs) + others + 1) / 12)


def _normal_tail(u, pairs, variance):
    """A rank sum's one-sided chance by its normal approximation (continuity corrected): `u` the
    pairs where the run is the faster, of `pairs`, its variance under no change `variance`."""
    z = (u + 0.5 - pairs / 2) / math.sqrt(variance)
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
    """[Scored] of one side's runs that passed and recorded their nodes: their rates (a unit per
    second, not the loader's) as logs, each run's kinds, and its test's key."""
    scored = []
    for r in runs_of(samples, side):
        logs = tuple(((var, unit), math.log(value)) for var, value, unit in r.figures
                     if unit.endswith('/s') and var != LOADER_VAR and value and value > 0)
        if not r.nodes or r.failed or not logs:
            continue
        training = r.test.split()[0] != INTERCONNECT
        kind = frozenset(([TRAINING] if training else []) + ([ACROSS] if r.num_nodes > 1 else [])
                         + ([WITHIN] if training and r.num_nodes == 1 else []))
        if kind:
            scored.append(Scored(r.nodes, kind, r.test_key, (r.test.split()[0], r.num_nodes), logs))
    return scored
