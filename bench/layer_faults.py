#!/usr/bin/env python3
"""The upgrade report's likely cause (mlcheck.history.causes) on real runs of the simulated
partition, each fault injected at its own layer (tests/layer_sessions.py: every node's slurmd in a
CPU quota, one image's entry slowing its kernels and malloc, every link between nodes limited by
nftables): the runs that tell the layers apart, unfaulted and under each fault, each --repeat
times; then mlcheck-report of the unfaulted runs against each fault's, with the default rule, its
likely-cause lines printed. The CI test (tests/test_layer_faults_sim.py) runs each once. Needs
root and the cluster (bin/simslurm up); 18 jobs one at a time a repeat, about 10 minutes each on
the 2-core machine.

    .venv/bin/python bench/layer_faults.py [--keep DIR] [--repeat N]
"""

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, 'tests')]
from layer_sessions import faulty_runs, likely_causes  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--keep', help='run in this directory and keep it (default: a temporary one)')
    parser.add_argument('--repeat', type=int, default=3)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        scratch = Path(args.keep or stack.enter_context(tempfile.TemporaryDirectory()))
        scratch.mkdir(parents=True, exist_ok=True)
        logs = faulty_runs(scratch, repeat=args.repeat)
        for fault, after in logs.items():
            if fault != 'none':
                code, lines = likely_causes(logs['none'], after, fault)
                print(f'\n{fault} injected: mlcheck-report exit {code}')
                print('\n'.join(lines) or '(no likely-cause line)', flush=True)


if __name__ == '__main__':
    main()
