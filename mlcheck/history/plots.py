"""PNG plots of performance history, one figure per check and variable, read at a glance on a
CI page: one colour per image (the same in every figure of a report), before dashed with open
markers and after solid with filled ones, legends outside the data, every point inside the axes.
"""

import math
import statistics
import textwrap

import matplotlib

matplotlib.use('Agg')   # files only, no display
import matplotlib.pyplot as plt   # noqa: E402

from mlcheck.history.samples import group   # noqa: E402

SIDES = {'before': {'linestyle': '--', 'markerfacecolor': 'white'},
         'after': {'linestyle': '-'}}
DPI = 100
LEGEND_INCHES = 0.45   # below the panels
MARGIN = 0.08    # of the data's range, kept free at each end of an axis


def colours(images):
    """{image: colour}, stable for the sorted names, shared by a report's figures."""
    palette = plt.get_cmap('tab10').colors
    return {image: palette[i % len(palette)] for i, image in enumerate(sorted(images))}


def scaling(sides, title, path, colour_of):
    """The variable against node count: one line per image and side, the mean of the
    repetitions with their min-max range. sides: {'before': [samples], 'after': [samples]} of
    one partition, check and variable."""
    fig, ax = plt.subplots(figsize=(8, 4.2))
    nodes_seen, values_seen, unit = set(), [], ''
    images = sorted({s.image for samples in sides.values() for s in samples})
    for side, samples in sides.items():
        for image, of_image in sorted(group(samples, lambda s: s.image).items()):
            # side by side, not on top of each other: each image and side a little apart
            slot = 2 * images.index(image) + (side == 'after') - (2 * len(images) - 1) / 2
            shift = 1.025 ** slot
            by_nodes = sorted(group(of_image, lambda s: s.num_nodes).items())
            nodes = [n for n, _ in by_nodes]
            values = [[s.value for s in ss] for _, ss in by_nodes]
            means = [statistics.fmean(v) for v in values]
            spread = [[m - min(v) for m, v in zip(means, values)],
                      [max(v) - m for m, v in zip(means, values)]]
            ax.errorbar([n * shift for n in nodes], means, yerr=spread, capsize=4, marker='o',
                        markersize=7, linewidth=2, color=colour_of[image],
                        label=f'{image}, {side}', **SIDES[side])
            nodes_seen.update(nodes)
            values_seen += [v for vs in values for v in vs]
            unit = of_image[0].unit
    ticks = sorted(nodes_seen)
    ax.set_xscale('log', base=2)
    ax.set_xticks(ticks, [str(n) for n in ticks])
    ax.minorticks_off()
    ax.set_xlim(min(ticks) / 1.25, max(ticks) * 1.25)
    ax.set_ylim(*_padded(values_seen, from_zero=True))
    ax.set_xlabel('nodes')
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc='upper left', bbox_to_anchor=(1.02, 1), borderaxespad=0)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def over_time(panels, title, path, colour_of):
    """Small multiples, one panel per test: every repetition in completion order, before then
    after, with each side's mean. panels: [(panel title, image, {'before': [...], 'after':
    [...]})] of one partition, check and variable."""
    columns = min(len(panels), max(2, math.ceil(math.sqrt(len(panels)))))
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 2.8 * rows + LEGEND_INCHES),
                             squeeze=False)
    unit = ''
    limits = relative_limits(panels)
    for ax, (name, image, sides), ylim in zip(axes.flat, panels, limits):
        start, values, ticks = 1, [], {}
        for side, samples in sides.items():
            samples = sorted(samples, key=lambda s: s.time)
            if not samples:
                continue
            if start > 1:
                ax.axvline(start - 1, color='grey', linewidth=0.8, linestyle=':')
            x = list(range(start, start + len(samples)))
            ticks.update({position: str(i) for i, position in enumerate(x, start=1)})
            y = [s.value for s in samples]
            ax.plot(x, y, 'o', markersize=6, color=colour_of[image], label=side,
                    markerfacecolor=SIDES[side].get('markerfacecolor', colour_of[image]))
            ax.plot([x[0] - 0.3, x[-1] + 0.3], [statistics.fmean(y)] * 2, color=colour_of[image],
                    linestyle=SIDES[side]['linestyle'], linewidth=1.5)
            start += len(samples) + 1     # a gap between the sides
            values += y
            unit = samples[0].unit
        ax.set_xlim(0, max(start - 1, 2))
        ax.set_ylim(*ylim)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        shown = sorted(ticks)[::max(1, len(ticks) // 8)]    # readable when there are many
        ax.set_xticks(shown, [ticks[t] for t in shown])
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(unit, fontsize=9)
    for ax in axes[-1, :]:
        ax.set_xlabel('repetition of each side, in completion order', fontsize=8)
    handles = [plt.Line2D([], [], marker='o', color='grey', label=f'{side} (line: mean)',
                          markerfacecolor=style.get('markerfacecolor', 'grey'),
                          linestyle=style['linestyle']) for side, style in SIDES.items()]
    handles += [plt.Line2D([], [], marker='s', linestyle='', color=colour, label=image)
                for image, colour in colour_of.items() if any(image == p[1] for p in panels)]
    # wrapped to the figure's width: a long check and partition name is not cut at both ends
    fig.suptitle(textwrap.fill(title, int(4.2 * columns * 12)), fontsize=10)
    fig.legend(handles=handles, loc='lower center', ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, LEGEND_INCHES / (2.8 * rows + LEGEND_INCHES), 1, 1))
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def relative_limits(panels):
    """Each panel's y limits, all spanning the same share of their panel's mean before (or of
    all its values, with no before): the widest panel's change, with MARGIN. Each panel's own
    range made -3 % in one look like -41 % in another."""
    refs, spans = [], []
    for _, _, sides in panels:
        values = [s.value for ss in sides.values() for s in ss if s.value is not None]
        before = [s.value for s in sides.get('before', []) if s.value is not None]
        ref = statistics.fmean(before or values) if values else 1.0
        refs.append(ref or 1.0)
        spans.append(max((abs(v / ref - 1) for v in values), default=0.0) if ref else 0.0)
    span = (max(spans, default=0.0) or 0.05) * (1 + MARGIN)
    return [(ref * (1 - span), ref * (1 + span)) for ref in refs]


def _padded(values, from_zero=False):
    """Axis limits with MARGIN of the range free at each end, so no point sits on the frame."""
    low, high = (0 if from_zero else min(values, default=0)), max(values, default=1)
    span = (high - low) or abs(high) or 1
    return (low if from_zero else low - MARGIN * span), high + MARGIN * span

