"""The ReFrame base class of the checks whose program trains: what DistributedLaunchCheck does,
and the dataset, accuracy and loss, the solo phase (the slow-rank rule and per-rank figures),
-S throttle and the GPU telemetry.
"""

from reframe.core.builtins import performance_function, run_before, variable

from mlcheck.errors import ConfigError
from mlcheck.figures import rank_speed
from mlcheck.harness.gpu_telemetry import GPUTelemetry, KNOBS as TELEMETRY_KNOBS
from mlcheck.harness.knobs import Knob, declare_knobs
from mlcheck.harness.launch_check import DistributedLaunchCheck
from mlcheck.judging import sanity
from mlcheck.site.settings import PartitionSettings


class DistributedTrainingCheck(DistributedLaunchCheck, GPUTelemetry):
    """A program that trains: its dataset, what its training must show (accuracy, falling
    loss), each rank timed alone beside the timed epochs (solo_phase.SoloPhase) with the
    slow-rank rule and the per-rank figures (docs/per-rank.md), and -S throttle."""

    #: Name of the dataset in extras.mlcheck.datasets, and a path it must contain; '' for a
    #: program that reads no data (no --data-dir, no dataset bind).
    dataset = variable(str)
    dataset_marker = variable(str, value='')

    #: Dataset directory; overrides the partition's (-S data_dir=DIR).
    data_dir = variable(str, value='')

    #: Lowest acceptable final test accuracy; None when the script reports none.
    min_accuracy = variable(float, type(None), value=None)

    #: Knobs whose default is the partition's extras.mlcheck.<name> (partition_knobs()).
    partition_wide_knobs = {
        'slow_rank_fraction': Knob(PartitionSettings.slow_rank_fraction,
                                   "a rank training alone below this fraction of the ranks' upper "
                                   'quartile fails (0: off)', minimum=0, maximum=1, flag=None),
    }
    declare_knobs(locals(), partition_wide_knobs, partition_wide=True)

    #: throttle: the fraction of throughput rank `throttle_rank` gives up on purpose, in the
    #: solo and the distributed phase: it idles after each step and all ranks wait for it, as
    #: for one slower GPU (docs/per-rank.md, docs/performance-history.md; launch_arguments()).
    throttle_knobs = {
        'throttle': Knob(0.0, 'fraction of throughput rank throttle_rank gives up on purpose',
                         minimum=0, below=1, flag=None),
        'throttle_rank': Knob(0, 'the rank -S throttle slows', minimum=0, flag=None),
    }
    declare_knobs(locals(), throttle_knobs)
    common_knobs = {
        **DistributedLaunchCheck.common_knobs,
        **throttle_knobs,
        **TELEMETRY_KNOBS,      # what the GPUs did (mlcheck.harness.gpu_telemetry), declared there
    }

    def data_of_run(self):
        if not self.dataset:
            return None
        data = self.settings.dataset_dir(self.dataset, self.data_dir, self.dataset_marker)
        self.check_dataset(data, self.settings.dataset_source(self.dataset, self.data_dir))
        return data

    def check_dataset(self, path, source):
        """Raise a ConfigError if the dataset in `path` (configured in `source`) is unusable,
        so that a corrupt copy fails here and not in every rank."""

    def launch_arguments(self):
        if self.throttle_rank >= self.layout.num_tasks:
            raise ConfigError(f'-S throttle_rank={self.throttle_rank}: no such rank among the '
                              f'{self.layout.num_tasks} ranks of {self.num_nodes} node(s)')
        ranks_per_node = ['--ranks-per-node', str(self.layout.tasks_per_node)]
        if not self.throttle:
            return ranks_per_node
        return [*ranks_per_node, '--throttle', f'{self.throttle:g}', '--throttle-rank', str(self.throttle_rank)]

    def program_problems(self, run):
        return self.telemetry_problems(run)

    def training_promises(self):
        """What the training program's output must show, besides the launch (see Expectations)."""
        return {'min_accuracy': self.min_accuracy}

    def times_ranks_alone(self):
        """The program runs its ranks' solo phase (solo_phase.SoloPhase): the slow-rank rule
        and the per-rank figures apply. -S solo_steps=0 and a one-process mode run none."""
        return self.solo_steps > 0

    def expectations(self):
        solo = {'slow_rank_fraction': self.slow_rank_fraction} if self.times_ranks_alone() else {}
        return sanity.Expectations.for_run(self.settings, self.layout, fault=self.fault,
                                           **solo, **self.training_promises())

    @run_before('performance')
    def drop_per_rank_figures_without_solo_phase(self):
        if not self.times_ranks_alone():
            for name in ('slowest_rank_fraction', 'communication_efficiency'):
                self.perf_variables.pop(name, None)

    # --- per rank: each rank alone, and what the distributed phase keeps of it (docs/per-rank.md)

    @performance_function('fraction')
    def slowest_rank_fraction(self):
        return self.figure('solo throughput per rank', rank_speed.slowest_rank_fraction(self.run_output()))

    @performance_function('%')
    def communication_efficiency(self):
        return 100 * self.figure('communication efficiency (solo and distributed throughput)',
                                 rank_speed.communication_efficiency(self.run_output()))
