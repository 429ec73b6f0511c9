"""What a node sweep reads from runs over several nodes (the node-pair sweep, a multi-node check):
they say nothing about one node's figures, but a failed one is never silently healthy. It is
named with its nodes and reason: the slow nodes of the pair sweep drained and its slow links
listed (their verdicts read back through the sentences that wrote them,
mlcheck.judging.collectives), the nodes of ranks that never reported in drained
(mlcheck.judging.sanity.NEVER_REPORTED), and, where the reason says more than that, its other
nodes not judged. A passed pair sweep is said to have been read.
"""

import re
from dataclasses import dataclass, field

from mlcheck.history import hostlist, samples as history
from mlcheck.history.node_records import Finding, nodes_of, run_of, short, stamp, where
from mlcheck.judging.collectives import fabric_named, fabric_unexplained
from mlcheck.judging.rank_lists import ranks_of
from mlcheck.judging.sanity import NEVER_REPORTED

PAIR_SWEEP_FIGURE = 'slowest_pair_bw'     # the interconnect check's figure over node pairs
NO_REASON = 'failed; a perf log keeps no reason: select the session'
# ReFrame's labels before a stored reason: the phase, then the error's kind ('sanity: sanity error:')
PHASE_LABELS = re.compile(r'^(\s*\w[\w ]*:)+')


@dataclass
class MultiNode:
    drained: dict = field(default_factory=dict)      # {node: [Finding]}
    slow_links: dict = field(default_factory=dict)   # {(node, node): reason}
    not_judged: dict = field(default_factory=dict)   # {node: [why]}
    said: list = field(default_factory=list)         # a sentence per failed run or pair sweep read
    failed_runs: int = 0


def multi_node_verdicts(records, check=hostlist.checked):
    """What the latest run of each multi-node test over each node list says about its nodes: a
    failed one is named with its nodes and reason, and its nodes drained (the slow nodes of the
    pair sweep, the nodes of ranks that never reported in) or not judged (the others, whose
    check failed); a passed pair sweep is said to have been read. `check(node, where)`: the
    check of a node name taken from the records (node_names.checked)."""
    found = MultiNode()
    runs = history.group(records, lambda s: (run_of(s), s.nodelist))
    for (run, _), samples in sorted(runs.items()):
        ended = max(s.time for s in samples)
        latest = [s for s in samples if s.time == ended]
        s = next((s for s in latest if s.problem), latest[0])
        nodes = [check(node, where(s) + ' (its node list)') for node in nodes_of(s)]
        what = f'{short(run[1])} on {hostlist.compress(nodes)} (ended {stamp(ended)})'
        failed = lambda x: x.value is None or x.result == 'fail'
        if not any(map(failed, latest)):
            if any(x.var == PAIR_SWEEP_FIGURE for x in latest):
                found.said.append(f'pair sweep {what}: read, every node pair healthy')
            before = max((x.time for x in samples if x.time < ended and failed(x)), default=None)
            if before is not None:     # a failure of the same sweep is never hidden by a pass
                found.said.append(f'failed, then passed: {what}, a run of it failed at {stamp(before)}')
                for node in nodes:
                    found.not_judged.setdefault(node, []).append(
                        f'{short(run[1])} on {hostlist.compress(nodes)} failed at {stamp(before)} '
                        f'and passed at {stamp(ended)}: a flaky fabric or one repaired between '
                        'them, the records cannot tell')
            continue
        found.failed_runs += 1
        problem = s.problem
        named_nodes, named_links = fabric_named(problem)
        for node in list(named_nodes) + [n for pair in named_links for n in pair]:
            check(node, where(s) + ' (a node its failure names)')
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
    rest = fabric_unexplained(problem)
    return rest == (problem or '') or bool(PHASE_LABELS.sub('', rest).strip(' ;'))


def ranks_never_reported(problem, nodes, num_tasks):
    """The nodes holding the ranks a failure says never reported in, by Slurm's block layout
    (rank r on node r // tasks per node, in the job's node list order); [] where unknown."""
    said = NEVER_REPORTED.find(problem)
    if not said or num_tasks <= 0 or num_tasks % len(nodes):
        return []
    per_node, held = num_tasks // len(nodes), []
    for rank in ranks_of(said[0]['ranks']):
        if rank // per_node < len(nodes) and nodes[rank // per_node] not in held:
            held.append(nodes[rank // per_node])
    return held
