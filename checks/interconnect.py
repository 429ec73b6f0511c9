"""Collective bandwidth and latency in every PyTorch image, at every node count.

Answers, after a system upgrade: is the fabric as fast as before from inside this image (bus
bandwidth at the largest message, small-message latency, the slowest node pair), how close to
the partition's physical limit, and does every rank receive the right values. Launched as the
training checks are (DistributedLaunchCheck): one rank per GPU, their masks, environment,
container and plugin sanity; no training setting (-S throttle) applies to it.
"""

import reframe as rfm
from reframe.core.builtins import performance_function, run_after, run_before
from reframe.core.logging import getlogger

from mlcheck.judging import collectives
from mlcheck.harness.ab_rounds import Steps
from mlcheck.harness.knobs import Knob, declare_knobs
from mlcheck.errors import ConfigError
from mlcheck.harness.launch_check import DistributedLaunchCheck, reported_by_reframe


@rfm.simple_test
class InterconnectCheck(DistributedLaunchCheck):
    descr = 'torch.distributed collective bandwidth and latency, one rank per GPU'
    script = 'pytorch/comm/collectives.py'

    # Knobs: -S sets one; else the partition's extras.mlcheck.checks.interconnect; else these.
    # The limits (GB/s) are the partition's physical ones, declared by the site: across nodes,
    # what one node's NICs can inject; within one node, what its GPUs' links carry. 0: unknown.
    checks_key = 'interconnect'
    knobs = {
        'min_bytes': Knob(8, 'smallest message of the sweep, and the one whose all_reduce time is '
                             'the latency (bytes; at least one float32 element)', minimum=4,
                          flag=('--min-bytes', '--latency-bytes')),
        'max_bytes': Knob(1 << 30, 'largest message of the sweep (bytes)', minimum=1, at_least='min_bytes'),
        'factor': Knob(4, 'size step of the sweep', minimum=2),
        'p2p_bytes': Knob(1 << 28, 'message of the node-pair exchange (bytes)', minimum=1),
        'pair_partners': Knob(3, 'partners each node meets in the node-pair exchange, in rounds '
                                 'of disjoint pairs that exchange at once', minimum=1),
        'pair_ranks': Knob(0, 'ranks of each node in the node-pair exchange (0: every rank)',
                           minimum=0),
        'max_iters': Knob(100, 'timed iterations per size at most (large sizes get fewer: about '
                               '8 x max_bytes each)', minimum=1),
        'blocks': Knob(5, 'timed blocks of iterations per size; the median block counts',
                       minimum=1),
        'warmup_iters': Knob(5, 'untimed calls per size', minimum=0),
        'fabric_limit': Knob(0.0, 'GB/s one node can inject into the fabric (the reference of '
                                  'busbw across nodes)', minimum=0, flag=None),
        'node_limit': Knob(0.0, "GB/s between the GPUs of one node (the reference of busbw on "
                                'one node)', minimum=0, flag=None),
        'slow_pair_fraction': Knob(0.5, 'a node pair (or every pair of one node) below this fraction '
                                        'of the others fails, naming the nodes', minimum=0, below=1,
                                   flag=None),
        # every timed block lasts 1/(1-slowdown) times as long: a known loss, to show what the
        # performance history flags
        'slowdown': Knob(0.0, 'fraction of bandwidth given up on purpose', minimum=0, below=1,
                         omit_default=True),
    }
    figure_settings = ('min_bytes', 'max_bytes', 'factor', 'p2p_bytes', 'pair_partners', 'pair_ranks')
    ab_steps = Steps('busbw', {'max_iters': 20, 'blocks': 3})     # -S compare_with
    declare_knobs(locals(), knobs)      # each a variable; the program's flags (knob_arguments)

    #: The most ranks whose all_reduce values the program checks exactly in float32 (its
    #: MAX_WORLD_SIZE: 2**24 // PATTERN_PERIOD; a test keeps them equal)
    max_checked_ranks = 132104

    @run_after('setup')
    @reported_by_reframe
    def refuse_a_world_whose_values_cannot_be_checked(self):
        if self.num_tasks > self.max_checked_ranks:
            raise ConfigError(f'{self.num_nodes} nodes: {self.num_tasks} ranks; the all_reduce '
                              f'values can be checked exactly for at most {self.max_checked_ranks}')

    def program_problems(self, run):
        return collectives.problems(run, self.num_tasks, self.slow_pair_fraction)

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
        return collectives.percent_of(busbw, self.limit())

    @performance_function('GB/s')
    def slowest_pair_bw(self):
        return self.figure('slowest pair', self.run_output().result_value('slowest_pair_GBps'))
