"""-S compare_with=<image>: the check's job runs, on its nodes, rounds of one short step of each
image (mlcheck.ab.rounds), the check's sanity judges every step, and the paired rule
(mlcheck.ab.rule) gives the verdict on B/A of the check's main rate: the test's image is B (the
candidate), compare_with A (the current one). The job runs up to ab_rounds rounds and stops at
the look that finds B slower (mlcheck.ab.look); `slower` and `inconclusive` fail the performance
stage with the rule's reason, but for an A=A control, which says the threshold its rounds support
and passes unless its sides differ (docs/ab-images.md).

-S compare_layers=<name> runs the same rounds with the test's image on both sides: A with the
partition's current host layer, B with the candidate host layer `name` of the partition
(extras.mlcheck.host_layer_candidates, mlcheck.site.layers) over it.
"""

import contextlib
import math
import os
import shlex
import sys
from dataclasses import dataclass

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before
from reframe.core.exceptions import PerformanceError
from reframe.core.logging import getlogger

from mlcheck.ab import rounds, rule
from mlcheck.errors import ConfigError
from mlcheck.figures import stack
from mlcheck.harness.knobs import Knob, declare_knobs
from mlcheck.placement import launch
from mlcheck.site.images import check_loggable

KNOBS = {
    'compare_with': Knob('', "an image to compare the test's image with: rounds of short steps of "
                             'both on the same nodes, B/A judged (docs/ab-images.md)', flag=None),
    'compare_layers': Knob('', "a candidate host layer of the partition (extras.mlcheck."
                               "host_layer_candidates) to compare with its current one: rounds of "
                               "short steps of the test's image with each, B/A judged "
                               '(docs/ab-images.md)', flag=None),
    'ab_rounds': Knob(30, 'the most rounds of -S compare_with or compare_layers (each one step of '
                          'each side): the job stops at the first look (6, 12, this) that decides',
                      minimum=1, flag=None),
    'ab_false_slower': Knob(rule.FALSE_SLOWER, 'the most often an image against itself may be called '
                                               'slower, all looks together', minimum=1e-6, below=0.5,
                            flag=None),
}
COMPARISONS = rounds.COMPARISONS
FIGURES = ('ab_ratio', 'ab_ratio_low', 'ab_ratio_high')
VERDICT_FILE = f'{rounds.DIR}/verdict.txt'
SETUP_S = 300       # of the job's time limit, besides its steps


@dataclass(frozen=True)
class Steps:
    """How a check runs as an A/B step: the result fact compared (the check's main rate, which
    the job's looks read too), the knob values (which its judging reads too) and program flags
    that make one step short, and the most seconds one step may take (the job's time limit is
    that for every step of the most rounds, and SETUP_S)."""
    fact: str
    knobs: dict
    flags: tuple = ()
    step_s: int = 60


class ABRounds(rfm.RegressionTestPlugin):
    """Needs of the check: settings, layout, stagedir, rank_command(), configured_container(),
    run_problems() and a run_output() that reads `_run_output` (DistributedLaunchCheck)."""

    declare_knobs(locals(), KNOBS)
    ab_steps = None     # the check's Steps; None: the check has no A/B mode

    @property
    def comparison(self):
        """'knob=value' of the A/B comparison asked for with -S, or '' (none: a plain run)."""
        return ';'.join(f'{knob}={getattr(self, knob)}' for knob in COMPARISONS if getattr(self, knob))

    def ab_sides(self, image):
        """((side, image path, partition settings), ...) of A and B: another image against the
        test's, or the test's image with the partition's current host layer against a candidate's."""
        if ';' in self.comparison:
            raise ConfigError(f'-S {self.comparison.replace(";", " -S ")}: one comparison a run, '
                              'of two images or of two host layers')
        if self.ab_steps is None:
            raise ConfigError(f'-S {self.comparison}: {type(self).__name__} has no A/B steps')
        for knob in COMPARISONS:     # logged as the run's comparison, unescaped
            check_loggable(getattr(self, knob), f'-S {knob}')
        if self.compare_layers:
            return ((rounds.A, image, self.settings),
                    (rounds.B, image, self.settings.with_host_layer(self.compare_layers)))
        try:
            other = self.settings.resolve_image(self.compare_with)
        except ConfigError as err:
            raise ConfigError(f'-S compare_with={self.compare_with}: {err}') from None
        return (rounds.A, other, self.settings), (rounds.B, image, self.settings)

    def set_up_ab_rounds(self, image, data, waits):
        """The job: the launcher line wrapped as a function, one function per side, the rounds."""
        sides = self.ab_sides(image)
        if self.is_control() and self.ab_rounds < rule.FIRST_LOOKS[0]:
            # one look of fewer rounds, the whole false rate a side: slower or faster, so a
            # failed control, 9-10 % of the time
            raise ConfigError(f'-S ab_rounds={self.ab_rounds}: an A=A control needs at least '
                              f'{rule.FIRST_LOOKS[0]} rounds, the first look\'s')
        for name, value in self.ab_steps.knobs.items():
            setattr(self, name, value)
        before, self.executable, after = rounds.launcher_function()
        prepare, functions = [], []
        for side, path, settings in sides:
            command = f'{self.rank_command(path, data)} {shlex.join(self.ab_steps.flags)}'
            if path is not None:
                platform = self.configured_container(path, command, data, settings)
                if hasattr(platform, 'FILE'):      # the Container Engine: an EDF per image
                    platform.FILE = f'rfm_env_{side}.toml'
                command = platform.launch_command(self.stagedir)
                prepare += [line for line in platform.emit_prepare_commands(self.stagedir)
                            if line not in prepare]
            functions += rounds.step_function(side, launch.job_exports(settings, self.layout, waits, path),
                                              command)
        self._ab_script = ([*prepare, *before], [*after, *functions, *rounds.round_lines(
            self.ab_rounds, rule.looks(self.ab_rounds)[:-1], self.look_command())])
        self.keep_files += [rounds.DIR]
        # every step of the most rounds and the warm-up step of each side
        self.time_limit = f'{math.ceil((SETUP_S + 2 * (self.ab_rounds + 1) * self.ab_steps.step_s) / 60)}m'

    def threshold_of_partition(self):
        return min(self.settings.ab_threshold, self.settings.ab_threshold_ceiling)

    def look_command(self):
        """The job's look between rounds (mlcheck.ab.look), with the Python that runs ReFrame."""
        return shlex.join([sys.executable, '-m', 'mlcheck.ab.look', '--fact', self.ab_steps.fact,
                           '--threshold', f'{self.threshold_of_partition():g}', '--most', str(self.ab_rounds),
                           '--false-slower', f'{self.ab_false_slower:g}'])

    @run_before('run', always_last=True)     # after every other prerun line: the function opens last
    def write_ab_rounds(self):
        if self.comparison:
            before, after = self._ab_script
            self.prerun_cmds += before
            self.postrun_cmds = after + self.postrun_cmds
            # here, not at setup: record_settings writes run_settings after set_up_launch. The
            # comparison is an input that changes the figures; the rounds (a most) and the
            # verdict (an outcome) are not: runs of one image against one other are compared
            self.run_settings = ';'.join(filter(None, [self.run_settings, self.comparison]))

    def ab_names(self):
        """(A's name, B's name) in the verdict's words: two images, or one image's two host layers."""
        if self.compare_layers:
            return f'{self.image} (current host layer)', f'{self.image} with host layer {self.compare_layers}'
        return self.compare_with, str(self.image)

    def ab_read(self):
        return rounds.read_steps(self.stagedir, rounds.rounds_run(self.stagedir),
                                 dict(zip((rounds.A, rounds.B), self.ab_names())))

    @contextlib.contextmanager
    def reading(self, run):
        """The check's own rules and figures, over one step's output."""
        self._run_output = run
        try:
            yield
        finally:
            self._run_output = None

    def ab_problems(self):
        """The check's sanity over every step of both images, each problem naming its step."""
        found = []
        for step in self.ab_read():
            with self.reading(step.run):
                problems = self.run_problems()
            found += [f'{step.name}: {p}' for p in problems] or list(filter(None, [rounds.step_problem(step)]))
        return found

    @run_before('performance', always_last=True)    # after the checks' own hooks drop figures
    def judge_ab_rounds(self):
        if not self.comparison:
            return
        self.perf_variables = {name: sn.make_performance_function(self.ab_figure, 'B/A', name)
                               for name in FIGURES}
        if self.is_dry_run():
            return
        steps = self.ab_read()
        # the stack recorded is the test's image's (B), read from its first step, and the job's
        b_step = next(step.run for step in steps if step.side == rounds.B)
        self.software_stack = stack.encode({**stack.of_run(self.run_output()),
                                            **stack.of_run(b_step, self.image_path)})
        a_rates, b_rates, failed = rounds.judged_rates(steps, self.ab_steps.fact)
        failed = [*rounds.warm_up_problems(self.stagedir, dict(zip((rounds.A, rounds.B), self.ab_names()))), *failed]
        threshold = self.threshold_of_partition()
        self.ab_verdict = rule.judge(a_rates, b_rates, threshold, names=self.ab_names(), failed=failed,
                                     most=self.ab_rounds, false_slower=self.ab_false_slower)
        said = [self.ab_verdict.reason]
        if self.is_control():
            said.append(rule.control_line(self.ab_verdict, self.ab_rounds, self.settings.ab_threshold_ceiling,
                                          self.ab_false_slower)
                        + f"; record it as the partition's ab_threshold, which is {threshold:g} now")
        with open(os.path.join(self.stagedir, VERDICT_FILE), 'w') as f:
            f.write('\n'.join(said) + '\n')
        for line in said:
            getlogger().info(f'{self.display_name}: {line}')
        if self.ab_verdict.ratio is None:
            raise PerformanceError(self.ab_verdict.reason)

    def is_control(self):
        """An A=A control: the test's image against itself, measuring the partition's noise."""
        return bool(self.compare_with) and self.settings.resolve_image(self.compare_with) == self.image_path

    def ab_figure(self, name):
        verdict = self.ab_verdict
        return {'ab_ratio': verdict.ratio, 'ab_ratio_low': verdict.low, 'ab_ratio_high': verdict.high}[name]

    @run_after('performance')     # after the figures are logged: slower and inconclusive fail
    def fail_on_ab_verdict(self):
        verdict = getattr(self, 'ab_verdict', None)
        if verdict is None:
            return
        # an A=A control measures the noise: it says its figure and passes, unless its two sides
        # differ (something in the job favours one image)
        if verdict.verdict in ('slower', 'faster') if self.is_control() else verdict.fails:
            raise PerformanceError(verdict.reason)
