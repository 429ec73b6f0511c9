"""Judging the interconnect program's output (src/pytorch/comm/collectives.py): the values every
rank checked, the result line, and nodes or node pairs far slower than the others.

Plain functions over a parsed run (mlcheck.judging.output.RunOutput) that return one-line problems.
"""


from mlcheck.judging.rank_lists import nodes_of_ranks, rank_list
from mlcheck.figures.quartiles import upper_quartile
from mlcheck.judging.peers import below_peers
from mlcheck.judging.sentences import NODE, Sentence

# The verdicts of slow_pairs(), written into a failed run's reason and read back from it by the
# node sweep (fabric_named, mlcheck-nodes): one node slow with every partner, one slow link
SLOW_NODE = Sentence('node {node} is slow: every pair with it is below {fraction:.0%} of the '
                     'upper-quartile pair without it ({reference:.3g} GB/s): {pairs}', node=NODE)
SLOW_LINK = Sentence('node pair {node} <-> {other}: {gbps:.3g} GB/s, below {fraction:.0%} of the '
                     'upper-quartile pair ({reference:.3g} GB/s)', node=NODE, other=NODE)


def problems(run, world_size, slow_pair_fraction):
    return values_checked(run, world_size) + result_reported(run) + slow_pairs(run, slow_pair_fraction)


def values_checked(run, world_size):
    """Every rank checked as many buffers as rank 0 measured, and found no wrong value."""
    reports = run.by_rank('values')
    result = run.result() or {}
    wanted = result.get('checked_per_rank')
    nodes = nodes_of_ranks(run)
    found = []
    missing = sorted(set(range(world_size)) - set(reports))
    if missing:
        found.append(f'{rank_list(missing)} reported no checked values')
    pairs_wanted = pair_buffers(run.events('pair'), nodes)
    for rank, report in sorted(reports.items()):
        node = report.get('node') or nodes.get(rank, '?')
        if wanted is not None and report.get('checked') != wanted:
            found.append(f'rank {rank} on {node} checked {report.get("checked")} buffers, '
                         f'rank 0 measured {wanted}')
        got = report.get('pairs_checked')    # absent in outputs of before the rounds
        if got is not None and got != pairs_wanted.get(rank, 0):
            found.append(f'rank {rank} on {node} checked {got} node-pair buffers, its node and '
                         f'local id took part in {pairs_wanted.get(rank, 0)} pairs')
        seen = set()
        for wrong in report.get('wrong', []):
            key = (wrong.get('op'), wrong.get('bytes'))
            if key in seen:       # the first wrong element of each buffer tells enough
                continue
            seen.add(key)
            found.append(f'rank {rank} on {node}: {wrong.get("op")} of {wrong.get("bytes")} B '
                         f'received {wrong.get("wrong")} wrong value(s) (element {wrong.get("index")}: '
                         f'got {wrong.get("got")}, expected {wrong.get("expected")})')
    return found


def pair_buffers(pairs, nodes):
    """{rank: how many node-pair buffers it must have checked}: one per pair fact whose nodes
    hold it among the first `ranks` ranks of its node (its local id, in rank order)."""
    taking_part = {}        # {node: each of its pairs' rank count}
    for pair in pairs:
        for node in pair['nodes']:
            taking_part.setdefault(node, []).append(pair.get('ranks', 0))
    seen, wanted = {}, {}
    for rank, node in sorted(nodes.items()):
        local = seen[node] = seen.get(node, -1) + 1
        wanted[rank] = sum(1 for ranks in taking_part.get(node, []) if local < ranks)
    return wanted


def result_reported(run):
    result = run.result()
    if result is None or not isinstance(result.get('busbw'), (int, float)):
        return ['no result line with the bus bandwidth (rank 0 did not report)']
    return []


def slow_pairs(run, fraction):
    """Nodes whose every pair is slow, then the pairs without them below `fraction` of those
    pairs' upper quartile (the one peer rule, judging.peers: half the pairs slow cannot drag it
    down to themselves, as they dragged the median): the slow link, named by both nodes. A slow
    node's pairs are its own, so they are no peers of a link: with every pair of 4 nodes, one
    slow node's and one slow link make 4 slow pairs of 6. See slow_nodes() for why nodes come
    first."""
    pairs = run.events('pair')
    if len(pairs) < 2:
        return []
    found, named = slow_nodes(pairs, fraction)
    links = [p for p in pairs if not named & set(p['nodes'])]
    verdict = below_peers(dict(enumerate(p['GBps'] for p in links)), 1 - fraction)
    return found + [SLOW_LINK.write(node=a, other=b, gbps=gbps, fraction=fraction,
                                    reference=verdict.reference)
                    for i, gbps in sorted(verdict.named) for a, b in [links[i]['nodes']]]


def slow_nodes(pairs, fraction):
    """One line per node whose every pair is below `fraction` of the upper quartile of the pairs
    without it, and the set of those nodes. A slow node slows all of its pairs: at 3 nodes two of
    the three, so the median pair is its own and the pair rule sees nothing; the pairs without
    it are the other nodes' links."""
    found, named = [], set()
    for node in sorted({n for p in pairs for n in p['nodes']}):
        own = [p for p in pairs if node in p['nodes']]
        others = [p['GBps'] for p in pairs if node not in p['nodes']]
        if not others:
            continue
        reference = upper_quartile(others)
        if all(p['GBps'] < fraction * reference for p in own):
            named.add(node)
            said = ', '.join(f'{a} <-> {b} {p["GBps"]:.3g} GB/s'
                             for p in own for a, b in [p['nodes']])
            found.append(SLOW_NODE.write(node=node, fraction=fraction, reference=reference,
                                         pairs=said))
    return found, named


def percent_of(value, limit):
    """`value` as a percentage of `limit` (both GB/s); None without a limit."""
    return 100 * (value / limit) if limit else None


def fabric_named(problem):
    """({node: sentence}, {(node, node): sentence}) of the slow nodes and links that a stored
    failure of the interconnect check names (slow_pairs' sentences)."""
    nodes = {m['node']: m[0] for m in SLOW_NODE.find(problem)}
    links = {(m['node'], m['other']): m[0] for m in SLOW_LINK.find(problem)}
    return nodes, links


def fabric_unexplained(problem):
    """What a stored failure says besides its slow nodes and links (`problem` without them)."""
    return SLOW_LINK.cut(SLOW_NODE.cut(problem))
