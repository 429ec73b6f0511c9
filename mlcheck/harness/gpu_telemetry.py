"""What the GPUs did, as a part of the ReFrame training checks: knobs, the figures with their
references, the low-power and throttle rules, the note when telemetry is not available, and
the profiler traces kept with the test's output. The ranks sample (src/pytorch/telemetry.py);
mlcheck.figures.gpu_use and mlcheck.judging.gpu_health read their facts. See docs/telemetry.md.
"""

import reframe as rfm
from reframe.core.builtins import performance_function, run_after, run_before

from mlcheck.judging import notes, gpu_health as rules
from mlcheck.harness.knobs import Knob, declare_knobs
from mlcheck.figures import gpu_use as figures

TRACE_DIR = 'traces'     # relative to the stage directory, the ranks' working directory

KNOBS = {
    'telemetry_interval': Knob(1.0, 'seconds between telemetry samples of each rank (0: off)',
                               minimum=0, flag=None),
    'low_power_fraction': Knob(0.75, "a GPU drawing less than this fraction of the GPUs' "
                                     'upper-quartile power fails (0: off)', minimum=0, maximum=1, flag=None),
    'profile_steps': Knob(0, 'steady-state steps to profile on every rank after the timed '
                             'epochs, one trace per rank kept in the output directory', minimum=0,
                  flag=None),     # all three reach the ranks in the environment (below)
}

# each performance figure of the class below, by the function that reads it from the run
FIGURES = {'gpu_power': figures.median_power,
           'lowest_gpu_power_fraction': figures.lowest_power_fraction,
           'gpu_utilization': figures.median_utilization,
           'peak_gpu_memory': figures.peak_gpu_memory,
           'peak_host_memory': figures.peak_host_memory}


class GPUTelemetry(rfm.RegressionTestPlugin):
    """Needs of the check: run_output(), settings, display_name, logger (DistributedTrainingCheck)."""

    declare_knobs(locals(), KNOBS)

    @run_before('run')
    def ask_for_telemetry(self):
        # the training programs take their defaults from these (src/pytorch/telemetry.py); a
        # program that does not sample (the interconnect's) ignores them
        self.prerun_cmds += [f'export MLCHECK_TELEMETRY_INTERVAL={self.telemetry_interval:g}',
                             f'export MLCHECK_PROFILE_STEPS={self.profile_steps}']
        if self.profile_steps:
            self.keep_files += [TRACE_DIR]
            # a profiled run is compared only with runs profiled alike
            self.run_settings = ';'.join(filter(None, [self.run_settings,
                                                       f'profile_steps={self.profile_steps}']))

    def telemetry_problems(self, run):
        return rules.problems(run, self.low_power_fraction)

    @run_after('sanity')
    def say_when_telemetry_is_unavailable(self):
        if self.is_dry_run():
            return
        note = notes.to_say(self.settings, 'telemetry', rules.unavailable_note(
            self.run_output(), stand_in=self.settings.stand_in_gpus))
        for note in (note, rules.throttle_note(self.run_output())):
            if note:
                self.logger.warning(f'{self.display_name}: {note}')

    @run_before('performance')
    def drop_telemetry_figures_not_reported(self):
        if self.is_dry_run():
            return
        for name, function in FIGURES.items():
            if name in self.perf_variables and function(self.run_output()) is None:
                self.perf_variables.pop(name)

    @performance_function('W')
    def gpu_power(self):
        return FIGURES['gpu_power'](self.run_output())

    @performance_function('fraction')
    def lowest_gpu_power_fraction(self):
        return FIGURES['lowest_gpu_power_fraction'](self.run_output())

    @performance_function('%')
    def gpu_utilization(self):
        return FIGURES['gpu_utilization'](self.run_output())

    @performance_function('GB')
    def peak_gpu_memory(self):
        return FIGURES['peak_gpu_memory'](self.run_output())

    @performance_function('GB')
    def peak_host_memory(self):
        return FIGURES['peak_host_memory'](self.run_output())
