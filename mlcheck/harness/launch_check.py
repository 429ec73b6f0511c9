"""The ReFrame base class of every distributed PyTorch check: thin glue over the plain modules.

A concrete check names its program and its arguments: DistributedLaunchCheck turns the
partition's settings (config extras) into the task layout, CPU masks, rank environment,
container command, launch sanity and the software stack; harness.training_check adds what a
training program needs besides.
"""

import dataclasses
import functools
import os
import re
import shlex

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import ConfigError as ReframeConfigError, SanityError
from reframe.core.logging import getlogger
from reframe.core.runtime import runtime

from mlcheck.judging import locality, notes, output, references, sanity, stated_settings
from mlcheck.harness.knobs import Knob, KnownSettingsOnly, declare_knobs, flag_values, knob_arguments, knob_values
from mlcheck.figures import stack
from mlcheck.placement import containers, launch
from mlcheck.errors import ConfigError, InputError
from mlcheck.harness.ab_rounds import ABRounds, KNOBS as AB_KNOBS
from mlcheck.harness.config import (checked_database_lock, checked_perflog_files, perflog_directories,
                                    references_file)
from mlcheck.harness.reframe_api import ExpectedSanityFailure
from mlcheck.simulated import speed
from mlcheck.site.images import GivenImages, ImageUnavailable
from mlcheck.site.settings import PartitionSettings


def reported_by_reframe(fn):
    """Let ReFrame report our ConfigErrors (and InputErrors: a references file refused) as its
    own: one line, no traceback."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ConfigError, InputError) as err:
            raise ReframeConfigError(str(err)) from None
    return wrapper


def partition_settings(partition):
    return PartitionSettings.from_extras(partition.fullname, partition.extras,
                                         partition.container_runtime)


def _configured_partitions():
    """Partitions of the current system with mlcheck settings (none outside a ReFrame run).

    In a ReFrame run on a system with none (ReFrame's builtin 'generic' one, when no mlcheck
    configuration was given), the session ends with one line saying how to give one: every
    check would otherwise be skipped as having "undefined parameters".
    """
    try:
        system = runtime().system
    except Exception:
        return []
    partitions = [p for p in system.partitions if 'mlcheck' in p.extras]
    if not partitions:
        raise SystemExit(f'mlcheck: system {system.name!r} has no mlcheck configuration: give one '
                         f'with -C config/<site>.py, or RFM_CONFIG_FILES=<mlcheck>/config/all.py '
                         f'(`. .venv/bin/activate` sets it)')
    return partitions


_GIVEN_IMAGES = GivenImages()


def _image_given(value):
    """A value of -P image, or the session ends with one line (mlcheck.site.images.GivenImages says
    which values): ReFrame would fail each of its tests at setup, with a block of its own each."""
    try:
        return _GIVEN_IMAGES.add(value)
    except ConfigError as err:
        raise SystemExit(f'mlcheck: config error: {err}') from None


def _configured(values_of):
    """Sorted union over the configured partitions of `values_of(settings)`.

    Runs while the checks load. A bad config ends the session with one line and a non-zero
    exit: ReFrame would otherwise skip the file and report an empty, successful run.
    """
    values = set()
    for partition in _configured_partitions():
        try:
            settings = partition_settings(partition)
        except ConfigError as err:
            raise SystemExit(f'mlcheck: config error: {err}') from None
        values.update(values_of(settings))
    return sorted(values)


class DistributedLaunchCheck(ExpectedSanityFailure, rfm.RunOnlyRegressionTest, ABRounds, KnownSettingsOnly):
    """What any torch.distributed program needs: task layout, CPU masks, rank environment,
    container, launch sanity, software stack and references. A program that trains adds the
    training part (DistributedTrainingCheck); one that does not (the interconnect's) takes only
    this, so no training setting can reach it."""

    #: Container image: a name configured for the partition (extras.mlcheck.images),
    #: 'host' where the partition has no container runtime, or an image path given with -P.
    #: A path is named by its file name, as configured images are (mlcheck.site.images.ImageByPath).
    image = parameter(_configured(lambda s: s.image_paths()), type=_image_given)

    #: Number of nodes; the partition's extras.mlcheck.node_counts unless given with -P.
    num_nodes = parameter(_configured(lambda s: s.node_counts), type=int)

    #: Program, relative to src/; its arguments come from script_arguments().
    script = variable(str)

    #: How tasks meet GPUs, instead of the partition's extras.mlcheck.binding
    #: (-S binding=by_gpu or by_domain; docs/placement.md).
    binding = variable(str, value='')

    #: A failure to inject, to see how it is reported (-S fault=crash:1:2; docs/faults.md).
    fault = variable(str, value='')

    #: Knobs (mlcheck.harness.knobs) a site may set per partition in extras.mlcheck.checks.<checks_key>
    #: and a user with -S: the check's own `knobs`, these common ones and partition_knobs(). Each
    #: is also a variable of the check (declare_knobs); resolve_knobs() sets it. The check's own
    #: knobs are its program's flags (script_arguments); these common ones reach the ranks in
    #: the environment or launch_arguments().
    checks_key = ''
    knobs = {}
    # a rank that died or hangs ends the job this long after, far below its time limit
    common_knobs = {
        'rendezvous_timeout': Knob(float(launch.Waits.rendezvous_timeout),
                                   'seconds the ranks wait for all of them to join', flag=None),
        'collective_timeout': Knob(float(launch.Waits.collective_timeout),
                                   'seconds each collective may take', flag=None),
    }
    declare_knobs(locals(), common_knobs)
    # -S compare_with, compare_layers: A/B rounds, declared by ABRounds (mlcheck.harness.ab_rounds)
    common_knobs = {**common_knobs, **AB_KNOBS}

    valid_prog_environs = ['builtin']
    sourcesdir = '../src'     # relative to checks/
    time_limit = '15m'

    @run_after('init')
    @reported_by_reframe
    def restrict_to_partitions(self):
        """Run each variant only where it belongs; a value given with -P is tried everywhere."""
        def names(pred):
            return [p.fullname for p in _configured_partitions() if pred(partition_settings(p))]

        self.valid_systems = (names(lambda s: self.image in s.image_paths()
                                    and self.num_nodes in s.node_counts)
                              or names(lambda s: True) or ['*'])
        self.tags |= {'pytorch', 'distributed'}

    @run_after('setup')   # not at init: ReFrame drops a test skipped there without a word
    def refuse_multi_node_copies_of_distribute(self):
        """--distribute pins each copy of a test to one node: a check of several nodes cannot
        run there (its job asks for more nodes than the one it is pinned to); say so in one line."""
        self.skip_if(getattr(self, '.nid', None) is not None and self.num_nodes > 1,
                     f'{self.num_nodes} nodes: --distribute runs one copy per node, so vet every '
                     'node with -P num_nodes=1 (the fabric between nodes: docs/node-sweep.md)')

    #: why the system's references file was refused at init (a link out of its directory, a
    #: FIFO, a huge file): the test fails at setup saying so
    references_refused = variable(str, type(None), value=None)

    @run_after('init')
    def use_site_references(self):
        """ReFrame's external references, where the system has a file: read here first as
        mlcheck.judging.references reads it, so that a link out of the references directory, a
        FIFO or a huge file is refused (ReFrame then opens the name itself, following a link:
        docs/security.md). Refused at setup, not here: ReFrame drops a test that fails at init
        with a warning, and the session passes without it."""
        path = references_file(runtime().system.name)
        try:
            found = references.load_file(path)
        except InputError as err:
            self.references_refused = str(err)
            return
        if found is not None:
            self.reference = {'$ref': path}

    @run_after('setup')
    @reported_by_reframe
    def refuse_unreadable_references(self):
        if self.references_refused:
            raise ConfigError(self.references_refused)

    @run_after('setup')
    @reported_by_reframe
    def read_machine_speed(self):
        """The partition's machine speed now, where it is measured in the run (the simulated
        one): the first test's set-up measures it, before any job of the run starts."""
        configured = partition_settings(self.current_partition).machine_speed
        if configured != speed.MEASURED:
            self.machine_speed = None if configured is None else float(configured)
            return
        try:
            self.machine_speed = None if self.is_dry_run() else speed.this_run()
        except (OSError, RuntimeError, ValueError) as err:
            raise ConfigError(f'partition {self.current_partition.fullname}: {err}') from None

    @run_before('performance')
    @reported_by_reframe
    def expect_this_machines_speed(self):
        """Where the partition measures its machine's speed now (the simulated one) and the
        references record the speed they were measured at, expect the figures at today's speed."""
        speed_now = self.machine_speed
        if speed_now is None or self.is_dry_run():
            return
        keys = {'$partition': self.current_partition.fullname, 'image': str(self.image),
                'num_nodes': self.num_nodes}
        scaled = references.at_machine_speed(references_file(runtime().system.name),
                                             type(self).__name__, keys, speed_now, self.job_speed_now())
        if scaled:
            self.reference = {self.current_partition.fullname: scaled}

    def job_speed_now(self):
        """The machine's speed read in this test's job (a check that runs the workload there), or None."""
        return None

    # last: only the figures the test still reports, after the hooks that drop some of them
    @run_before('performance', always_last=True)
    @reported_by_reframe
    def say_when_performance_is_not_judged(self):
        """A test without references passes whatever its figures: say which, once per test."""
        if self.is_dry_run() or self.comparison:     # the A/B verdict judges its figures
            return
        keys = {'$partition': self.current_partition.fullname, 'image': str(self.image),
                'num_nodes': self.num_nodes}
        found = references.unjudged(references_file(runtime().system.name), type(self).__name__,
                                    keys, self.perf_variables)
        if found:
            figures, why = found
            getlogger().warning(f'{self.display_name}: {", ".join(figures)} not judged: {why} '
                                f'(record them with python -m mlcheck.commands.baseline)')

    @run_after('setup')
    @reported_by_reframe
    def set_up_launch(self):
        """The launch, step by step: the partition's settings, the tasks' placement, the job's
        policy, the image, the job's exports, the ranks' command, and the container that runs it."""
        self.settings = partition_settings(self.current_partition)
        self.place_tasks()
        waits = self.job_policy()
        data = self.data_of_run()
        image = self.choose_image()
        if self.comparison:   # each side's steps export its own variables, none job-wide
            self.set_up_ab_rounds(image, data, waits)
            return
        self.prerun_cmds += launch.job_exports(self.settings, self.layout, waits, image)
        command = self.rank_command(image, data)
        if image is None:
            self.executable = command
        else:
            self.run_in_container(image, command, data)

    def place_tasks(self):
        """The node count, the knobs, and the layout of tasks and CPU masks as the job's resources
        and srun's options."""
        self.settings.check_node_count(self.num_nodes)
        self.resolve_knobs()
        self.layout = self.settings.layout(self.num_nodes, self.binding, **self.task_shape())
        self.num_tasks = self.layout.num_tasks
        self.num_tasks_per_node = self.layout.tasks_per_node
        self.num_cpus_per_task = self.layout.cores_per_task
        if self.settings.slurm_gpus:
            self.num_gpus_per_node = self.layout.gpus_per_node
        self.job.launcher.options += self.layout.srun_options()

    def job_policy(self):
        """What the job does when something goes wrong, whatever its layout: it is not run again
        after losing a node, and its ranks wait a bounded time (the waits, returned for the job's
        exports)."""
        if self.current_partition.scheduler.registered_name in ('slurm', 'squeue'):
            # a job that lost a node fails, and is not silently run again
            self.job.options += ['--no-requeue']
        waits = launch.Waits(self.rendezvous_timeout, self.collective_timeout, self.fault)
        waits.check(self.layout.num_tasks)
        return waits

    def choose_image(self):
        """The image's path (None: the partition's own Python); an image that could not be built
        here skips the test, saying why."""
        try:
            image = self.settings.resolve_image(self.image)
        except ImageUnavailable as err:
            self.skip(str(err))
        self.image_path = image
        self.expected_failure = self.settings.image_entry(image).expected_failure
        return image

    def rank_command(self, image, data):
        """What each task runs: the launch script, the image's Python, the program and its flags."""
        data_args = ['--data-dir', self.settings.data_path_for(image, data)] if data else []
        return shlex.join(launch.rank_command(
            self.settings.python_for(image), self.script,
            [*data_args, *self.script_arguments(), *self.launch_arguments()]))

    def run_in_container(self, image, command, data):
        self.container_platform = self.configured_container(image, command, data)

    def configured_container(self, image, command, data, settings=None):
        """The partition's container runtime, running the command in the image with the binds
        (of `settings`: the partition's, or those of -S compare_layers's side B)."""
        settings = settings or self.settings
        platform = self.container_platform_of_partition()
        platform.image = image
        platform.command = command
        warning = getattr(platform, 'image_warning', lambda: None)()
        if warning:
            getlogger().warning(f'{self.display_name}: {warning}')
        platform.mount_points = settings.bind_mounts(data)
        platform.options += list(settings.container_options)
        if settings.reads_edf:
            for table, entries in settings.edf_for(image).items():
                setattr(platform, table, entries)
        return platform

    def container_platform_of_partition(self):
        name = self.current_partition.container_runtime
        try:
            return containers.platform_for(name)
        except ValueError:
            raise ConfigError(f'partition {self.settings.partition} container_platforms: unknown '
                              f'type {name!r} (known: {", ".join(containers.known_platforms())})') from None

    def resolve_knobs(self):
        """Each knob: as set with -S, else from the partition's config, else its default."""
        all_knobs = {**self.common_knobs, **self.partition_knobs(), **self.knobs}
        values = knob_values(
            all_knobs, {name: getattr(self, name) for name in all_knobs},
            self.settings.checks.get(self.checks_key, {}),
            f'partition {self.settings.partition} extras.mlcheck.checks.{self.checks_key}')
        for name, value in values.items():
            setattr(self, name, value)

    #: Knobs whose default is a setting of the whole partition, extras.mlcheck.<name>.
    partition_wide_knobs = {}

    def partition_knobs(self):
        """partition_wide_knobs, each with the partition's setting as its default."""
        return {name: dataclasses.replace(knob, default=getattr(self.settings, name))
                for name, knob in self.partition_wide_knobs.items()}

    def task_shape(self):
        """How tasks meet GPUs, as settings.layout() arguments: {} for one task per GPU (a
        torch.distributed rank each); a one-process program asks for tasks_per_node=1 and its
        gpus_per_task. Called after resolve_knobs(), so it may depend on knobs."""
        return {}

    def data_of_run(self):
        """The directory of the data the program reads (bound into the container), or None."""
        return None

    def script_arguments(self):
        """Arguments of the program besides --data-dir: the flags of the check's own knobs."""
        return knob_arguments(self.knobs, self)

    def launch_arguments(self):
        """Arguments every program of this kind takes, after script_arguments()."""
        return []

    def run_output(self):
        """The parsed output of the job (read once)."""
        if getattr(self, '_run_output', None) is None:
            self._run_output = output.read(os.path.join(self.stagedir, self.job.stdout),
                                           os.path.join(self.stagedir, self.job.stderr))
        return self._run_output

    def sanity_failure_expected(self):
        # what ReFrame's @rfm.xfail sets per class, here per image: a known-bad image's failure
        # is reported as expected (XFAIL), and its passing as an unexpected success
        reason = getattr(self, 'expected_failure', '')
        return bool(reason), f'image {self.image} is expected to fail: {reason}'

    def expectations(self):
        """What the program's output must show (sanity.Expectations)."""
        return sanity.Expectations.for_run(self.settings, self.layout, fault=self.fault)

    @sanity_function
    def assert_run_sane(self):
        found = self.ab_problems() if self.comparison else self.run_problems()
        if found and self.expected_failure:
            # ReFrame reports only the expected-failure reason: show how it failed this time
            getlogger().info(f'{self.display_name}: failed as expected: {"; ".join(found)}')
        if found:
            raise SanityError('; '.join(found))
        note = notes.to_say(self.settings, 'locality', locality.unread_note(self.run_output()))
        if note:
            self.logger.warning(note)
        return True

    def run_problems(self):
        """The launch promises (expectations()), and program_problems() once every rank finished."""
        expect = self.expectations()
        found = sanity.problems(self.run_output(), expect)
        if set(self.run_output().by_rank('done')) == set(range(expect.world_size)):
            found += stated_settings.problems(self.run_output(), flag_values(self.knobs, self))
            found += self.program_problems(self.run_output())
        return found

    def program_problems(self, run):
        """What else is wrong with a run in which every rank finished (one-line problems)."""
        return []

    def figure(self, name, value):
        """A performance value; a missing one fails with its name rather than a TypeError."""
        if value is None:
            raise SanityError(f'no {name} in the output of the training program')
        return value

    # --- what is recorded with every performance value ----------------------------------------

    #: Names of the check's variables that change its figures (model, batch size, epochs...):
    #: runs are compared only with runs of the same values (mlcheck.commands.report, baseline, scaling).
    figure_settings = ()

    #: `name=value;...` of figure_settings, and of the software stack the ranks, the library
    #: lines and the job reported (mlcheck.figures.stack); perf log fields and database columns.
    run_settings = variable(str, value='')
    software_stack = variable(str, value='')
    #: the machine's speed now (steps/s, mlcheck.simulated.speed) where the partition has one: the
    #: references were brought to it, and mlcheck.commands.baseline brings new figures back from it
    machine_speed = variable(float, type(None), value=None)

    @run_after('setup')
    def check_perflog_files(self):
        """The perf log and its lock that this test's values will be appended to: neither a link,
        in folders only the runner can change (unless the site trusts their other writers), our
        old lock brought to mode 0660 (mlcheck.harness.config.checked_perflog_files)."""
        rt = runtime()
        trusted = partition_settings(self.current_partition).trusts_perflog_writers
        for directory in perflog_directories(rt.site_config, rt.system.prefix, self.current_system.name,
                                             self.current_partition.name):
            checked_perflog_files(directory, type(self).variant_name(), trusted)

    @run_after('setup')
    @reported_by_reframe
    def check_database_lock(self):
        """The results database's lock, which ReFrame takes at the session's end to store it: no
        link, ours at mode 0660 (mlcheck.harness.config.checked_database_lock)."""
        rt = runtime()
        db_file = rt.get_option('storage/0/sqlite_db_file')
        # ReFrame runs a `$(command)` in it: where the name holds one, the lock is not guessed
        if rt.get_option('storage/0/enable') and not re.search(r'`|\$\(', db_file):
            checked_database_lock(os.path.expandvars(db_file))

    @run_after('setup')
    def record_settings(self):
        self.run_settings = stack.settings_of(self, self.figure_settings)
        self.prerun_cmds.append(stack.job_fact_command())

    @run_before('performance')
    def record_software_stack(self):
        if self.is_dry_run():
            return
        self.software_stack = stack.encode(stack.of_run(self.run_output(), self.image_path))
