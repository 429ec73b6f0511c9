"""Figures of what the GPUs and hosts did over the timed epochs, from the ranks' `telemetry`
facts (src/pytorch/telemetry.py): median GPU power, the lowest GPU's power over the median,
median utilization, peak GPU memory and peak host memory. Each is None where no rank gave it
(stand-in GPUs, a tool that does not tell): absent telemetry is never a figure of 0.

Power is judged per GPU that reports it: where one GCD of an MI250X package reports the whole
package and the other none (rocm-smi's `N/A (Secondary die)`), the packages are what is compared.
See docs/telemetry.md.
"""

import statistics

from mlcheck.figures.quartiles import upper_quartile


def telemetry_facts(run):
    """{rank: its telemetry fact}."""
    return run.by_rank('telemetry')


def values(run, name):
    """{rank: figure} of the ranks whose telemetry gives `name` as a positive number."""
    return run.positive('telemetry', name)


def median_of(run, name):
    found = values(run, name)
    return statistics.median(found.values()) if found else None


def peak_of(run, name):
    found = values(run, name)
    return max(found.values()) if found else None


def median_power(run):
    return median_of(run, 'power_w')


def lowest_power_fraction(run):
    """The lowest reporting GPU's mean power over the GPUs' upper quartile (figures.quartiles), or None."""
    powers = values(run, 'power_w')
    return min(powers.values()) / upper_quartile(powers.values()) if powers else None


def median_utilization(run):
    return median_of(run, 'utilization')


def peak_gpu_memory(run):
    return peak_of(run, 'gpu_memory_gb')


def peak_host_memory(run):
    return peak_of(run, 'host_memory_gb')
