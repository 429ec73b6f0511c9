"""PNG plots of performance history: a variable against node count per image, and over time per test.

Before is drawn in blue, after in orange; each point of "over time" is one repetition.
"""

import statistics
from datetime import datetime

import matplotlib

matplotlib.use('Agg')   # files only, no display
import matplotlib.pyplot as plt   # noqa: E402

from mlcheck.perf.history import group   # noqa: E402

COLOURS = {'before': 'tab:blue', 'after': 'tab:orange'}


def scaling(sides, title, path):
    """`var` against node count: one line per image and side, the mean with the min-max range.

    sides: {'before': [samples], 'after': [samples]} of one partition, check and variable.
    """
    fig, ax = plt.subplots(figsize=(7, 4.5))
    unit = ''
    for side, samples in sides.items():
        for image, of_image in sorted(group(samples, lambda s: s.image).items()):
            by_nodes = sorted(group(of_image, lambda s: s.num_nodes).items())
            nodes = [n for n, _ in by_nodes]
            values = [[s.value for s in ss] for _, ss in by_nodes]
            means = [statistics.fmean(v) for v in values]
            spread = [[m - min(v) for m, v in zip(means, values)],
                      [max(v) - m for m, v in zip(means, values)]]
            shift = 0.97 if side == 'before' else 1.03     # side by side, not on top of each other
            ax.errorbar([n * shift for n in nodes], means, yerr=spread, capsize=4, marker='o',
                        linestyle='-' if side == 'after' else '--', color=COLOURS[side],
                        label=f'{image} ({side})')
            unit = of_image[0].unit
    ax.set_xlabel('nodes')
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=9)
    ax.set_xticks(sorted({s.num_nodes for ss in sides.values() for s in ss}))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def over_time(sides, title, path):
    """Every repetition of one test's variable at its completion time, with each side's mean."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    unit = ''
    for side, samples in sides.items():
        if not samples:
            continue
        times = [datetime.fromtimestamp(s.time) for s in samples]
        ax.plot(times, [s.value for s in samples], 'o', color=COLOURS[side], label=side, alpha=0.8)
        ax.plot([min(times), max(times)], [statistics.fmean(s.value for s in samples)] * 2,
                '-', color=COLOURS[side], linewidth=2)
        unit = samples[0].unit
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
