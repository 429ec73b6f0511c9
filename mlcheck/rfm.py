"""ReFrame base class for distributed PyTorch training checks: thin glue over the plain modules.

A concrete check names its training script, its arguments and its dataset; this class turns
the partition's settings (config extras) into the task layout, CPU masks, rank environment,
container command, sanity and performance.
"""

import functools
import os
import shlex

import reframe as rfm
from reframe.core.builtins import parameter, run_after, sanity_function, variable
from reframe.core.exceptions import ConfigError as ReframeConfigError, SanityError
from reframe.core.logging import getlogger
from reframe.core.runtime import runtime

from mlcheck.judging import output, sanity
from mlcheck.knobs import Knob, knob_values, knob_variable
from mlcheck.placement import containers, launch
from mlcheck.errors import ConfigError
from mlcheck.rfm_config import references_file
from mlcheck.site import ImageUnavailable, PartitionSettings


def reported_by_reframe(fn):
    """Let ReFrame report our ConfigErrors as its own: one line, no traceback."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ConfigError as err:
            raise ReframeConfigError(str(err)) from None
    return wrapper


def partition_settings(partition):
    return PartitionSettings.from_extras(partition.fullname, partition.extras,
                                         partition.container_runtime)


def _configured_partitions():
    """Partitions of the current system with mlcheck settings (none outside a ReFrame run)."""
    try:
        partitions = runtime().system.partitions
    except Exception:
        return []
    return [p for p in partitions if 'mlcheck' in p.extras]


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


class DistributedTrainingCheck(rfm.RunOnlyRegressionTest):
    #: Container image: a name configured for the partition (extras.mlcheck.images),
    #: 'host' where the partition has no container runtime, or an image path given with -P.
    image = parameter(_configured(lambda s: s.image_paths()), type=str)

    #: Number of nodes; the partition's extras.mlcheck.node_counts unless given with -P.
    num_nodes = parameter(_configured(lambda s: s.node_counts), type=int)

    #: Training script, relative to src/; its arguments come from script_arguments().
    script = variable(str)

    #: Name of the dataset in extras.mlcheck.datasets, and a path it must contain.
    dataset = variable(str)
    dataset_marker = variable(str, value='')

    #: Dataset directory; overrides the partition's (-S data_dir=DIR).
    data_dir = variable(str, value='')

    #: Lowest acceptable final test accuracy; None when the script reports none.
    min_accuracy = variable(float, type(None), value=None)

    #: Seconds the ranks wait for all of them to join, and for each collective: a rank that
    #: died or hangs ends the job this long after, far below its time limit (knobs, below).
    rendezvous_timeout = knob_variable()
    collective_timeout = knob_variable()

    #: A failure to inject, to see how it is reported (-S fault=crash:1:2; docs/faults.md).
    fault = variable(str, value='')

    #: Knobs (mlcheck.knobs) a site may set per partition in extras.mlcheck.checks.<checks_key>
    #: and a user with -S: the check's own `knobs` and these common ones. Each is also a variable
    #: of the check, declared with knob_variable(); resolve_knobs() sets it to its value.
    checks_key = ''
    knobs = {}
    common_knobs = {
        'rendezvous_timeout': Knob(float(launch.Waits.rendezvous_timeout),
                                   'seconds the ranks wait for all of them to join'),
        'collective_timeout': Knob(float(launch.Waits.collective_timeout),
                                   'seconds each collective may take'),
    }

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

    @run_after('init')
    def use_site_references(self):
        path = references_file(runtime().system.name)
        if os.path.isfile(path):
            self.reference = {'$ref': path}

    @run_after('setup')
    @reported_by_reframe
    def set_up_launch(self):
        self.settings = partition_settings(self.current_partition)
        self.settings.check_node_count(self.num_nodes)
        self.resolve_knobs()
        self.layout = launch.Layout.for_nodes(self.settings.topology, self.num_nodes)
        self.num_tasks = self.layout.num_tasks
        self.num_tasks_per_node = self.layout.tasks_per_node
        self.num_cpus_per_task = self.layout.cores_per_task
        if self.settings.has_gpus:
            self.num_gpus_per_node = self.layout.tasks_per_node
        self.job.launcher.options += self.layout.srun_options()
        if self.current_partition.scheduler.registered_name in ('slurm', 'squeue'):
            # a job that lost a node fails, and is not silently run again
            self.job.options += ['--no-requeue']
        waits = launch.Waits(self.rendezvous_timeout, self.collective_timeout, self.fault)
        waits.check(self.layout.num_tasks)

        data = self.settings.dataset_dir(self.dataset, self.data_dir, self.dataset_marker)
        self.check_dataset(data, self.settings.dataset_source(self.dataset, self.data_dir))
        try:
            image = self.settings.resolve_image(self.image)
        except ImageUnavailable as err:
            self.skip(str(err))
        self.expected_failure = self.settings.image_entry(image).expected_failure
        self.prerun_cmds += launch.job_exports(self.settings, self.layout, waits, image)
        command = shlex.join(launch.rank_command(
            self.settings.python_for(image), self.script,
            ['--data-dir', self.settings.data_path_for(image, data), *self.script_arguments()]))
        if image is None:
            self.executable = command
        else:
            self.container_platform = self.container_platform_of_partition()
            self.container_platform.image = image
            self.container_platform.command = command
            self.container_platform.mount_points = self.settings.bind_mounts(data)
            self.container_platform.options += list(self.settings.container_options)

    def container_platform_of_partition(self):
        name = self.current_partition.container_runtime
        try:
            return containers.platform_for(name)
        except ValueError:
            raise ConfigError(f'partition {self.settings.partition} container_platforms: unknown '
                              f'type {name!r} (known: {", ".join(containers.known_platforms())})') from None

    def resolve_knobs(self):
        """Each knob: as set with -S, else from the partition's config, else its default."""
        all_knobs = {**self.common_knobs, **self.knobs}
        values = knob_values(
            all_knobs, {name: getattr(self, name) for name in all_knobs},
            self.settings.checks.get(self.checks_key, {}),
            f'partition {self.settings.partition} extras.mlcheck.checks.{self.checks_key}')
        for name, value in values.items():
            setattr(self, name, value)

    def script_arguments(self):
        """Arguments of the training script besides --data-dir."""
        return []

    def check_dataset(self, path, source):
        """Raise a ConfigError if the dataset in `path` (configured in `source`) is unusable,
        so that a corrupt copy fails here and not in every rank."""

    def training_promises(self):
        """What the training program's output must show, besides the launch (see Expectations)."""
        return {'min_accuracy': self.min_accuracy}

    def run_output(self):
        """The parsed output of the job (read once)."""
        if getattr(self, '_run_output', None) is None:
            self._run_output = output.read(os.path.join(self.stagedir, self.job.stdout),
                                           os.path.join(self.stagedir, self.job.stderr))
        return self._run_output

    def __rfm_xfail_sanity__(self):
        # what ReFrame's @rfm.xfail sets per class, here per image: a known-bad image's failure
        # is reported as expected (XFAIL), and its passing as an unexpected success
        reason = getattr(self, 'expected_failure', '')
        return bool(reason), f'image {self.image} is expected to fail: {reason}'

    @sanity_function
    def assert_training_sane(self):
        expect = sanity.Expectations.for_run(self.settings, self.layout, fault=self.fault,
                                             **self.training_promises())
        found = sanity.problems(self.run_output(), expect)
        if found and self.expected_failure:
            # ReFrame reports only the expected-failure reason: show how it failed this time
            getlogger().info(f'{self.display_name}: failed as expected: {"; ".join(found)}')
        if found:
            raise SanityError('; '.join(found))
        return True

    def figure(self, name, value):
        """A performance value; a missing one fails with its name rather than a TypeError."""
        if value is None:
            raise SanityError(f'no {name} in the output of the training program')
        return value
