"""Sanity rules on what the GPUs did (the ranks' `telemetry` facts): a GPU drawing less than a
fraction of the median power while the others train, and a throttle the vendor tool reported,
each named in one line with its rank, node, GPU and figures, as the slow-rank rule names a slow
rank. Telemetry that is absent is never a failure: it is said once (unavailable_note).
See docs/telemetry.md.
"""

from mlcheck.judging.rank_lists import rank_list
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


def problems(run, low_power_fraction):
    """One line per GPU below `low_power_fraction` of the median power (0: rule off) and per
    GPU the tool reported throttled."""
    found = []
    facts = figures.telemetry_facts(run)
    if low_power_fraction:
        low, median = figures.low_power(run, low_power_fraction)
        packages = any(f.get('power_note') for f in facts.values())
        unit = 'package' if packages else 'GPU'
        for rank, watts in low:
            found.append(f'{_where(run, rank)} drew {watts:.0f} W, {watts / median:.2f} of the '
                         f'median {unit} ({median:.0f} W; limit {low_power_fraction:g})'
                         f'{_detail(facts[rank])}')
    for rank, fact in sorted(facts.items()):
        if fact.get('throttle'):
            found.append(f'{_where(run, rank)} was throttled: {fact["throttle"]}{_detail(fact)}')
    return found


def throttle_note(run):
    """One line on the ranks whose GPU was read but whose throttling could not be, and why, or None:
    a throttled GPU there would pass unnamed, so it is said, never failed."""
    reasons = {}
    for rank, fact in sorted(figures.telemetry_facts(run).items()):
        if fact.get('throttle_not_checked'):
            reasons.setdefault(fact['throttle_not_checked'], []).append(rank)
    if not reasons:
        return None
    return 'throttling not checked (' + '; '.join(f'{rank_list(ranks)}: {reason}'
                                                  for reason, ranks in reasons.items()) + ')'


def unavailable_note(run, stand_in=False):
    """One line on the ranks that could not read their GPU, and why, or None: said, never failed."""
    reasons = {}
    for rank, fact in sorted(figures.telemetry_facts(run).items()):
        if fact.get('gpu_telemetry_unavailable'):
            reasons.setdefault(fact['gpu_telemetry_unavailable'], []).append(rank)
    if not reasons:
        return None
    why = '; '.join(f'{rank_list(ranks)}: {reason}' for reason, ranks in reasons.items())
    where = ' on stand-in GPUs (the ranks train on CPUs)' if stand_in else ''
    return f'GPU telemetry not available{where} ({why}); peak host memory is still reported'
