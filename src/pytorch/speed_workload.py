"""The fixed speed workload of the simulated partition, in one place: a few training steps of a
small convolution network in one thread, the shape of work the checks do. Its rate in steps/s is
the machine's speed that references follow (mlcheck.simulated.speed measures it outside every
job; the CIFAR-100 program beside its loader, in the job). Standard library and torch only: it
runs in the images too.
"""

import statistics
import time

import torch
from torch import nn


def measure(repeats=5, seconds=0.3):
    """Training steps per second of the workload in one thread: the median of `repeats` spans of
    about `seconds` each, after one warm-up span. The caller's thread count and random state are
    left as they were."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                  nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                  nn.Flatten(), nn.Linear(64, 100))
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            images, labels = torch.randn(16, 3, 32, 32), torch.randint(0, 100, (16,))

            def span():
                steps, start = 0, time.perf_counter()
                while time.perf_counter() - start < seconds:
                    optimizer.zero_grad()
                    nn.functional.cross_entropy(model(images), labels).backward()
                    optimizer.step()
                    steps += 1
                return steps / (time.perf_counter() - start)

            span()
            return statistics.median(span() for _ in range(repeats))
    finally:
        torch.set_num_threads(threads)
