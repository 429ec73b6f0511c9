"""A partition sweep judged node by node: each figure of each check (the same check, image,
settings and variable) on every node against the same figure on its peers, by the one peer rule
(mlcheck.judging.peers.below_peers); nodes whose run failed; nodes expected but never vetted.

The records come from a selection (perf logs, the results database) of one-node runs, e.g. of
`reframe --distribute`. A record's node is the test's `%.nid=` parameter where its name has
one, else its job's node list when that names one node. Records of multi-node jobs say nothing
about one node and are counted, not judged, except the node-pair sweep's: an interconnect run
over the nodes that failed naming a node slow with every partner (drained as the node) or a
pair slow only together (listed as a slow link), mlcheck.judging.collectives.fabric_named.
"""

import functools
import re
import statistics
from dataclasses import dataclass, field

from mlcheck.errors import InputError
from mlcheck.figures import directions
from mlcheck.history import hostlist, samples as history
from mlcheck.judging.collectives import fabric_named
from mlcheck.judging.peers import below_peers

# ReFrame's own parameters (--distribute's .nid and .part, --repeat's .repeat_no) in a test name
INTERNAL_PARAMETER = re.compile(r'\s+%\.\w+=\S+')
NODE_PARAMETER = re.compile(r'%\.nid=(\S+)')
ONE_HOST = re.compile(r'[\w.-]+')


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


@dataclass
class FigureVerdict:
    figure: Figure
    values: dict          # {node: value in the figure's unit}, the median of a node's repetitions
    higher_is_better: bool
    reference: float      # the peers' upper quartile, in the figure's unit (None without values)
    spread: float         # the peers' standard deviation, on the judged scale (None: too few)
    limit: float          # a node past this value is named, in the figure's unit
    named: list           # [(node, value, reason)], worst first
    failed: list = field(default_factory=list)   # nodes where it ran and gave no value

    def shortfall(self, value):
        """How much worse than the peers' reference `value` is, as a fraction of the reference
        on the judged scale (0.2: a rate 20 % below, a time 1.25 times); 1 where not a value."""
        if not self.reference or value <= 0:
            return 1.0
        return 1 - (value / self.reference if self.higher_is_better else self.reference / value)


@dataclass
class Sweep:
    figures: list                      # [FigureVerdict]
    failed: dict                       # {node: [reason]}: a check ran on it and gave no value
    not_vetted: dict                   # {node: reason}: expected, no record
    unplaced: int = 0                  # records with no single node (multi-node jobs)
    nodes: list = field(default_factory=list)   # every node with a record, sorted
    slow_links: dict = field(default_factory=dict)   # {(node, node): reason}, from node pairs

    @property
    def drain(self):
        """{node: [reasons]} of the nodes to drain: named by a figure or failed."""
        found = {node: list(reasons) for node, reasons in self.failed.items()}   # failures first
        worst = sorted(((verdict.shortfall(value), node, reason) for verdict in self.figures
                        for node, value, reason in verdict.named), key=lambda f: -f[0])
        for _, node, reason in worst:     # then the figures, furthest below the peers first
            found.setdefault(node, []).append(reason)
        return dict(sorted(found.items()))


def higher_is_better(var, unit):
    """Which way a figure is better (mlcheck.figures.directions). Power, informational across an
    upgrade, is judged here as higher-is-better: on one partition at one time, a node drawing far
    less than its peers for the same work is capped or throttled."""
    return directions.better(var, unit) != directions.LOWER


def node_of(sample):
    """The node a record ran on, or None when it does not name exactly one."""
    param = NODE_PARAMETER.search(sample.name)
    if param:
        return param.group(1)
    if sample.num_nodes != 1 or not sample.nodelist:
        return None
    if ONE_HOST.fullmatch(sample.nodelist):
        return sample.nodelist      # the common case, without parsing a host list
    try:
        names = hostlist.expand(sample.nodelist.strip("[]'\" "))
    except InputError:
        return None
    return names[0] if len(names) == 1 else None


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


def judge(found, rule=Rule(), expected=()):
    """The Sweep of the records `found` (Samples, failed ones with value None), with the nodes
    `expected` (host names) that must each have run every check."""
    placed = [(node_of(s), s) for s in found]
    unplaced = sum(node is None for node, _ in placed)
    slow_nodes, slow_links = fabric_verdicts(s for node, s in placed if node is None)
    placed = [(node, s) for node, s in placed if node is not None]
    if not placed:
        raise InputError(f'no record names its node: {len(found)} records, none of a one-node '
                         'job (run the checks with -P num_nodes=1 --distribute=all)')
    by_figure = history.group([(n, s) for n, s in placed if s.value is not None],
                              lambda ns: figure_of(ns[1]))
    figures = [judge_figure(figure, node_values, rule)
               for figure, node_values in sorted(by_figure.items(), key=lambda kv: kv[0].label)]
    failed = {}
    of_figure = {v.figure: v for v in figures}
    for node, s in placed:
        if s.value is None:
            if figure_of(s) in of_figure and node not in of_figure[figure_of(s)].failed:
                of_figure[figure_of(s)].failed.append(node)
            reason = f'{short(test_name(s.name))} failed: ' + (
                s.problem or f'no value (result: {s.result or "fail"})')
            if reason not in failed.setdefault(node, []):
                failed[node].append(reason)
    nodes = sorted({node for node, _ in placed})
    tests = sorted({test_name(s.name) for _, s in placed})
    ran = history.group(placed, lambda ns: ns[0])
    not_vetted = {}
    for node in list(expected) + nodes:
        ran_tests = {test_name(s.name) for _, s in ran.get(node, [])}
        if not ran_tests:
            not_vetted[node] = 'no record: never ran (held by users, down, or not selected)'
        elif ran_tests != set(tests):
            missing = sorted(set(tests) - ran_tests)
            not_vetted[node] = f'no record of {", ".join(missing)}'
    for node, reasons in slow_nodes.items():
        failed.setdefault(node, []).extend(reasons)
    return Sweep(figures, failed, not_vetted, unplaced, nodes, slow_links)


def fabric_verdicts(multi_node):
    """({node: [reason]}, {(node, node): reason}) that the failed node-pair runs among the
    records `multi_node` name, each reason once."""
    nodes, links = {}, {}
    for s in multi_node:
        named_nodes, named_links = fabric_named(s.problem)
        where = f'{short(test_name(s.name))}: '
        for node, said in named_nodes.items():
            if where + said not in nodes.setdefault(node, []):
                nodes[node].append(where + said)
        for link, said in named_links.items():
            links.setdefault(link, where + said)
    return nodes, dict(sorted(links.items()))


def judge_figure(figure, node_samples, rule):
    """One figure on every node against its peers. A lower-is-better figure (a time) is judged
    by its inverse, so that the rule's 'below' is always 'worse'."""
    per_node = history.group(node_samples, lambda ns: ns[0])
    values = {node: statistics.median(s.value for _, s in ns) for node, ns in per_node.items()}
    higher = higher_is_better(figure.var, figure.unit)
    judged = {node: _scale(v, higher) for node, v in values.items()
              if v > 0 or higher}
    verdict = below_peers(judged, rule.threshold, rule.spread_factor)
    named = [(node, values[node], _reason(figure, values[node], judged[node], verdict, higher))
             for node, _ in verdict.named]
    # a time of 0 or less cannot be inverted: it is no figure, and is named as such
    named += [(node, v, f'{figure.label} = {v:g} {figure.unit}: not a time')
              for node, v in values.items() if node not in judged]
    as_unit = lambda x: None if x is None or x <= 0 else _scale(x, higher)
    return FigureVerdict(figure, values, higher, as_unit(verdict.reference), verdict.spread,
                         as_unit(verdict.limit), named)


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
