"""A partition sweep judged node by node: each figure of each check (the same check, image,
settings and variable) on every node against the same figure on its partition's peers, by the one
peer rule (mlcheck.judging.peers.below_peers); nodes whose latest run failed; nodes expected but
never vetted; nodes that cannot be judged on the evidence (too few peers, a figure too noisy to
tell nodes apart, only some of their partition's tests, a failed multi-node run over them).

Every node of the sweep gets one verdict: healthy, drained, not judged or not vetted.

The records come from a selection (perf logs, the results database) of one-node runs, e.g. of
`reframe --distribute`. A record's node is the test's `%.nid=` parameter where its name has
one, else its job's node list when that names one node; either must be a host name
(hostlist.HOST_NAME), since it ends up in a printed scontrol line. Records of multi-node jobs say
nothing about one node's figures: a failed one is named with its nodes and reason (a slow node
of the node-pair sweep, mlcheck.judging.collectives.fabric_named, is drained; a slow pair only
together is a slow link; ranks that never reported in are mapped to their node), and its other
nodes are not judged; a passed pair sweep is said to have been read.
"""

import functools
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

from mlcheck.errors import InputError
from mlcheck.figures import directions, stack as stacks
from mlcheck.history import hostlist, samples as history
from mlcheck.judging.collectives import SLOW_LINK_SAID, SLOW_NODE_SAID, fabric_named
from mlcheck.judging import peers

# ReFrame's own parameters (--distribute's .nid and .part, --repeat's .repeat_no) in a test name
INTERNAL_PARAMETER = re.compile(r'\s+%\.\w+=\S+')
NODE_PARAMETER = re.compile(r'%\.nid=(\S+)')
MIN_PEERS = 4     # fewer nodes of a partition with a figure cannot outvote one of them
TOO_FEW = 'too few peers'
# the same on every node at one node, by definition: no figure to tell nodes apart
SAME_AT_ONE_NODE = frozenset({'scaling_efficiency'})
PAIR_SWEEP_FIGURE = 'slowest_pair_bw'     # the interconnect check's figure over node pairs
NEVER_REPORTED = re.compile(r'ranks? ([\d, -]+) never reported in')
NO_REASON = 'failed; a perf log keeps no reason: select the session'
PHASE_LABELS = re.compile(r'^(\s*\w[\w ]*:)+')
UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}')
STACK_FACTS = [name for name in stacks.FACTS if name != 'image']   # the image is the test's own


@dataclass(frozen=True)
class Rule:
    """A node is named when a figure is below its peers' upper quartile by more than `threshold`
    of it and by more than `spread_factor` of the peers' standard deviations (docs/node-sweep.md
    has the measured false-alarm rate of these defaults)."""
    threshold: float = 0.15
    spread_factor: float = 3.0


@dataclass(frozen=True)
class Figure:
    """One figure of one check, compared like with like across nodes."""
    partition: str
    test: str             # the test's name without ReFrame's own parameters
    settings: str
    var: str
    unit: str

    @property
    def label(self):
        return f'{short(self.test)} {self.var}'


@dataclass(frozen=True)
class Finding:
    """Why a node is drained, with where and when it was seen: the Slurm Reason's provenance."""
    said: str
    source: str           # the session UUID or the perf log
    ended: float          # when the run ended, Unix seconds

    @property
    def provenance(self):
        where = f'session {self.source}' if UUID.fullmatch(self.source or '') else \
            f'perf log {self.source.rsplit("/", 1)[-1]}' if self.source else 'no session'
        return f'{where}, ended {stamp(self.ended)}'

    def __str__(self):
        return f'{self.said} [{self.provenance}]'


@dataclass
class FigureVerdict:
    figure: Figure
    values: dict          # {node: value in the figure's unit}, the median of a node's repetitions
    higher_is_better: bool
    reference: float      # the peers' upper quartile, in the figure's unit (None without values)
    spread: float         # the peers' standard deviation, on the judged scale (None: too few)
    limit: float          # a node past this value is named, in the figure's unit
    named: list           # [(node, value, Finding)], worst first
    failed: list = field(default_factory=list)   # nodes where it ran and gave no value
    not_judged: str = ''  # why the peers cannot judge this figure ('' when they can)

    def shortfall(self, value):
        """How much worse than the peers' reference `value` is, as a fraction of the reference
        on the judged scale (0.2: a rate 20 % below, a time 1.25 times); 1 where not a value."""
        if not self.reference or value <= 0:
            return 1.0
        return 1 - (value / self.reference if self.higher_is_better else self.reference / value)


@dataclass
class Sweep:
    figures: list                      # [FigureVerdict], judged or not
    failed: dict                       # {node: [Finding]}: its latest run gave no value
    not_vetted: dict                   # {node: reason}: expected, no record
    unplaced: int = 0                  # records with no single node (multi-node jobs)
    nodes: list = field(default_factory=list)   # every node with a one-node record, sorted
    slow_links: dict = field(default_factory=dict)   # {(node, node): reason}, from node pairs
    not_judged: dict = field(default_factory=dict)   # {node: [why]}: neither healthy nor drained
    healthy: list = field(default_factory=list)      # judged healthy by every judged figure
    reruns: dict = field(default_factory=dict)       # {node: [passed on re-run ...]}
    stack: dict = field(default_factory=dict)        # {node: [its stack unlike its peers']}
    multi_node: list = field(default_factory=list)   # [sentence]: failed runs and pair sweeps read
    multi_node_failed: int = 0         # of those, failed runs
    left_out: list = field(default_factory=list)     # [sentence]: figures that tell no node apart

    @property
    def drain(self):
        """{node: [Finding]} of the nodes to drain: failed, then named by a judged figure."""
        found = {node: list(reasons) for node, reasons in self.failed.items()}   # failures first
        worst = sorted(((verdict.shortfall(value), node, finding) for verdict in self.figures
                        if not verdict.not_judged for node, value, finding in verdict.named),
                       key=lambda f: -f[0])
        for _, node, finding in worst:     # then the figures, furthest below the peers first
            found.setdefault(node, []).append(finding)
        return dict(sorted(found.items()))


def stamp(unix):
    """A run's end as the scontrol Reason and the output say it, in UTC."""
    if not unix:
        return 'at an unrecorded time'
    return datetime.fromtimestamp(unix, timezone.utc).strftime('%Y-%m-%dT%H:%MZ')


def higher_is_better(var, unit):
    """Which way a figure is better (mlcheck.figures.directions). Power, informational across an
    upgrade, is judged here as higher-is-better: on one partition at one time, a node drawing far
    less than its peers for the same work is capped or throttled."""
    return directions.better(var, unit) != directions.LOWER


def where(sample):
    """Where a record came from, for a one-line refusal."""
    return f'{sample.source or "a record"}: test {sample.name!r}'


def node_of(sample):
    """The node a record ran on, or None when it does not name exactly one; an InputError for a
    node that is not a host name."""
    param = NODE_PARAMETER.search(sample.name)
    if param:
        return hostlist.checked(param.group(1), where(sample) + ' (its %.nid)')
    if sample.num_nodes != 1 or not sample.nodelist:
        return None
    names = nodes_of(sample)
    return names[0] if len(names) == 1 else None


def nodes_of(sample):
    """The nodes of a record's job, in its node list's order (each a host name, or InputError)."""
    text = sample.nodelist.strip()
    if text[:2] in ("['", '["'):      # a list as Python prints it: ['nid001', 'nid002']
        text = ','.join(name.strip("'\" ") for name in text[1:-1].split(','))
    if hostlist.HOST_NAME.fullmatch(text):
        return [text]        # the common case, without parsing a host list
    try:
        return hostlist.expand(text)
    except InputError as e:
        raise InputError(f'{where(sample)}: its node list: {e}') from None


@functools.lru_cache(maxsize=4096)
def test_name(name):
    return INTERNAL_PARAMETER.sub('', name)


def short(test):
    """A test's name short enough for a Slurm Reason: 'MNISTDistributedCheck[image=host]'
    (a sweep's num_nodes is 1, said once)."""
    name, *params = test.replace('%num_nodes=1', '').split()
    return f"{name}[{','.join(p.lstrip('%') for p in params)}]" if params else name


def figure_of(sample):
    return Figure(sample.partition, test_name(sample.name), sample.settings, sample.var,
                  sample.unit)


def run_of(sample):
    """What one run of a test is on a node: its latest run counts."""
    return sample.partition, test_name(sample.name), sample.settings


def judge(found, rule=Rule(), expected=()):
    """The Sweep of the records `found` (Samples, failed ones with value None), with the nodes
    `expected` (host names) that must each have run their partition's checks."""
    placed = [(node_of(s), s) for s in found]
    multi_node = [s for node, s in placed if node is None]
    placed = [(node, s) for node, s in placed if node is not None]
    if not placed:
        raise InputError(f'no record names its node: {len(found)} records, none of a one-node '
                         'job (run the checks with -P num_nodes=1 --distribute=all)')
    placed, reruns = latest_runs(placed)
    left_out = sorted({f'{short(test_name(s.name))} {s.var}: the same on every node at one node'
                       for _, s in placed if s.var in SAME_AT_ONE_NODE})
    placed = [(n, s) for n, s in placed if s.var not in SAME_AT_ONE_NODE]
    by_figure = history.group([(n, s) for n, s in placed if s.value is not None],
                              lambda ns: figure_of(ns[1]))
    ran = history.group(placed, lambda ns: figure_of(ns[1]))     # failed runs included
    figures = [judge_figure(figure, node_values, rule, len({n for n, _ in ran[figure]}))
               for figure, node_values in sorted(by_figure.items(), key=lambda kv: kv[0].label)]
    failed = {}
    of_figure = {v.figure: v for v in figures}
    for node, s in placed:
        if s.value is None:
            if figure_of(s) in of_figure and node not in of_figure[figure_of(s)].failed:
                of_figure[figure_of(s)].failed.append(node)
            said = f'{short(test_name(s.name))} failed: ' + (s.problem or NO_REASON)
            if said not in [f.said for f in failed.setdefault(node, [])]:
                failed[node].append(Finding(said, s.source, s.time))
    nodes = sorted({node for node, _ in placed})
    multi = multi_node_verdicts(multi_node)
    for node, findings in multi.drained.items():
        failed.setdefault(node, []).extend(findings)
    sweep = Sweep(figures, failed, {}, len(multi_node), nodes, multi.slow_links, reruns=reruns,
                  stack=stack_outliers(placed), multi_node=multi.said,
                  multi_node_failed=multi.failed_runs, left_out=left_out)
    verdicts(sweep, placed, multi.not_judged, expected)
    return sweep


def verdicts(sweep, placed, unjudged, expected):
    """Fill in the not judged, not vetted and healthy nodes: one verdict per node, drained first."""
    drained = sweep.drain
    why = {}
    add = lambda node, said: said in why.setdefault(node, []) or why[node].append(said)
    # a node is expected to have run its own partition's tests, judged against its peers there
    tests = {}
    for node, s in placed:
        tests.setdefault(s.partition, {}).setdefault(node, set()).add(test_name(s.name))
    for partition, ran in tests.items():
        every = set().union(*ran.values())
        for node, own in ran.items():
            if own != every:
                add(node, f'ran only some of {partition}\'s tests: no record of '
                          + ', '.join(sorted(every - own)))
    judged_on = set()
    for v in sweep.figures:
        if v.not_judged.startswith(TOO_FEW):      # nothing backs any of its nodes
            for node in v.values:
                add(node, f'{v.figure.label}: {v.not_judged}')
        elif v.not_judged:                        # the nodes it would name are not judged
            for node, _, finding in v.named:
                add(node, f'{finding.said}, but {v.not_judged}')
        else:
            judged_on.update(v.values)
    for node in sweep.nodes:
        if node not in judged_on and node not in why:
            add(node, 'no figure of its was judged')
    for node, said in unjudged.items():
        for line in said:
            add(node, line)
    sweep.not_judged = {n: why[n] for n in sorted(why) if n not in drained}
    seen = set(sweep.nodes) | set(drained) | set(sweep.not_judged)
    sweep.not_vetted = {node: 'no record: never ran (held by users, down, or not selected)'
                        for node in expected if node not in seen}
    sweep.healthy = [n for n in sorted(set(sweep.nodes) | set(expected))
                     if n not in drained and n not in sweep.not_judged
                     and n not in sweep.not_vetted]


def latest_runs(placed):
    """The records of each node's latest run of each test, and {node: [sentence]} of the tests
    that failed and then passed on re-run: a repaired node is judged by its re-run. Where the
    records name their sessions (the results database), only the latest session's count; a
    perf log, which names none, keeps every passing run after the last failure."""
    kept, reruns = [], {}
    for (node, run), records in history.group(placed, lambda ns: (ns[0], run_of(ns[1]))).items():
        failed_at = max((s.time for _, s in records if s.value is None), default=None)
        passed_at = max((s.time for _, s in records if s.value is not None), default=None)
        if failed_at is not None and passed_at is not None:
            if passed_at > failed_at:       # the re-run's repetitions all count
                records = [(n, s) for n, s in records if s.value is not None and s.time > failed_at]
                reruns.setdefault(node, []).append(
                    f'{short(run[1])} passed on re-run at {stamp(passed_at)} after failing at '
                    f'{stamp(failed_at)}')
            else:
                records = [(n, s) for n, s in records if s.value is None and s.time > passed_at]
        sessions = {s.source for _, s in records}
        if len(sessions) > 1 and all(UUID.fullmatch(x) for x in sessions):
            newest = max(records, key=lambda ns: ns[1].time)[1].source
            records = [(n, s) for n, s in records if s.source == newest]
        kept += records
    return kept, dict(sorted(reruns.items()))


@dataclass
class MultiNode:
    drained: dict = field(default_factory=dict)      # {node: [Finding]}
    slow_links: dict = field(default_factory=dict)   # {(node, node): reason}
    not_judged: dict = field(default_factory=dict)   # {node: [why]}
    said: list = field(default_factory=list)         # a sentence per failed run or pair sweep read
    failed_runs: int = 0


def multi_node_verdicts(records):
    """What the latest run of each multi-node test over each node list says about its nodes: a
    failed one is named with its nodes and reason, and its nodes drained (the slow nodes of the
    pair sweep, the nodes of ranks that never reported in) or not judged (the others, whose
    check failed); a passed pair sweep is said to have been read."""
    found = MultiNode()
    runs = history.group(records, lambda s: (run_of(s), s.nodelist))
    for (run, _), samples in sorted(runs.items()):
        ended = max(s.time for s in samples)
        latest = [s for s in samples if s.time == ended]
        s = next((s for s in latest if s.problem), latest[0])
        nodes = nodes_of(s)
        what = f'{short(run[1])} on {hostlist.compress(nodes)} (ended {stamp(ended)})'
        if not any(x.value is None or x.result == 'fail' for x in latest):
            if any(x.var == PAIR_SWEEP_FIGURE for x in latest):
                found.said.append(f'pair sweep {what}: read, every node pair healthy')
            continue
        found.failed_runs += 1
        problem = s.problem
        named_nodes, named_links = fabric_named(problem)
        for node in list(named_nodes) + [n for pair in named_links for n in pair]:
            hostlist.checked(node, where(s) + ' (a node its failure names)')
        said = problem or NO_REASON
        missing = ranks_never_reported(problem, nodes, s.num_tasks)
        if missing:
            said += f' (on {hostlist.compress(missing)})'
        found.said.append(f'failed: {what}: {said}')
        prefix = f'{short(run[1])}: '
        for node, sentence in named_nodes.items():
            found.drained.setdefault(node, []).append(Finding(prefix + sentence, s.source, ended))
        for node in missing:
            found.drained.setdefault(node, []).append(
                Finding(f'{prefix}its ranks never reported in', s.source, ended))
        for link, sentence in named_links.items():
            found.slow_links.setdefault(link, prefix + sentence)
        if unexplained(problem):   # the check failed for a reason the named nodes do not explain
            for node in nodes:
                found.not_judged.setdefault(node, []).append(f'its multi-node run failed: {what}')
    return found


def unexplained(problem):
    """Whether a failure says more than which nodes and links were slow, or says nothing."""
    rest = SLOW_LINK_SAID.sub('', SLOW_NODE_SAID.sub('', problem or ''))
    # what is left once the phase's labels ('sanity: sanity error:') are off
    return rest == (problem or '') or bool(PHASE_LABELS.sub('', rest).strip(' ;'))


def ranks_never_reported(problem, nodes, num_tasks):
    """The nodes holding the ranks a failure says never reported in, by Slurm's block layout
    (rank r on node r // tasks per node, in the job's node list order); [] where unknown."""
    match = NEVER_REPORTED.search(problem or '')
    if not match or num_tasks <= 0 or num_tasks % len(nodes):
        return []
    per_node, held = num_tasks // len(nodes), []
    for span in match.group(1).replace(' ', '').split(','):
        first, _, last = span.partition('-')
        if not first.isdigit() or (last and not last.isdigit()):
            return []
        for rank in range(int(first), int(last or first) + 1):
            if rank // per_node < len(nodes) and nodes[rank // per_node] not in held:
                held.append(nodes[rank // per_node])
    return held


def stack_outliers(placed):
    """{node: [sentence]} of the nodes whose software stack differs from most of their peers'
    in the same test on the same partition: 'libfabric 1.20.1, 3 peers 1.22.0'."""
    latest = {}
    for node, s in placed:
        if s.stack and s.time >= latest.get((run_of(s), node), (0, ''))[0]:
            latest[(run_of(s), node)] = (s.time, s.stack)
    by_run = {}
    for (run, node), (_, text) in latest.items():
        by_run.setdefault(run, {})[node] = stacks.decode(text)
    found = {}
    for run, facts in by_run.items():
        for name in STACK_FACTS:
            values = {node: f[name] for node, f in facts.items() if f.get(name)}
            (common, count), = Counter(values.values()).most_common(1) or [(None, 0)]
            if 2 * count <= len(values):
                continue           # no majority to be unlike
            for node, value in sorted(values.items()):
                said = f'{stacks.FACTS[name]} {value}, {count} peers {common}'
                if value != common and said not in found.setdefault(node, []):
                    found[node].append(said)
    return {node: said for node, said in sorted(found.items()) if said}


def judge_figure(figure, node_samples, rule, ran):
    """One figure on every node against its peers. A lower-is-better figure (a time) is judged
    by its inverse, so that the rule's 'below' is always 'worse'. `ran`: how many nodes ran it,
    with a value or not."""
    per_node = history.group(node_samples, lambda ns: ns[0])
    values = {node: statistics.median(s.value for _, s in ns) for node, ns in per_node.items()}
    last = {node: max((s for _, s in ns), key=lambda s: s.time) for node, ns in per_node.items()}
    higher = higher_is_better(figure.var, figure.unit)
    judged = {node: _scale(v, higher) for node, v in values.items()
              if v > 0 or higher}
    verdict = peers.below_peers(judged, rule.threshold, rule.spread_factor,
                                functools.partial(healthy_spread, threshold=rule.threshold))
    found = lambda node, said: Finding(said, last[node].source, last[node].time)
    named = [(node, values[node], found(node, _reason(figure, values[node], judged[node], verdict,
                                                      higher)))
             for node, _ in verdict.named]
    # a time of 0 or less cannot be inverted: it is no figure, and is named as such
    named += [(node, v, found(node, f'{figure.label} = {v:g} {figure.unit}: not a time'))
              for node, v in values.items() if node not in judged]
    as_unit = lambda x: None if x is None or x <= 0 else _scale(x, higher)
    return FigureVerdict(figure, values, higher, as_unit(verdict.reference), verdict.spread,
                         as_unit(verdict.limit), named,
                         not_judged=why_not_judged(figure, judged, verdict, rule, ran))


def healthy_spread(values, threshold):
    """The peers' standard deviation, from the values within `threshold` of their upper quartile
    either way (None with fewer than peers.MIN_FOR_SPREAD): every healthy node counts, so it is
    steadier than the upper quarter's two order statistics at tens of nodes (docs/node-sweep.md),
    and no node past the threshold, slow or fast, widens it."""
    if len(values) < peers.MIN_FOR_SPREAD:
        return None
    reference = peers.upper_quartile(values)
    within = [v for v in values if abs(v - reference) <= threshold * reference]
    return statistics.stdev(within) if len(within) > 1 else 0.0


def why_not_judged(figure, judged, verdict, rule, ran):
    """Why the peers cannot judge a figure, '' when they can: too few nodes ran it (`ran`), or
    the healthy ones spread wider than the rule's margin (a figure too noisy to tell nodes
    apart)."""
    if ran < MIN_PEERS:
        return f'{TOO_FEW}: {ran} node(s) of {figure.partition} ran it, fewer than {MIN_PEERS}'
    named = {node for node, _ in verdict.named}
    healthy = [v for node, v in judged.items() if node not in named]
    sigma = statistics.stdev(healthy) if len(healthy) > 1 else 0
    if verdict.reference and sigma / verdict.reference > rule.threshold:
        return (f'its healthy nodes spread {100 * sigma / verdict.reference:.0f}% (sd), wider than '
                f"the rule's {100 * rule.threshold:g}% margin")
    return ''


def _scale(value, higher):
    return value if higher else 1 / value


def _reason(figure, value, judged, verdict, higher):
    """'MNIST... samples_per_s 776 samples/s, 20% below its peers (970; 5.1 sd)'."""
    reference = verdict.reference
    if higher:
        how = f'{100 * (1 - judged / reference):.0f}% below'
    else:
        how = f'{100 * (reference / judged - 1):.0f}% above'
    sigmas = ''
    if verdict.spread:
        sigmas = f'; {(reference - judged) / verdict.spread:.1f} sd'
    return (f'{figure.label} {value:.4g} {figure.unit}, {how} its peers '
            f'({_scale(reference, higher):.4g}{sigmas})')
