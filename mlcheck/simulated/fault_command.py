"""bin/simslurm fault: one fault of the simulated cluster's nodes or links held in place while a
command runs (or, without one, until Ctrl-C), then undone, so that a new user can watch the node
sweep name it (docs/node-sweep.md). The faults are those of mlcheck/simulated/faults.py.

Usage: bin/simslurm fault KIND ARGUMENTS... [-- COMMAND...]
  cpu NODE SHARE           NODE's jobs get at most SHARE of one CPU
  hide NODE PATH           PATH is an empty directory on NODE only (a dataset that did not mount)
  file NODE PATH COPY      PATH reads as the file COPY on NODE only (a package left older)
  link NODE NODE KB_PER_S  the link between two nodes limited to KB_PER_S kB/s each way
Root only, with the cluster up (bin/simslurm up); jobs that start meanwhile see the fault, a job
already running does not. The exit status is COMMAND's. E.g.

  bin/simslurm fault cpu nid002 0.5 -- reframe -C config/simulated.py -c checks/ -r \\
      -n MNIST -P image=host -P num_nodes=1 --distribute=all -S epochs=1
  mlcheck-nodes -C config/simulated.py latest --var samples_per_s --threshold 50%
"""

import os
import signal
import subprocess

from mlcheck.simulated import faults
from mlcheck.simulated.cluster import node_names, running_nodes
from mlcheck.simulated.processes import Failure, say

KINDS = {'cpu': ('NODE SHARE', 2, 2), 'hide': ('NODE PATH', 2, 2),
         'file': ('NODE PATH COPY', 3, 3), 'link': ('NODE NODE KB_PER_S', 3, 3)}


def number(text, what, low=0.0):
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not value > low:
        raise Failure(f'fault: {what} {text!r}: expected a number above {low:g}')
    return value


def fault_of(running, argv):
    """(the fault's context manager, what it does in words) for `argv` after 'fault' on the
    cluster's `running` nodes; a Failure naming the bad argument."""
    kind, *args = argv or ['']
    if kind not in KINDS:
        raise Failure(f"fault: unknown kind {kind!r}; use one of: {' '.join(KINDS)} "
                      '(bin/simslurm fault --help)')
    usage, least, most = KINDS[kind]
    if not least <= len(args) <= most:
        raise Failure(f'fault {kind}: expected {usage}, got {len(args)} argument(s)')
    nodes = args[:2] if kind == 'link' else args[:1]
    for node in nodes:
        if node not in running:
            raise Failure(f"fault {kind}: no node {node!r} in the running simulated cluster "
                          f"({', '.join(running)})")
    if kind == 'cpu':
        share = number(args[1], 'SHARE')
        return faults.cpu_quota(args[0], share), f'{args[0]} limited to {share:g} CPU'
    if kind == 'link':
        if args[0] == args[1]:
            raise Failure(f'fault link: a link joins two nodes, not {args[0]} to itself')
        rate = number(args[2], 'KB_PER_S')
        return (faults.slow_links([tuple(args[:2])], int(rate)),
                f'the link {args[0]} <-> {args[1]} limited to {rate:g} kB/s each way')
    if not os.path.isabs(args[1]) or not os.path.exists(args[1]):
        raise Failure(f'fault {kind}: PATH {args[1]!r} must be an absolute path that exists')
    if kind == 'hide':
        return faults.hidden_path(*args), f'{args[1]} empty on {args[0]}'
    try:
        text = open(args[2]).read()
    except OSError as err:
        raise Failure(f'fault file: COPY {args[2]!r}: {err.strerror}') from None
    return faults.other_file(args[0], args[1], text), f'{args[1]} reads as {args[2]} on {args[0]}'


def cmd_fault(argv, environ=os.environ):
    """The fault of `argv` in place while its command runs (after '--'), or until Ctrl-C or
    SIGTERM; undone however it ends. The exit status: the command's, else 0."""
    if argv[:1] in (['-h'], ['--help']):
        print(__doc__)
        return 0
    argv, command = (argv[:argv.index('--')], argv[argv.index('--') + 1:]) if '--' in argv \
        else (argv, [])
    try:    # the state directory claimed as every subcommand claims it (its nodes file is read)
        sim = faults.cluster(environ)
    except RuntimeError as err:
        raise Failure(f'fault: {err}') from None
    fault, said = fault_of(node_names(running_nodes({'SIMSLURM_DIR': sim.dir})), argv)   # enters nothing yet
    if os.geteuid() != 0:
        raise Failure('fault: must run as root (it moves slurmd into cgroups and namespaces); '
                      'rerun with sudo')
    try:
        with fault:
            say(f'fault in place: {said}')
            try:
                if command:
                    return subprocess.run(command).returncode
                say('Ctrl-C undoes it')
                while True:
                    signal.pause()
            except KeyboardInterrupt:
                return 0
            finally:
                say(f'fault undone: {said}')
    except (RuntimeError, subprocess.CalledProcessError) as err:   # no slurmd, nft refused
        raise Failure(f'fault: {err}') from None
