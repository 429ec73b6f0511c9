"""CIFAR-100 ResNet training throughput in every PyTorch image, at every node count.

The LUMI AI course's benchmark (ResNet-152 on CIFAR-100, DDP across GPUs) as a check: does it
still train (every rank finishes, the loss is finite and falls), wired right (binding, one GPU
per rank, network plugin), and how many images/s, per GPU, and how well it scales. The course
also compares DataParallel in one process and a single device: -S mode=dp, -S mode=single
(docs/cifar-benchmark.md). The data stays on the GPU and is augmented there (-S data=device), so
the training figure follows the GPU; the loader alone is its own figure, and the model's FLOP/s
are shown as a share of the GPU's peak where the partition declares it.
"""

import reframe as rfm
from reframe.core.builtins import performance_function, run_before
from reframe.core.logging import getlogger

from mlcheck.harness.ab_rounds import Steps
from mlcheck.harness.knobs import declare_knobs, program_knobs
from mlcheck.figures import data_path
from mlcheck.history import scaling
from mlcheck.harness.training_check import DistributedTrainingCheck
from mlcheck.judging import notes


@rfm.simple_test
class CIFAR100ResNetCheck(DistributedTrainingCheck):
    descr = 'CIFAR-100 ResNet training throughput across nodes, one rank per GPU'
    script = 'pytorch/cifar/train_cifar100.py'
    dataset = 'cifar100'
    dataset_marker = 'cifar-100-python'

    # Knobs: -S sets one; else the partition's extras.mlcheck.checks.cifar100; else the default.
    checks_key = 'cifar100'
    knobs = {
        **program_knobs.CIFAR100,       # the program's flags, with their defaults (src/pytorch/program_knobs.py)
    }
    figure_settings = tuple(knobs)
    ab_steps = Steps('samples_per_s', {'epochs': 2, 'steps': 20, 'solo_steps': 0})     # -S compare_with
    declare_knobs(locals(), knobs)      # each a variable; the program's flags (knob_arguments)

    def task_shape(self):
        if self.mode == 'ddp':
            return {}
        # a case that cannot exist under the knob (the suite's 2-node case with -S mode=dp) is
        # skipped, saying why: it is not a failure of the system under test
        self.skip_if(self.num_nodes > 1, f'-S mode={self.mode} runs one process: it takes one node, '
                                         f'not num_nodes={self.num_nodes}')
        gpus = self.settings.topology.gpus_per_node if self.mode == 'dp' else 1
        return {'tasks_per_node': 1, 'gpus_per_task': gpus}

    def times_ranks_alone(self):
        return self.mode == 'ddp' and DistributedTrainingCheck.times_ranks_alone(self)

    def training_promises(self):
        return {'epochs': self.epochs, 'loss_must_fall': True}

    @run_before('performance')
    def compare_with_one_node(self):
        if self.is_dry_run():
            return
        if self.mode != 'ddp':
            # one process: nothing scales across ranks (and no DDP baseline compares with it)
            self.perf_variables.pop('scaling_efficiency')
            return
        scaling.record(self, self.per_gpu())
        if self.num_nodes == 1:
            # 100 % by definition: a figure that can tell nothing is not reported (nor judged)
            self.perf_variables.pop('scaling_efficiency')
            return
        baseline = scaling.one_node_baseline(self, 'images_per_s_per_gpu')
        if baseline is None:
            getlogger().info(f'{self.display_name}: no one-node result of image {self.image} in this '
                             f'session or in stored results: scaling efficiency not reported')
            self.perf_variables.pop('scaling_efficiency')
        else:
            self.one_node_per_gpu, source = baseline
            getlogger().debug(f'{self.display_name}: one-node baseline from {source}')

    @performance_function('images/s')
    def images_per_s(self):
        return self.figure('images/s', self.run_output().result_value('samples_per_s'))

    @performance_function('images/s')
    def images_per_s_per_gpu(self):
        return self.figure('images/s per GPU', self.per_gpu())

    @performance_function('%')
    def scaling_efficiency(self):
        # the ratio first: x / x is exactly 1, whereas 100 * x / x can round to 99.99999999999999
        return 100 * (self.per_gpu() / self.one_node_per_gpu)

    def per_gpu(self):
        return self.run_output().result_value('samples_per_s_per_device')

    @performance_function('GFLOP/s')
    def model_gflop_per_s(self):
        return self.figure('model FLOP/s', self.run_output().result_value('model_flops_per_s')) / 1e9

    @run_before('performance')
    def without_a_declared_peak(self):
        if self.is_dry_run() or self.peak_tflops() is not None:
            return
        self.perf_variables.pop('model_flops_of_peak')
        note = notes.to_say(self.settings, 'gpu peak', f'model FLOP/s of peak not reported: partition '
                            f'{self.settings.partition} declares no gpu_peak_tflops.'
                            f'{data_path.precision(self.amp)}')
        if note:
            getlogger().info(f'{self.display_name}: {note}')

    def peak_tflops(self):
        return self.settings.gpu_peak_tflops.get(data_path.precision(self.amp))

    @performance_function('%')
    def model_flops_of_peak(self):
        run = self.run_output()
        return self.figure('model FLOP/s per GPU', data_path.percent_of_peak(
            run.result_value('model_flops_per_s'), run.result_value('devices'), self.peak_tflops()))

    @performance_function('images/s')
    def loader_images_per_s(self):
        return self.figure('loader images/s (the loader alone)',
                           data_path.loader_images_per_s(self.run_output()))

    # Where the partition follows its machine's speed (the simulated one), each rank also runs the
    # fixed speed workload right after timing its loader, all ranks at once as their loaders ran,
    # outside every timed part: the loader's reference follows that reading of the job
    # (docs/simulated-cluster.md says why the training figures do not).
    JOB_SPEED_S = 0.4

    def measures_job_speed(self):
        return self.settings.machine_speed is not None

    def script_arguments(self):
        job_speed = ['--speed-seconds', str(self.JOB_SPEED_S)] if self.measures_job_speed() else []
        # (no zero-argument super() in a ReFrame check: its class namespace cannot delete __classcell__)
        return [*job_speed, *DistributedTrainingCheck.script_arguments(self)]

    def job_speed_now(self):
        return data_path.job_speed(self.run_output()) if self.measures_job_speed() else None

    @run_before('performance')
    def without_a_job_speed(self):
        if not self.is_dry_run() and not self.measures_job_speed():
            self.perf_variables.pop('job_speed')

    @performance_function('steps/s')
    def job_speed(self):
        return self.figure('speed workload in the job', self.job_speed_now())
