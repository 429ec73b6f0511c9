"""MNIST data-parallel training in every PyTorch image, at every node count of the partition.

Answers, after a system upgrade: does multi-node training still work in this image (every rank
finishes, the model learns), with the right CPU binding and network plugin, and how fast.
"""

import reframe as rfm
from reframe.core.builtins import performance_function, variable

from mlcheck.data.datasets import check_mnist
from mlcheck.judging.accuracy import mnist_bar
from mlcheck.rfm import DistributedTrainingCheck


@rfm.simple_test
class MNISTDistributedCheck(DistributedTrainingCheck):
    descr = 'MNIST DDP training across nodes, one rank per GPU'
    script = 'pytorch/mnist/mnist_DDP.py'
    #: Training epochs; the first is warm-up and not counted in the throughput.
    epochs = variable(int, value=10)
    dataset = 'mnist'
    dataset_marker = 'MNIST/raw'
    # not throttle: a run slowed on purpose is compared with its unthrottled baseline
    figure_settings = ('epochs',)

    def script_arguments(self):
        return ['--epochs', str(self.epochs), '--ranks-per-node', str(self.layout.tasks_per_node)]

    def training_promises(self):
        if self.min_accuracy is not None:
            return {'min_accuracy': self.min_accuracy}
        return {'min_accuracy': mnist_bar(self.epochs)}   # what a healthy run of this length reaches

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
