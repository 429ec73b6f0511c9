"""Figures that tell the data path from the GPU: the loader alone, and the model's FLOP/s as a
share of the GPU's peak.

The CIFAR-100 program times its DataLoader alone, no model, before training (a `loader` fact per
rank, src/pytorch/cifar/cifar_data.py time_loader): a slower filesystem or fewer cores lower that
figure, while the training figure, on the device data path, follows the GPU. The model's FLOP/s
per GPU over the peak the partition declares for the precision used (extras.mlcheck
gpu_peak_tflops) says how much of the GPU the training uses.
"""

import statistics


def loader_rates(run):
    """{rank: images/s of its loader alone} of the ranks that reported a positive rate."""
    return run.positive('loader', 'images_per_s')


def loader_images_per_s(run):
    """The median rank's loader images/s, or None where no rank timed its loader."""
    rates = loader_rates(run)
    return statistics.median(rates.values()) if rates else None


def job_speed(run):
    """The median rank's rate of the fixed speed workload run in the job beside its loader
    (src/pytorch/speed_workload.py, steps/s), or None where no rank ran it."""
    rates = run.positive('speed', 'steps_per_s')
    return statistics.median(rates.values()) if rates else None


def precision(amp):
    """The key of gpu_peak_tflops that a run trains at: bf16 under autocast, else fp32."""
    return 'bf16' if amp else 'fp32'


def percent_of_peak(model_flops_per_s, devices, peak_tflops):
    """Model FLOP/s per device as a percentage of `peak_tflops` (TFLOP/s per device), or None
    where a figure is missing or not positive."""
    numbers = (model_flops_per_s, devices, peak_tflops)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in numbers):
        return None
    return 100 * (model_flops_per_s / devices / (peak_tflops * 1e12))
