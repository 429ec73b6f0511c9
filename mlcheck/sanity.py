"""Sanity rules for a distributed training run, as plain functions over its parsed output.

Each rule returns a list of one-line problems; an empty list from all of them means the run
is sane. The ReFrame checks call `problems()`; the unit tests feed it saved outputs.
"""

import math
import re
from dataclasses import dataclass

from mlcheck.topology import mask_to_cores


@dataclass(frozen=True)
class Expectations:
    num_nodes: int
    tasks_per_node: int
    masks: tuple                 # masks[local_rank]: the CPU mask the launcher was asked for
    min_accuracy: float = None   # None: the program reports no accuracy
    gpus: bool = False           # each rank must see exactly one GPU
    net_plugin: object = None    # mlcheck.site.NetPlugin, when the partition declares one
    epochs: int = None           # every rank reports every epoch 1..epochs, with samples
    loss_must_fall: bool = False # the loss stays finite and is lower in the last epoch

    @property
    def world_size(self):
        return self.num_nodes * self.tasks_per_node

    @classmethod
    def for_run(cls, settings, layout, **training):
        """Expectations of a run launched with `layout` on the partition of `settings`;
        `training` sets what the training program promises (min_accuracy, epochs, ...)."""
        return cls(num_nodes=layout.num_nodes, tasks_per_node=layout.tasks_per_node,
                   masks=layout.masks, gpus=settings.has_gpus, net_plugin=settings.net_plugin,
                   **training)


def problems(run, expect):
    """Everything wrong with `run` (an mlcheck.output.RunOutput) against `expect`."""
    found = [f'unreadable fact line: {line.strip()[:120]}' for line in run.malformed]
    for rule in (ranks_started_and_finished, rank_placement, cpu_affinity, one_gpu_per_rank,
                 accuracy, epochs_from_every_rank, loss_falls, network_plugin):
        found += rule(run, expect)
    return found


def ranks_started_and_finished(run, expect):
    found = []
    expected = set(range(expect.world_size))
    started = run.by_rank('rank')
    if set(started) != expected:
        missing, extra = expected - set(started), set(started) - expected
        if missing:
            found.append(f'{rank_list(missing)} never reported in (no rank line)')
        if extra:
            found.append(f'unexpected {rank_list(extra)} for a world of {expect.world_size}')
    for rank, fact in sorted(started.items()):
        if fact.get('world_size') != expect.world_size:
            found.append(f'rank {rank} ran in a world of {fact.get("world_size")}, '
                         f'launched {expect.world_size}')
            break
        if fact.get('task', rank) != rank:
            found.append(f'task {fact["task"]} reported rank {rank}: RANK is not SLURM_PROCID')
    unfinished = expected - set(run.by_rank('done'))
    if unfinished:
        found.append(f'{rank_list(unfinished)} did not finish')
    return found


def rank_placement(run, expect):
    """Ranks spread over the requested nodes, tasks_per_node on each."""
    per_node = {}
    for fact in run.by_rank('rank').values():
        per_node.setdefault(fact.get('node'), []).append(fact['rank'])
    if not per_node:
        return []
    found = []
    if len(per_node) != expect.num_nodes:
        found.append(f'ranks ran on {len(per_node)} node(s) ({", ".join(map(str, sorted(per_node)))}), '
                     f'expected {expect.num_nodes}')
    for node, ranks in sorted(per_node.items()):
        if len(ranks) > expect.tasks_per_node:
            found.append(f'node {node} ran {len(ranks)} ranks, expected {expect.tasks_per_node}')
    return found


def cpu_affinity(run, expect):
    found = []
    for rank, fact in sorted(run.by_rank('rank').items()):
        local = fact.get('local_rank')
        if not isinstance(local, int) or not 0 <= local < len(expect.masks):
            found.append(f'rank {rank} has local rank {local!r}, outside 0-{len(expect.masks) - 1}')
            continue
        want = mask_to_cores(expect.masks[local])
        if fact.get('affinity') != want:
            found.append(f'rank {rank} (local rank {local} on {fact.get("node")}) runs on cores '
                         f'{fact.get("affinity")}, expected {want} (mask {expect.masks[local]})')
    return found


def one_gpu_per_rank(run, expect):
    if not expect.gpus:
        return []
    found = []
    for rank, fact in sorted(run.by_rank('rank').items()):
        if not str(fact.get('device', '')).startswith('cuda') or fact.get('visible_devices') != 1:
            found.append(f'rank {rank} uses device {fact.get("device")!r} and sees '
                         f'{fact.get("visible_devices")} GPU(s); expected exactly one GPU')
    return found


def accuracy(run, expect):
    if expect.min_accuracy is None:
        return []
    result = run.result()
    if result is None or not isinstance(result.get('test_accuracy'), (int, float)):
        return ['no test accuracy reported (no result line)']
    if not result['test_accuracy'] >= expect.min_accuracy:
        return [f'test accuracy {result["test_accuracy"]:.4f} is below {expect.min_accuracy:.4f}']
    return []


def epochs_from_every_rank(run, expect):
    """Every rank trained and timed every epoch: throughput comes from all of them."""
    if expect.epochs is None:
        return []
    found = []
    wanted = set(range(1, expect.epochs + 1))
    for rank in range(expect.world_size):
        facts = [f for f in run.events('epoch') if f.get('rank') == rank]
        seen = {f.get('epoch') for f in facts if f.get('samples', 0) > 0 and f.get('seconds', 0) > 0}
        if seen != wanted:
            found.append(f'rank {rank} reported throughput for epochs {sorted(seen, key=str)}, '
                         f'expected 1-{expect.epochs}')
    return found


def loss_falls(run, expect):
    if not expect.loss_must_fall:
        return []
    summaries = sorted(run.events('summary'), key=lambda s: s.get('epoch', 0))
    if not summaries:
        return ['no epoch summaries (no loss to check)']
    bad = [s['epoch'] for s in summaries if not isinstance(s.get('loss'), (int, float))
           or not math.isfinite(s['loss'])]
    if bad:
        return [f'loss is not finite in epoch(s) {", ".join(map(str, bad))}']
    first, last = summaries[0], summaries[-1]
    if len(summaries) > 1 and not last['loss'] < first['loss']:
        return [f'loss did not fall: {first["loss"]:.4f} in epoch {first["epoch"]}, '
                f'{last["loss"]:.4f} in epoch {last["epoch"]}']
    return []


def network_plugin(run, expect):
    """Every rank loaded the plugin, selected the expected provider, and never fell back to sockets."""
    plugin = expect.net_plugin
    if plugin is None:
        return []
    used, provider, fallback = (re.compile(p) for p in (
        plugin.used_pattern, plugin.provider_pattern, plugin.fallback_pattern))
    not_loaded, wrong, fell_back = [], {}, []
    for rank in range(expect.world_size):
        lines = run.lines.get(rank, [])
        if not any(used.search(line) for line in lines):
            not_loaded.append(rank)
        providers = {m.group('provider') for m in map(provider.search, lines) if m}
        if providers != {plugin.provider}:
            wrong[rank] = sorted(providers)
        if any(fallback.search(line) for line in lines):
            fell_back.append(rank)

    found = []
    if not_loaded:
        found.append(f'network plugin not loaded on {rank_list(not_loaded)} '
                     f'(no line matches {plugin.used_pattern!r})')
    if wrong:
        seen = sorted({p for ps in wrong.values() for p in ps})
        found.append(f'libfabric provider is {", ".join(seen) or "never named"} on '
                     f'{rank_list(wrong)}, expected {plugin.provider!r}')
    if fell_back:
        found.append(f'NCCL fell back to sockets on {rank_list(fell_back)} '
                     f'(a line matches {plugin.fallback_pattern!r})')
    return found


def rank_list(ranks):
    """'rank 3' or 'ranks 0-3, 6' for messages."""
    ranks = sorted(ranks)
    spans, start = [], None
    for i, rank in enumerate(ranks):
        if start is None:
            start = rank
        if i + 1 == len(ranks) or ranks[i + 1] != rank + 1:
            spans.append(str(start) if start == rank else f'{start}-{rank}')
            start = None
    return ('rank ' if len(ranks) == 1 else 'ranks ') + ', '.join(spans)
