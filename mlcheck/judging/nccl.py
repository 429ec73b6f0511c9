"""What NCCL/RCCL's INFO lines say about each rank: the network its communicators used, and how
far the set-up of a communicator got before a run broke off.

The wordings of the network plugin and of NCCL's fallback change between versions; the site
declares them (mlcheck.site.network.NetPlugin). Every communicator a rank creates ends its network
set-up with `Using network <name>` (AWS Libfabric, Libfabric, OFI, Socket, IB): that line is what
the rank really used, whatever the plugin printed before it. NCCL's fallback wording explains only
a rank that ended on another network than expected (where the site expects none: a rank none of
whose communicators used anything but NCCL's sockets).
"""

import re

from mlcheck.judging.rank_lists import rank_list

# The steps of a communicator's set-up, in order, as NCCL prints them at NCCL_DEBUG=INFO.
SETUP_STEPS = [
    ('Bootstrap', re.compile(r'NCCL INFO Bootstrap')),
    ('Using network', re.compile(r'NCCL INFO Using network')),
    ('Connected all rings', re.compile(r'NCCL INFO Connected all rings')),
    ('Connected all trees', re.compile(r'NCCL INFO Connected all trees')),
    ('Init COMPLETE', re.compile(r'NCCL INFO .*Init COMPLETE')),
]
SOCKETS = 'Socket'   # NCCL's internal network over TCP: what a rank without the plugin ends on


def network_problems(lines_of, world_size, plugin):
    """One-line problems with the network of ranks 0..world_size-1; `lines_of(rank)` gives a
    rank's output lines, `plugin` is a mlcheck.site.network.NetPlugin."""
    used, provider, fallback, network = (re.compile(p) if p else None for p in (
        plugin.used_pattern, plugin.provider_pattern, plugin.fallback_pattern, plugin.network_pattern))
    expected_network = re.compile(plugin.network) if plugin.network else None
    not_loaded, wrong_provider, no_network, wrong_network = [], {}, [], {}
    fell_back = {}

    def fallback_wording(lines):
        # Searched for only where it explains a problem: the fallback patterns start with no
        # fixed text, so searching them costs a rank's every line a scan of its every position.
        return next((m.group(0) for m in map(fallback.search, lines) if m), None) if fallback else None

    for rank in range(world_size):
        lines = lines_of(rank)
        if not any(map(used.search, lines)):
            not_loaded.append(rank)
        providers = {m.group('provider') for m in map(provider.search, lines) if m}
        if providers != {plugin.provider}:
            wrong_provider[rank] = sorted(providers)
        networks = [m.group('network').strip() for m in map(network.search, lines) if m] if network else []
        if network and expected_network:
            wrong = sorted({n for n in networks if not expected_network.fullmatch(n)})
            if not networks:
                no_network.append(rank)
            elif wrong:
                wrong_network[rank] = wrong
        # a fallback line before the plugin loads is harmless (NCCL may look for a plugin under
        # several names first): it explains only a rank that ended on another network
        explains = wrong_network.get(rank) if network and expected_network else \
            not any(name != SOCKETS for name in networks)
        if explains and (wording := fallback_wording(lines)):
            fell_back[rank] = wording

    found = []
    if not_loaded:
        found.append(f'network plugin not loaded on {rank_list(not_loaded)} '
                     f'(no line matches {plugin.used_pattern!r})')
    if wrong_provider:
        seen = sorted({p for ps in wrong_provider.values() for p in ps})
        found.append(f'libfabric provider is {", ".join(seen) or "never named"} on '
                     f'{rank_list(wrong_provider)}, expected {plugin.provider!r}')
    if no_network:
        found.append(f'{rank_list(no_network)} never said which network its communicators used '
                     f'(no line matches {plugin.network_pattern!r})')
    for name, ranks in group(wrong_network).items():
        found.append(f'communicators of {rank_list(ranks)} used network {name}, expected '
                     f'{plugin.network!r}')
    for wording, ranks in group(fell_back).items():
        found.append(f'NCCL fell back to its internal network on {rank_list(ranks)} ({wording!r})')
    return found


def group(by_rank):
    """{value: [ranks]} from {rank: value}; a list value is joined with commas."""
    grouped = {}
    for rank, value in sorted(by_rank.items()):
        key = ', '.join(value) if isinstance(value, list) else value
        grouped.setdefault(key, []).append(rank)
    return grouped


def setup_progress(lines_of, world_size):
    """For a run that broke off: the ranks whose last NCCL set-up line is not 'Init COMPLETE',
    grouped by the last step they reached, e.g. "NCCL set-up of ranks 0-7 reached 'Connected all
    rings' but never 'Connected all trees'". Nothing for ranks that printed no set-up line."""
    last = {}
    for rank in range(world_size):
        reached = None
        for line in reversed(lines_of(rank)):    # the last set-up line says how far it got
            steps = [step for step, (_, pattern) in enumerate(SETUP_STEPS) if pattern.search(line)]
            if steps:
                reached = steps[-1]
                break
        if reached is not None and reached < len(SETUP_STEPS) - 1:
            last[rank] = reached
    found = []
    for step, ranks in sorted(group(last).items()):
        found.append(f'NCCL set-up of {rank_list(ranks)} reached {SETUP_STEPS[step][0]!r} but never '
                     f'{SETUP_STEPS[step + 1][0]!r}')
    return found
