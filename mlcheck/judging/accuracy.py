"""The test accuracy a healthy MNIST run must reach, by the optimizer steps it took.

What a run learns follows its optimizer steps (epochs x steps per epoch), and the steps per epoch
follow the batch size: `-S batch_size=128` halves them, and 3 epochs of 5 steps reached 0.65-0.85,
below the 0.8 that 3 epochs of 11 steps (batch 64) hold. Each bar lies below the least that
healthy runs of that many steps reached, at batch sizes 32 to 256 on the simulated partition's
digits (the harder set: MNIST itself gives ten times more steps per epoch); a run that does not
learn (shuffled labels) reaches about 0.1. Outside those batch sizes, or under 10 steps (2 steps
of 256 reached 0.15, no better than a broken run), nothing was measured that a bar could rest on:
the accuracy is then not judged, and the check says why. The figures are in docs/mnist-accuracy.md.
"""

# optimizer steps -> bar, for runs of at least that many steps
MNIST_BARS = {10: 0.3, 20: 0.7, 30: 0.8, 100: 0.9}
CALIBRATED_BATCH_SIZES = (32, 256)      # per rank, the least and the most measured


def mnist_bar(steps, batch_size):
    """The lowest acceptable test accuracy after `steps` optimizer steps of `batch_size` samples
    per rank; None where no bar was calibrated (unjudged_reason says why)."""
    if unjudged_reason(steps, batch_size):
        return None
    return max(bar for least, bar in MNIST_BARS.items() if least <= steps)


def unjudged_reason(steps, batch_size):
    low, high = CALIBRATED_BATCH_SIZES
    if not low <= batch_size <= high:
        return (f'no accuracy bar for batch size {batch_size} (calibrated for {low} to {high} '
                f'per rank)')
    if steps < min(MNIST_BARS):
        return (f'no accuracy bar for {steps} optimizer steps (at least {min(MNIST_BARS)}: fewer '
                f'do not tell a healthy run from one that does not learn)')
    return None
