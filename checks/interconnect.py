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
from mlcheck.harness.knobs import Knob, declare_knobs, program_knobs
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
        **program_knobs.INTERCONNECT,   # the program's flags, with their defaults (src/pytorch/program_knobs.py)
        'fabric_limit': Knob(0.0, 'GB/s one node can inject into the fabric (the reference of '
                                  'busbw across nodes)', minimum=0, flag=None),
        'node_limit': Knob(0.0, "GB/s between the GPUs of one node (the reference of busbw on "
                                'one node)', minimum=0, flag=None),
        'slow_pair_fraction': Knob(0.5, 'a node pair (or every pair of one node) below this fraction '
                                        'of the others fails, naming the nodes', minimum=0, below=1,
                                   flag=None),
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
