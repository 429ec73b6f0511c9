"""Sanity rules on what the GPUs did (the ranks' `telemetry` facts): a GPU drawing less than a
fraction of the GPUs' upper-quartile power while the others train, and a throttle the vendor tool reported,
each named in one line with its rank, node, GPU and figures, as the slow-rank rule names a slow
rank. Telemetry that is absent is never a failure: it is said once (unavailable_note).
See docs/telemetry.md.
"""

from mlcheck.judging.peers import below_peers
from mlcheck.judging.rank_lists import group_by_node, rank_list
from mlcheck.figures import gpu_use as figures


def _where(run, rank):
    """'rank 3 on nid001 (GPU 2)', from the rank's own facts."""
    placed = run.by_rank('rank').get(rank, {})
    fact = figures.telemetry_facts(run).get(rank, {})
    node = placed.get('node')
    gpu = fact.get('gpu', placed.get('local_rank'))
    return f'rank {rank}{f" on {node}" if node else ""} (GPU {gpu if gpu is not None else "?"})'


def _detail(fact):
    """What else the GPU showed: utilization, clock, temperature, where the tool gave them."""
    parts = [f'{label} {fact[name]:.0f}{unit}' for name, label, unit in (
        ('utilization', 'utilization', ' %'), ('clock_mhz', 'clock', ' MHz'),
        ('temperature_c', 'max temperature', ' °C')) if isinstance(fact.get(name), (int, float))]
    return f'; {", ".join(parts)}' if parts else ''


def low_power(run, fraction):
    """[(rank, watts)] of the GPUs below `fraction` of the GPUs' upper quartile, lowest first, and
    that reference. When every GPU draws equally little, none is low: that is a regression, not an
    outlier."""
    verdict = below_peers(figures.values(run, 'power_w'), 1 - fraction)
    return verdict.named, verdict.reference


def problems(run, low_power_fraction):
    """One line per GPU below `low_power_fraction` of the GPUs' upper quartile (the one peer rule,
    judging.peers; 0: rule off) and per GPU reported throttled. Where a GPU's power is its MI250X
    package's, the line names the package: both GCDs, their ranks and each one's utilization."""
    found = []
    facts = figures.telemetry_facts(run)
    if low_power_fraction:
        low, reference = low_power(run, low_power_fraction)
        packages = any(f.get('power_note') for f in facts.values())
        unit = 'package' if packages else 'GPU'
        reporting = group_by_node(run, figures.values(run, 'power_w').items())
        for node, members in group_by_node(run, low).items():
            # a node's every GPU low, among others that are not: the node, in one line
            if len(members) > 1 and len(members) == len(reporting[node]) < sum(map(len, reporting.values())):
                watts = [w for _, w in members]
                found.append(f'node {node} draws too little: every {unit} of it, '
                             f'{rank_list([r for r, _ in members])}, drew {min(watts):.0f}-{max(watts):.0f} W, '
                             f'{min(watts) / reference:.2f}-{max(watts) / reference:.2f} of the upper-quartile '
                             f'{unit} ({reference:.0f} W; limit {low_power_fraction:g})')
                low = [(r, w) for r, w in low if (r, w) not in members]
        for rank, watts in low:
            secondary = _secondary_die(run, rank)
            who = _where(run, rank) if secondary is None else _package(run, rank, secondary)
            detail = _detail(facts[rank]) if secondary is None else _utilizations(run, rank, secondary)
            found.append(f'{who} drew {watts:.0f} W, {watts / reference:.2f} of the '
                         f'upper-quartile {unit} ({reference:.0f} W; limit {low_power_fraction:g})'
                         f'{detail}')
    for rank, fact in sorted(facts.items()):
        if fact.get('throttle'):
            found.append(f'{_where(run, rank)} was throttled: {fact["throttle"]}{_detail(fact)}')
    return found


def _secondary_die(run, rank):
    """The rank on the other GCD of `rank`'s MI250X package, or None: the rank on the same node
    whose GPU is the next one and reports no power of its own (rocm-smi's `N/A (Secondary die)`:
    it numbers a package's two GCDs 2k and 2k+1, the package's power on the first)."""
    facts, placed = figures.telemetry_facts(run), run.by_rank('rank')
    gpu, node = facts[rank].get('gpu'), placed.get(rank, {}).get('node')
    if not isinstance(gpu, int) or gpu % 2:
        return None
    return next((other for other, fact in sorted(facts.items())
                 if fact.get('power_note') and fact.get('gpu') == gpu + 1
                 and placed.get(other, {}).get('node') == node), None)


def _package(run, rank, secondary):
    """'the package of GCDs 2-3 on nid001 (ranks 2, 3)'."""
    gpu = figures.telemetry_facts(run)[rank]['gpu']
    node = run.by_rank('rank').get(rank, {}).get('node')
    return f'the package of GCDs {gpu}-{gpu + 1}{f" on {node}" if node else ""} (ranks {rank}, {secondary})'


def _utilizations(run, *ranks):
    """'; utilization GCD 2 99 %, GCD 3 3 %': which of a package's GCDs idles."""
    facts = figures.telemetry_facts(run)
    parts = [f'GCD {facts[r]["gpu"]} {facts[r]["utilization"]:.0f} %' for r in ranks
             if isinstance(facts[r].get('utilization'), (int, float))]
    return f'; utilization {", ".join(parts)}' if parts else ''


def _ranks_by_reason(run, field):
    """'ranks 0-3: why; rank 5: why else' of the ranks whose telemetry gives `field`, or ''."""
    reasons = {}
    for rank, fact in sorted(figures.telemetry_facts(run).items()):
        if fact.get(field):
            reasons.setdefault(fact[field], []).append(rank)
    return '; '.join(f'{rank_list(ranks)}: {reason}' for reason, ranks in reasons.items())


def throttle_note(run):
    """One line on the ranks whose GPU was read but whose throttling could not be, and why, or None:
    a throttled GPU there would pass unnamed, so it is said, never failed."""
    why = _ranks_by_reason(run, 'throttle_not_checked')
    return f'throttling not checked ({why})' if why else None


def unavailable_note(run, stand_in=False):
    """One line on the ranks that could not read their GPU, and why, or None: said, never failed."""
    why = _ranks_by_reason(run, 'gpu_telemetry_unavailable')
    if not why:
        return None
    where = ' on stand-in GPUs (the ranks train on CPUs)' if stand_in else ''
    return f'GPU telemetry not available{where} ({why}); peak host memory is still reported'
