"""MNIST data-parallel training in every PyTorch image, at every node count of the partition.

Answers, after a system upgrade: does multi-node training still work in this image (every rank
finishes, the model learns), with the right CPU binding and network plugin, and how fast.
"""

import reframe as rfm
from reframe.core.builtins import performance_function
from reframe.core.logging import getlogger

from mlcheck.data.datasets import check_mnist
from mlcheck.judging.accuracy import mnist_bar, unjudged_reason
from mlcheck.harness.ab_rounds import Steps
from mlcheck.harness.knobs import declare_knobs, program_knobs
from mlcheck.harness.training_check import DistributedTrainingCheck


@rfm.simple_test
class MNISTDistributedCheck(DistributedTrainingCheck):
    descr = 'MNIST DDP training across nodes, one rank per GPU'
    script = 'pytorch/mnist/mnist_DDP.py'
    # Knobs: -S sets one; else the partition's extras.mlcheck.checks.mnist; else the default.
    checks_key = 'mnist'
    knobs = {
        **program_knobs.MNIST,          # the program's flags, with their defaults (src/pytorch/program_knobs.py)
    }
    declare_knobs(locals(), knobs)      # each a variable; the program's flags (knob_arguments)
    dataset = 'mnist'
    dataset_marker = 'MNIST/raw'
    # not throttle: a run slowed on purpose is compared with its unthrottled baseline
    figure_settings = ('epochs', 'batch_size')
    ab_steps = Steps('samples_per_s', {'epochs': 2, 'solo_steps': 0}, ('--steps', '20'))    # -S compare_with

    def training_promises(self):
        if self.min_accuracy is not None:
            return {'min_accuracy': self.min_accuracy}
        result = self.run_output().result()
        if result is None:
            return {'min_accuracy': 0.0}    # any bar: sanity reports the missing accuracy
        # what a healthy run of as many optimizer steps reaches (the program reports its steps
        # per epoch, which follow the batch size)
        steps = self.epochs * result.get('steps', 0)
        why = unjudged_reason(steps, self.batch_size)
        if why:
            getlogger().warning(f'{self.display_name}: test accuracy not judged: {why}')
        return {'min_accuracy': mnist_bar(steps, self.batch_size)}

    @performance_function('samples/s')
    def samples_per_s(self):
        return self.figure('samples/s', self.run_output().result_value('samples_per_s'))

    @performance_function('samples/s')
    def samples_per_s_per_gpu(self):
        return self.figure('samples/s per GPU', self.run_output().result_value('samples_per_s_per_device'))

    @performance_function('s')
    def train_time(self):
        return self.figure('training time', self.run_output().train_seconds())

    def check_dataset(self, path, source):
        check_mnist(path, source)
