"""Collective bandwidth and latency in every PyTorch image, at every node count.

Answers, after a system upgrade: is the fabric as fast as before from inside this image (bus
bandwidth at the largest message, small-message latency, the slowest node pair), how close to
the partition's physical limit, and does every rank receive the right values. Launched as the
training checks are: one rank per GPU, their masks, environment, container and plugin sanity.
"""

import reframe as rfm
from reframe.core.builtins import performance_function, run_before, variable
from reframe.core.logging import getlogger

from mlcheck.judging import interconnect
from mlcheck.rfm import DistributedTrainingCheck


@rfm.simple_test
class InterconnectCheck(DistributedTrainingCheck):
    descr = 'torch.distributed collective bandwidth and latency, one rank per GPU'
    script = 'pytorch/comm/collectives.py'
    dataset = ''

    # Knobs: -S sets one; else the partition's extras.mlcheck.checks.interconnect; else these.
    # The limits (GB/s) are the partition's physical ones, declared by the site: across nodes,
    # what one node's NICs can inject; within one node, what its GPUs' links carry. 0: unknown.
    checks_key = 'interconnect'
    knobs = {'min_bytes': 8, 'max_bytes': 1 << 30, 'factor': 4, 'p2p_bytes': 1 << 28,
             'max_iters': 100, 'blocks': 5, 'warmup_iters': 5, 'fabric_limit': 0.0, 'node_limit': 0.0,
             'slow_pair_fraction': 0.5}
    #: smallest message of the sweep, and the one whose all_reduce time is the latency (bytes)
    min_bytes = variable(int, type(None), value=None)
    #: largest message of the sweep (bytes)
    max_bytes = variable(int, type(None), value=None)
    #: size step of the sweep
    factor = variable(int, type(None), value=None)
    #: message of the node-pair exchange (bytes)
    p2p_bytes = variable(int, type(None), value=None)
    #: timed iterations per size at most (large sizes get fewer: about 8 x max_bytes each)
    max_iters = variable(int, type(None), value=None)
    #: timed blocks of iterations per size; the median block counts
    blocks = variable(int, type(None), value=None)
    #: untimed calls per size
    warmup_iters = variable(int, type(None), value=None)
    #: GB/s one node can inject into the fabric (the reference of busbw across nodes)
    fabric_limit = variable(float, int, type(None), value=None)
    #: GB/s between the GPUs of one node (the reference of busbw on one node)
    node_limit = variable(float, int, type(None), value=None)
    #: a node pair below this fraction of the median pair fails, naming both nodes
    slow_pair_fraction = variable(float, type(None), value=None)
    #: Fraction of bandwidth given up on purpose (0 <= slowdown < 1): every message carries
    #: 1/(1-slowdown) times its bytes. A known loss, to show what the history flags.
    slowdown = variable(float, value=0.0)

    def script_arguments(self):
        args = ['--min-bytes', self.min_bytes, '--latency-bytes', self.min_bytes,
                '--max-bytes', self.max_bytes, '--factor', self.factor,
                '--p2p-bytes', self.p2p_bytes, '--max-iters', self.max_iters,
                '--blocks', self.blocks, '--warmup-iters', self.warmup_iters]
        if self.slowdown:
            args += ['--slowdown', self.slowdown]
        return [str(a) for a in args]

    def training_promises(self):
        return {}

    def program_problems(self, run):
        return interconnect.problems(run, self.num_tasks, self.slow_pair_fraction)

    def limit(self):
        return self.fabric_limit if self.num_nodes > 1 else self.node_limit

    @run_before('performance')
    def drop_figures_without_meaning(self):
        if self.num_nodes == 1:
            self.perf_variables.pop('slowest_pair_bw')     # no pair of nodes
        if not self.limit():
            getlogger().info(f'{self.display_name}: partition declares no '
                             f'{"fabric" if self.num_nodes > 1 else "node"}_limit: '
                             f'busbw_of_limit not reported')
            self.perf_variables.pop('busbw_of_limit')

    @performance_function('GB/s')
    def busbw(self):
        return self.figure('bus bandwidth', self.run_output().result_value('busbw'))

    @performance_function('us')
    def latency(self):
        return self.figure('latency', self.run_output().result_value('latency_us'))

    @performance_function('%')
    def busbw_of_limit(self):
        busbw = self.figure('bus bandwidth', self.run_output().result_value('busbw'))
        return interconnect.percent_of(busbw, self.limit())

    @performance_function('GB/s')
    def slowest_pair_bw(self):
        return self.figure('slowest pair', self.run_output().result_value('slowest_pair_GBps'))
