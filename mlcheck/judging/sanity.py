"""Sanity rules for a distributed training run, as plain functions over its parsed output.

Each rule returns a list of one-line problems; an empty list from all of them means the run
is sane. The ReFrame checks call `problems()`; the unit tests feed it saved outputs.

A run that broke off is explained first, from what every training script leaves behind: the
ranks' exceptions in the job's stderr (labelled with the task by srun), srun's and slurmstepd's
own messages, and the facts `rendezvous` (a rank arrived at the rendezvous), `rank` (it joined),
`epoch` and `done` (see src/pytorch/ddp_common.py). See docs/faults.md.
"""

import math
from dataclasses import dataclass

from mlcheck.contract import spans
from mlcheck.judging import failures, locality, nccl, output
from mlcheck.judging.peers import below_peers
from mlcheck.judging.rank_lists import RANKS, group_by_node, rank_list
from mlcheck.judging.sentences import NODE, Sentence
from mlcheck.figures import rank_speed
from mlcheck.placement.topology import mask_to_cores


# read back from a stored failure by the node sweep, which drains the ranks' nodes (mlcheck-nodes)
NEVER_REPORTED = Sentence('{ranks} never reported in (no rank line)', ranks=RANKS)


@dataclass(frozen=True)
class Expectations:
    num_nodes: int
    tasks_per_node: int
    masks: tuple                 # masks[local_rank]: the CPU mask the launcher was asked for
    min_accuracy: float = None   # None: the program reports no accuracy
    gpus: bool = False           # each rank must see exactly gpus_per_rank GPUs
    net_plugin: object = None    # mlcheck.site.network.NetPlugin, when the partition declares one
    epochs: int = None           # every rank reports every epoch 1..epochs, with samples
    loss_must_fall: bool = False # the loss stays finite and is lower in the last epoch
    fault: str = ''              # a fault injected on purpose (-S fault=...)
    gpus_of_tasks: tuple = ()    # gpus_of_tasks[local_rank]: the GPU the binding meant for it
    slow_rank_fraction: float = None  # every rank times itself alone, none below this fraction
                                      # of the upper quartile (None: the program has no solo phase)
    gpus_per_rank: int = 1       # >1: one process drives several GPUs (DataParallel)

    @property
    def world_size(self):
        return self.num_nodes * self.tasks_per_node

    @classmethod
    def for_run(cls, settings, layout, **training):
        """Expectations of a run launched with `layout` on the partition of `settings`;
        `training` sets what the training program promises (min_accuracy, epochs, ...)."""
        return cls(num_nodes=layout.num_nodes, tasks_per_node=layout.tasks_per_node,
                   masks=layout.masks, gpus=settings.has_gpus, net_plugin=settings.net_plugin,
                   gpus_of_tasks=layout.gpus, gpus_per_rank=layout.gpus_per_task, **training)


@output.cyclic_gc_paused()
def problems(run, expect):
    """Everything wrong with `run` (an mlcheck.judging.output.RunOutput) against `expect`.

    When the run broke off, only why it did: the rules for a complete run would add nothing
    but consequences (ranks that did not finish, no result).
    """
    found = [f'unreadable fact line: {line.strip()[:120]}' for line in run.malformed]
    found += fault_injected(run, expect)
    why = failures.why_it_broke_off(run, expect)
    if why:
        return why + nccl.setup_progress(lambda rank: run.lines.get(rank, []), expect.world_size) + found
    for rule in (ranks_started_and_finished, rank_placement, cpu_affinity, one_gpu_per_rank,
                 accuracy, epochs_from_every_rank, loss_falls, network_plugin, slow_ranks,
                 locality.cores_local_to_gpu, locality.gpus_given_by_slurm):
        found += rule(run, expect)
    return found


def fault_injected(run, expect):
    """A fault asked for was injected: else the script ignored it and the run proves nothing."""
    if expect.fault and not run.events('fault'):
        return [f'fault {expect.fault!r} was asked for, but no rank injected it '
                f'(does the training script read MLCHECK_FAULT?)']
    return []


def ranks_started_and_finished(run, expect):
    found = []
    expected = set(range(expect.world_size))
    started = run.by_rank('rank')
    if set(started) != expected:
        missing, extra = expected - set(started), set(started) - expected
        if missing:
            found.append(NEVER_REPORTED.write(ranks=rank_list(missing)))
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


# The placement promises' sentences: the report's likely cause reads them back from a failed
# run's record as the binding (mlcheck.history.causes, through placement_said); tests/test_causes.py
# runs each writer through that reader.
RANKS_ON_NODES = Sentence('ranks ran on {count} node(s) ({nodes}), expected {expected}')
RANKS_ON_NODE = Sentence('node {node} ran {count} ranks, expected {expected}', node=NODE)
LOCAL_RANK_OUTSIDE = Sentence('rank {rank} has local rank {local}, outside 0-{last}')
OTHER_CORES = Sentence('rank {rank} (local rank {local} on {node}) runs on cores {cores}, '
                       'expected {expected} (mask {mask})', node=NODE)
NOT_ONE_GPU = Sentence('rank {rank} uses device {device} and sees {seen} GPU(s); expected exactly {want}')
PLACEMENT = (RANKS_ON_NODES, RANKS_ON_NODE, LOCAL_RANK_OUTSIDE, OTHER_CORES, NOT_ONE_GPU)


def placement_said(text):
    """Whether a stored failure's `text` holds one of the placement promises' sentences."""
    return any(sentence.find(text) for sentence in PLACEMENT)


def rank_placement(run, expect):
    """Ranks spread over the requested nodes, tasks_per_node on each."""
    per_node = {}
    for fact in run.by_rank('rank').values():
        per_node.setdefault(fact.get('node'), []).append(fact['rank'])
    if not per_node:
        return []
    found = []
    if len(per_node) != expect.num_nodes:
        found.append(RANKS_ON_NODES.write(count=len(per_node), nodes=", ".join(map(str, sorted(per_node))),
                                          expected=expect.num_nodes))
    for node, ranks in sorted(per_node.items()):
        if len(ranks) > expect.tasks_per_node:
            found.append(RANKS_ON_NODE.write(node=node, count=len(ranks), expected=expect.tasks_per_node))
    return found


def cpu_affinity(run, expect):
    found = []
    wanted = [mask_to_cores(mask) for mask in expect.masks]   # per local rank, not per rank
    for rank, fact in sorted(run.by_rank('rank').items()):
        local = fact.get('local_rank')
        if not isinstance(local, int) or not 0 <= local < len(expect.masks):
            found.append(LOCAL_RANK_OUTSIDE.write(rank=rank, local=repr(local), last=len(expect.masks) - 1))
            continue
        want = wanted[local]
        if fact.get('affinity') != want:
            found.append(OTHER_CORES.write(rank=rank, local=local, node=fact.get('node'), cores=fact.get('affinity'),
                                           expected=want, mask=expect.masks[local]))
    return found


def one_gpu_per_rank(run, expect):
    if not expect.gpus:
        return []
    found = []
    for rank, fact in sorted(run.by_rank('rank').items()):
        if not str(fact.get('device', '')).startswith('cuda') or \
                fact.get('visible_devices') != expect.gpus_per_rank:
            want = 'one GPU' if expect.gpus_per_rank == 1 else f'{expect.gpus_per_rank} GPUs'
            found.append(NOT_ONE_GPU.write(rank=rank, device=repr(fact.get('device')),
                                           seen=fact.get('visible_devices'), want=want))
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
        facts = run.rank_events('epoch', rank)
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
    """Every rank loaded the plugin, selected the expected provider, and its communicators used
    the expected network (mlcheck.judging.nccl), on as many nodes as the plugin must be in use."""
    if expect.net_plugin is None or expect.num_nodes < expect.net_plugin.from_nodes:
        return []
    return nccl.network_problems(lambda rank: run.lines.get(rank, []), expect.world_size,
                                 expect.net_plugin)


def slow_ranks(run, expect):
    """Every rank reported its solo throughput, and none is below slow_rank_fraction of the
    ranks' upper quartile (the one peer rule, mlcheck.judging.peers): one line per slow rank, or per
    node where several of its ranks are slow. When every rank is equally slow, none is: that is a
    regression, not an outlier."""
    if expect.slow_rank_fraction is None:
        return []
    found = []
    speeds = rank_speed.solo_speeds(run)
    missing = set(range(expect.world_size)) - set(speeds)
    if missing:
        found.append(f'{rank_list(missing)} reported no solo throughput (no solo line)')
    verdict = below_peers(speeds, 1 - expect.slow_rank_fraction)
    slow, reference = verdict.named, verdict.reference
    placed = run.by_rank('rank')
    device = 'GPU' if expect.gpus else 'local rank'
    limit = f'(limit {expect.slow_rank_fraction:g})'
    for node, members in group_by_node(run, slow).items():
        node = node if isinstance(node, str) else None
        ranks = [rank for rank, _ in members]
        speeds = [speed for _, speed in members]
        locals_ = [placed.get(rank, {}).get('local_rank') for rank in ranks]
        locals_ = ', '.join(spans(locals_)) if None not in locals_ else '?'
        where = f' on {node}' if node else ''
        if len(members) == 1:
            found.append(f'{rank_list(ranks)}{where} ({device} {locals_}) trained alone at '
                         f'{speeds[0] / reference:.2f} of the upper-quartile rank: {speeds[0]:.4g} '
                         f'samples/s, upper quartile {reference:.4g} {limit}')
        else:
            low, high = min(speeds), max(speeds)
            found.append(f'node {node} is slow: {rank_list(ranks)} ({device}s {locals_}) trained alone '
                         f'at {low / reference:.2f}-{high / reference:.2f} of the upper-quartile '
                         f'rank: {low:.4g}-{high:.4g} samples/s, upper quartile {reference:.4g} {limit}')
    return found
