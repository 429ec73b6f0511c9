"""The one check of a node name taken from data (a perf log, a results database, a failure's
sentence) before a line that Slurm reads is printed with it: mlcheck-nodes' DRAIN and RESUME
lines and drain reasons, the report's separating commands (`-J exclude=`).

A host name (hostlist.checked) can still mean many nodes to Slurm: `scontrol update
NodeName=ALL` updates every node (in any case), and a NodeSet's or a partition's name stands
for its nodes. So a name is refused when it is ALL, a partition's name, or outside the nodes the
sweep knows (Slurm's own node list where it can be read, which holds no NodeSet name; else the
nodes of --expect).
"""

from mlcheck.errors import InputError
from mlcheck.history import hostlist

EVERY_NODE = 'all'     # Slurm's word for every node, compared without case


def refusal(name, partitions=(), known=None):
    """Why Slurm would read `name` as more than one node of the sweep, '' when it would not.
    `partitions`: the partition names known (Slurm's, or ReFrame's partition in the records);
    `known`: the nodes of the sweep's partitions (None: not known)."""
    if name.lower() == EVERY_NODE:
        return f"{name!r} is Slurm's name for every node"
    if name.lower() in {p.lower() for p in partitions}:
        return f"{name!r} is a partition's name, which Slurm may read as all its nodes"
    if known is not None and name not in known:
        return f"{name!r} is not one of the partition's nodes ({hostlist.compress(known)[:80]})"
    return ''


def checked(name, where, partitions=(), known=None):
    """`name` when it is a host name naming one node of the sweep; else an InputError saying
    `where` it came from and why (one line)."""
    hostlist.checked(name, where)
    why = refusal(name, partitions, known)
    if why:
        raise InputError(f'{where}: {why}: refused, no line printed with it')
    return name
