"""The test accuracy a healthy MNIST run must reach, by the number of epochs it trained.

Every epoch has the optimizer steps of one node's pass over the data, at any node count
(src/pytorch/mnist/mnist_DDP.py), so the bar depends on the epochs alone. Each bar lies below
the least that healthy runs reached on the simulated partition's digits at 1, 2 and 4 nodes,
the harder set (MNIST itself gives ten times more steps per epoch); a run that does not learn
(shuffled labels) reaches about 0.1. The figures are in docs/mnist-accuracy.md.
"""

# epochs -> bar, for runs of at least that many epochs
MNIST_BARS = {1: 0.3, 2: 0.7, 3: 0.8, 10: 0.9}


def mnist_bar(epochs):
    """The lowest acceptable test accuracy after `epochs` epochs (None for none)."""
    return max((bar for least, bar in MNIST_BARS.items() if least <= epochs), default=None)
