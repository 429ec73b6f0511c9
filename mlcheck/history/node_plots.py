"""One PNG per figure of a node sweep: every node's value, nodes sorted worst first, the peers'
band (from the line past which a node is named up to the peers' better quartile) shaded, and the
named nodes in red with their names."""


import matplotlib

matplotlib.use('Agg')   # files only, no display
import matplotlib.pyplot as plt   # noqa: E402

from mlcheck.history.samples import file_name   # noqa: E402

MOST_LABELS = 24       # named nodes labelled; more would cover the data
MOST_TICKS = 40        # node names on the axis up to this many nodes


def plot_all(directory, verdicts):
    """[(verdict, file name)] of the figures written into `directory` (a mlcheck.files.Directory)."""
    written = []
    for verdict in verdicts:
        f = verdict.figure
        name = file_name('nodes', f.partition, f.test, f.var, suffix='.png')
        directory.written_by(name, lambda stream, verdict=verdict: plot(verdict, stream))
        written.append((verdict, name))
    return written


def plot(verdict, path):
    f = verdict.figure
    worse_first = sorted(verdict.values.items(),
                         key=lambda kv: kv[1] if verdict.higher_is_better else -kv[1])
    named = {node for node, _, _ in verdict.named}
    xs = range(len(worse_first))
    ys = [v for _, v in worse_first]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    if verdict.reference is not None and verdict.limit is not None:
        ax.axhspan(min(verdict.limit, verdict.reference), max(verdict.limit, verdict.reference),
                   color='tab:green', alpha=0.12, label="peers' band (not named)")
        ax.axhline(verdict.reference, color='tab:green', lw=1,
                   label=f"peers' reference (their better quartile) {verdict.reference:.4g}")
        ax.axhline(verdict.limit, color='tab:red', lw=1, ls='--',
                   label=f'named past {verdict.limit:.4g}')
    colours = ['tab:red' if node in named else 'tab:blue' for node, _ in worse_first]
    ax.scatter(xs, ys, c=colours, s=14 if len(ys) < 500 else 4, zorder=3)
    for i, (node, value) in enumerate(worse_first[:MOST_LABELS]):
        if node in named:
            ax.annotate(node, (i, value), xytext=(6, -4), textcoords='offset points',
                        color='tab:red', fontsize=8)
    if len(ys) <= MOST_TICKS:
        ax.set_xticks(list(xs), [node for node, _ in worse_first], rotation=90, fontsize=7)
    else:
        ax.set_xlabel(f'{len(ys)} nodes, worst first')
    ax.set_ylabel(f'{f.var} ({f.unit}, {"higher" if verdict.higher_is_better else "lower"} is better)')
    ax.set_title(f'{f.test} on {f.partition}: {f.var} per node\n'
                 f'{len(named)} named of {len(ys)}' + _failed(verdict.failed), fontsize=10)
    ax.margins(x=0.03, y=0.12)
    ax.legend(loc='upper center', bbox_to_anchor=(0.5, -0.22 if len(ys) <= MOST_TICKS else -0.15),
              ncol=3, fontsize=8, frameon=False)
    fig.savefig(path, dpi=100, bbox_inches='tight')
    plt.close(fig)


def _failed(nodes):
    if not nodes:
        return ''
    shown = ', '.join(sorted(nodes)[:6]) + (f' and {len(nodes) - 6} more' if len(nodes) > 6 else '')
    return f'; failed, no value: {shown}'
