"""Naming ranks and their nodes in one-line problems: the leaf every judging module imports.

No module of mlcheck.judging is imported here, so no two of them import each other.
"""

import re

from mlcheck.contract import spans

# srun's line about the tasks of a node that ended (`srun: error: nid002: tasks 2-3: Killed`)
TASK_STATUS = re.compile(r'^srun: error: (?P<node>[^\s:]+): tasks? (?P<tasks>[\d,-]+): (?P<status>.*)')


RANKS = r'ranks? [\d, -]+'        # what rank_list writes, for a reader of its sentences


def rank_list(ranks):
    """'rank 3' or 'ranks 0-3, 6' for messages (parsed back by ranks_of)."""
    ranks = sorted(ranks)
    return ('rank ' if len(ranks) == 1 else 'ranks ') + ', '.join(spans(ranks))


def ranks_of(said):
    """The ranks of rank_list's text ('ranks 0-3, 6' -> [0, 1, 2, 3, 6]); [] for no such text."""
    return from_spans(said.split(' ', 1)[-1])


def from_spans(text):
    """'0-3, 6' -> [0, 1, 2, 3, 6], the inverse of contract.spans; [] for no such text."""
    found = []
    for span in text.replace(' ', '').split(','):
        first, _, last = span.partition('-')
        if not first.isdigit() or (last and not last.isdigit()):
            return []
        found += range(int(first), int(last or first) + 1)
    return found


def srun_task_lines(run):
    """(task, node, status) for each task srun reported on (`srun: error: nid002: tasks 2-3: Killed`)."""
    for line in run.errors.get(None, []):
        match = TASK_STATUS.match(line)
        if match:
            for task in from_spans(match.group('tasks')):
                yield task, match.group('node'), match.group('status').strip()


def task_statuses(run):
    return {task: status for task, _, status in srun_task_lines(run)}


def nodes_of_ranks(run):
    """{rank: node} from the ranks' own facts, else from srun's lines about their tasks."""
    nodes = {task: node for task, node, _ in srun_task_lines(run)}
    for name in ('rendezvous', 'rank'):
        nodes.update({f['rank']: f['node'] for f in run.events(name) if 'rank' in f and f.get('node')})
    return nodes


def group_by_error(errors):
    """{error: [ranks]} from {rank: error}."""
    grouped = {}
    for rank, error in sorted(errors.items()):
        grouped.setdefault(error, []).append(rank)
    return grouped


def group_by_node(run, members):
    """{node: [(rank, value)]} of `members` [(rank, value)], in their order; a rank of no known
    node stands alone, under the key (None, rank)."""
    placed = run.by_rank('rank')
    grouped = {}
    for rank, value in members:
        node = placed.get(rank, {}).get('node')
        grouped.setdefault(node if node else (None, rank), []).append((rank, value))
    return grouped
