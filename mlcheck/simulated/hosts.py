"""/etc/hosts for the simulated cluster: every node's name resolves to a loopback address.

Jobs use the node names as host names (`scontrol show hostnames` gives PyTorch's MASTER_ADDR), so
each must resolve; a name the machine does not know (the resolver is asked first: DNS included)
gets a line `127.0.0.1 NAME` marked as ours, and a name that resolves off the machine is an error
naming the file to fix: a line of ours would shadow a real host of that name while the cluster
is up (issue 48).
"""

import socket

from mlcheck.simulated.cluster import node_names

HOSTS_MARK = '# added by bin/simslurm'     # the end of every line bin/simslurm adds


def named(text):
    """The host names that lines of the hosts file `text` name (comments left out)."""
    return {name for line in text.splitlines() for name in line.split('#', 1)[0].split()[1:]}


def resolve_ipv4(name):
    """The first IPv4 address of host `name` as the C library resolves it (/etc/hosts), or None."""
    try:
        return socket.getaddrinfo(name, None, socket.AF_INET)[0][4][0]
    except (socket.gaierror, IndexError):
        return None


def off_loopback(nodes):
    """'host name NODE resolves to ADDR, not 127.0.0.1' for each node of a `nodes`-node cluster
    whose name does not resolve to a loopback address."""
    return [f"host name {name} resolves to '{got or 'nothing'}', not 127.0.0.1"
            for name in node_names(nodes) for got in [resolve_ipv4(name)]
            if not (got or '').startswith('127.')]


def ensure_hosts(path, nodes, check_only=False):
    """Name every node of a `nodes`-node cluster in the hosts file `path` (appended to: it may be
    a mount point), unless `check_only`; then ValueError unless every node resolves to loopback."""
    if not check_only:
        with open(path, 'r+') as f:
            text = f.read()
            missing = [name for name in node_names(nodes)
                       if name not in named(text) and resolve_ipv4(name) is None]
            if missing and text and not text.endswith('\n'):
                f.write('\n')
            f.write(''.join(f'127.0.0.1 {name}   {HOSTS_MARK}\n' for name in missing))
    wrong = off_loopback(nodes)
    if wrong:
        raise ValueError(f"{'; '.join(wrong)}; fix {'its entry' if len(wrong) == 1 else 'their entries'} in {path}")


def remove_our_lines(path):
    """Remove the lines bin/simslurm added to the hosts file `path` (those ending with our mark),
    rewritten in place (it may be a mount point); how many were removed."""
    with open(path, 'r+') as f:
        lines = f.read().splitlines(keepends=True)
        kept = [line for line in lines if not line.rstrip('\n').endswith(HOSTS_MARK)]
        if len(kept) != len(lines):
            f.seek(0)
            f.write(''.join(kept))
            f.truncate()
    return len(lines) - len(kept)
