"""Which layer broke, by elimination: from the judged comparisons of an upgrade, the candidates
(each node that ran a worse job, a GPU of it, its link, the fabric, the host stack, each image,
the data path, the binding) that the measured cells leave standing, rendered as one line:
`likely cause: <it>` where one is left, `cannot tell: A or B` and the run that would separate
them where several are, the smallest pair where no single one explains the cells.
docs/performance-history.md states the rule.

The cells (what the runs say, against the noise) are mlcheck.history.cells; the candidates, what
each predicts of the cells and which stand, mlcheck.history.candidates.
"""

import dataclasses
import functools
import math
import re
import shlex
import statistics
from dataclasses import dataclass

from mlcheck.figures import stack
from mlcheck.errors import InputError
from mlcheck.figures.directions import LOWER, better
from mlcheck.history import compare, hostlist, node_contrast, node_names
from mlcheck.history.candidates import (COMMUNICATION_OF, MEMORY_OF, Evidence, fabric_from, fabric_size, leaning,
                                        network_layer)
from mlcheck.history.recorded_defaults import RECORDED_DEFAULTS
from mlcheck.history.cells import (BEYOND_IMAGE, FAILED, INTERCONNECT, LOADER, LOADER_VAR, MEMORY, RANK, RANK_VAR,
                                   SPEED, Z, beyond_image_pooled, cells_of, images_of)
from mlcheck.history.runs import runs_of
from mlcheck.history.samples import group, listed
from mlcheck.judging.sanity import placement_said


@dataclass(frozen=True)
class Verdict:
    """What the report says first: kind 'cause' (one candidate, or a pair: the second beyond the
    first), 'cannot tell' (hypotheses: tuples of candidates) or 'binding' (failed placement)."""
    kind: str
    hypotheses: tuple
    evidence: str
    separating: str = ''
    likeliest: str = ''     # where none is clear, the candidate the losses together point to

    @property
    def layer(self):
        return _name(self.hypotheses[0]) if self.kind != 'cannot tell' else 'cannot tell'

    @property
    def named(self):
        """Every candidate the line lists."""
        return {c for h in self.hypotheses for c in h}

    def line(self):
        if self.kind != 'cannot tell':
            return f'likely cause: {self.layer}: {self.evidence}'
        singles = [h for h in self.hypotheses if len(h) == 1]
        if len(singles) == 1 and len(self.hypotheses) > 1 and TRANSIENT not in singles[0]:
            # one cause left: it is named, and the pairs a second cause hidden in cells too
            # near the noise would make are said, not counted
            return (f'likely cause: {_name(singles[0])}, though a second cause beside it is not cleared: '
                    f'{self.evidence}' + (f'; to clear it: {self.separating}' if self.separating else '')
                    + f'\n  or two causes at once: {_pairs_said([h for h in self.hypotheses if len(h) > 1])}')
        if self.likeliest:
            rest, pairs = _listed_hypotheses([h for h in self.hypotheses if h != (self.likeliest,)])
            return (f'likely cause: cannot tell, most likely {self.likeliest}: {self.evidence}'
                    + (f'; to tell: {self.separating}' if self.separating else '')
                    + (f'\n  not cleared beside it: {rest}' if rest else '')
                    + (f'\n  or two causes at once: {pairs}' if pairs else ''))
        listed, pairs = _listed_hypotheses(self.hypotheses)
        if not listed and pairs:
            # no one cause fits, pairs do: they are the line's candidates, said first
            listed, pairs = f'two causes at once: {pairs}', ''
        return (f'likely cause: cannot tell: {listed or "no one cause nor pair of causes fits"}: '
                f'{self.evidence}'
                + (f'; to separate them: {self.separating}' if self.separating else
                   '; no run of these checks on these nodes separates them')
                + (f'\n  or two causes at once: {pairs}' if pairs else ''))


LISTED = 4     # more candidates than this are listed grouped, by node and by image


def _listed_hypotheses(hypotheses):
    """(the candidates as one phrase, the pairs as another or ''): a short list as it is, 'A or
    B'; a long one with each image and node said once ('one of host stack, image A/B,
    nid001/nid003 (the node, a GPU of it or its link)') and its pairs apart, for the next line."""
    if sum(map(len, hypotheses)) <= LISTED and any(len(h) == 1 for h in hypotheses):
        return ' or '.join(_name(h) for h in hypotheses), ''
    singles = [h[0] for h in hypotheses if len(h) == 1]
    return ('one of ' + _grouped(singles)) if singles else '', _pairs_said([h for h in hypotheses if len(h) > 1])


PAIRS_SAID = 6      # the second causes said of one first cause, then counted


def _pairs_said(pairs):
    """The pairs, each first cause once: 'host stack, and beyond it node nid010 or the link of
    nid010; image A, and beyond it ...' (the broader cause first)."""
    said = []
    for first, of in group(pairs, lambda h: h[0]).items():
        seconds = list(dict.fromkeys(h[1] for h in of))
        more = len(seconds) - PAIRS_SAID
        seconds = seconds[:PAIRS_SAID] + ([f'{more} more'] if more > 0 else [])
        third = ', or a third cause' if any(len(h) > 2 for h in of) else ''
        said.append(f'{first}, and beyond it {" or ".join(seconds)}{third}')
    return '; '.join(said)


def _grouped(names):
    """'host stack, image A/B, the network layer of image A, nid001/nid002 (the node, a GPU of
    it or its link)'."""
    kinds = {'node ': 'the node', 'a GPU of ': 'a GPU of it', 'the link of ': 'its link'}
    words, images, layers, memories, nodes = [], [], [], [], {}
    for name in names:
        kind = next((k for k in kinds if name.startswith(k)), None)
        if kind:
            nodes.setdefault(name[len(kind):], []).append(kinds[kind])
        elif name.endswith(NETWORK):
            layers.append(name[len('image '):-len(NETWORK)])
        elif name.startswith('image ') and name.endswith(MEMORY_OF):
            memories.append(name[len('image '):-len(MEMORY_OF)])
        elif name.startswith('image '):
            images.append(name[len('image '):])
        else:
            words.append(name)
    words += [f'image {"/".join(images)}'] if images else []
    words += [f'the network layer of image {"/".join(layers)}'] if layers else []
    words += [f'the memory of image {"/".join(memories)}'] if memories else []
    for said in dict.fromkeys(tuple(k) for k in nodes.values()):
        named = "/".join(n for n, k in nodes.items() if tuple(k) == said)
        words.append(f'{named} ({_either(list(said))})' if said != ('the node',) else f'node {named}')
    return ', '.join(words)


def _either(parts):
    return parts[0] if len(parts) == 1 else ', '.join(parts[:-1]) + ' or ' + parts[-1]


def _name(hypothesis):
    return hypothesis[0] if len(hypothesis) == 1 else f'{hypothesis[0]}, and {hypothesis[1]} beyond it'


def likely_causes(comparisons, before=(), after=(), rule=compare.Rule(), slurm_partitions=(), sizes=None):
    """[Verdict] of judged comparisons (mlcheck.history.compare.compare); `before` and `after`
    are their samples, failed ones included: their node lists, software stacks and, where the
    record keeps it (the results database, not a perf log), why a test failed. `sizes`: {ReFrame's
    system:partition: the nodes the site config says it has at least (its max_nodes)}."""
    found = []
    several = len({c.key[0] for c in comparisons}) > 1
    # the records' partition names and the site's Slurm partitions, which Slurm may read as all
    # of a partition's nodes: a node named like one never reaches a separating command's
    # -J exclude= (node_names.refusal; issue 48's security red-team, U4: `sim`, the Slurm
    # partition of config/simulated.py's access, did)
    partitions = {p.rpartition(':')[2] for p in {c.key[0] for c in comparisons}
                  | {s.partition for s in (*before, *after)}} | set(slurm_partitions)
    for partition, judged in sorted(group(comparisons, lambda c: c.key[0]).items()):
        side = lambda samples: [s for s in samples if s.partition == partition]
        for v in _of_partition(judged, side(before), side(after), rule, partitions, (sizes or {}).get(partition)):
            found.append(dataclasses.replace(v, evidence=(f'on {partition}: ' if several else '') + v.evidence))
    return found


def _of_partition(judged, before, after, rule, partitions=(), size=None):
    found = []
    # the runs, where some failed (most reports have none to locate)
    runs = runs_of(after, 'after') if any(s.value is None for s in after) else []
    failed = [r for r in runs if r.failed]
    located = _located(failed, runs, partitions, size) if failed else None
    if located:
        found.append(located)
        # the failures are accounted for: the runs that passed say whether anything got slower
        after = [s for s in after if s.value is not None]
    rest = judged
    if failed and not located and all(placement_said(r.reason) for r in failed):
        binding = sorted({r.test for r in failed})
        found.append(Verdict('binding', (('binding',),), f'{_count(binding, "test")} failed the '
                             f'placement sanity, on no one node ({listed(binding)})'))
        rest = [c for c in judged if c.key[1] not in binding]
        after = [s for s in after if s.value is not None]
    cells = cells_of(rest, after, rule)
    # nothing clearly worse on its nodes, and yet a figure fails the gate: a loss too near the
    # noise to single out a cause, not "nothing got slower"
    if not any(c.status == 'worse' for c in local(cells)) and not any(
            c.verdict in compare.FAILING and c.key in {s.key for s in after} for c in rest):
        # no cell nor row sees it; a node's runs over many tests may (a busy partition's)
        return found + _slow_nodes(before, after, rule, partitions, size)
    if not any(c.status == 'worse' for c in local(cells)):
        far = scattered(rest, after, rule, compare.FAILING)
        failing = {c.key[1] for c in rest if c.verdict in compare.FAILING and c.key in {s.key for s in after}}
        if far and failing == {c.key[1] for c, _, _ in far}:
            c = far[0][0]
            image = f'image {c.image}'
            return found + [Verdict('cannot tell', ((TRANSIENT,), (image,)), far_said(far), _command(
                [('-n', c.key[1].split()[0])], c.image, c.num_nodes, ['--repeat', str(REPEAT)],
                'that test again: interference seldom strikes as often twice'))]
    # a loss that repeats over an image's tests, each too near its noise: for the diagnosis only,
    # never the gate (a figure fails it, or a cell is clearly worse, before this is asked)
    return found + [diagnose(cells + beyond_image_pooled(local(cells), rule), _stack_changes(before, after), partitions,
                             size)]


def local(cells):
    """The cells but those of a test over all its runs (cells._test_wide): evidence for the
    candidates, never a finding of their own."""
    return [c for c in cells if not c.whole]


def _slow_nodes(before, after, rule, partitions=(), size=None):
    """[Verdict] naming each slow node of one partition's samples (node_contrast.slow_nodes, at
    its LEVEL_SHARE of the rule's false alarm): `cannot tell: node X or a GPU of X` where its runs
    within one node lost too (no link slows those), with the run that tells them apart (a
    training check on X alone: a GPU of X lowers its slowest rank's fraction, a whole node does
    not); else `cannot tell: the link of X or node X or a GPU of X` and the interconnect between
    X and a node not named (its link slows it, the others do not)."""
    found = []
    for slow in node_contrast.slow_nodes(before, after, rule.threshold,
                                         node_contrast.LEVEL_SHARE * rule.false_alarm):
        node = slow.nodes[0]
        within, lost = node_contrast.within_loss(before, after, node) if len(slow.nodes) == 1 else (0, None)
        said = (f'the {slow.runs} {slow.kind} after that used {"/".join(slow.nodes)} were '
                f'{100 * slow.beyond_others:.0f} % slower than the same tests\' runs on other nodes '
                f'({slow.others} runs) and {100 * slow.loss:.0f} % slower than its {slow.runs_before} such runs '
                f'before ({slow.slower} of {slow.runs} by more than {100 * rule.threshold:g} %; rank tests: p '
                f'{slow.p:.1g} and {slow.p_before:.1g}); no one test\'s rows see it beyond their noise')
        runs = runs_of(after, 'after')
        kinds = ('node ', 'a GPU of ') if lost is not None and lost > rule.threshold else (
            'the link of ', 'node ', 'a GPU of ')
        hypotheses = tuple((f'{kind}{n}',) for n in slow.nodes for kind in kinds)
        if 'the link of ' in kinds:
            separates = separating(hypotheses, [], runs, partitions, size)
        else:
            said += f'; its {within} runs within one node lost {100 * lost:.0f} % too, which no link slows'
            trained = [r for r in runs if node in r.nodes and not r.failed and r.test.split()[0] != INTERCONNECT]
            check = min(trained, key=lambda r: (r.num_nodes, r.test))
            refused = _refusal(node, partitions)
            separates = f'no command printed: {refused}' if refused else _pinned(
                [node], [], {h[0] for h in hypotheses}, ([('-n', check.test.split()[0])], check.image))
        found.append(Verdict('cannot tell', hypotheses, said, separates))
    return found


def scattered(judged, after, rule, verdicts):
    """[(comparison, its far runs after, the values of the others)], one per test with a figure of
    `verdicts` worse after whose runs hold a few far from the others (compare.like_runs) on
    nodes with none in common: a job beside another on their nodes (interference), or a fault
    of the image that strikes now and then; no node, link nor layer that every run goes
    through. (w9c: 2 of 5 runs 30 % slower on nid006,nid013
    and nid005,nid008, a healthy partition: `cannot tell: one of fabric, ... nid001/.../nid016
    (its link)` at 20fee69.)"""
    runs = group(after, lambda s: s.key)
    worse = [c for c in judged if c.verdict in verdicts and c.worse and c.worse > 0 and c.key in runs]
    far = {}
    for c in worse:
        values = [s.value for s in runs[c.key] if s.value is not None]
        alike = compare.like_runs(values, rule.threshold)
        slow = [s for s in runs[c.key] if s.value not in alike]
        # none set aside, or the far runs share a node: the cells' to judge
        if len(alike) < len(values) and not set.intersection(*(set(s.nodelist.split(',')) for s in slow)):
            far.setdefault(c.key[1], (c, slow, alike))
    return [far[test] for test in sorted(far)]


def far_said(far):
    """'2 of 5 runs of TEST 30 % slower than its other runs, on A and B, with no node in common:
    ...' of scattered()'s first test."""
    c, slow, alike = far[0]
    change = statistics.fmean(s.value for s in slow) / statistics.fmean(alike) - 1
    # as the share of speed lost: a time +43 % is a rate -30 %
    lost = change / (1 + change) if better(c.key[2], c.unit) == LOWER else -change
    return (f'{len(slow)} of {len(slow) + len(alike)} runs of {c.key[1]} {100 * lost:.0f} % slower than its '
            f'other runs, on {" and ".join(s.nodelist for s in slow)}, with no node in common: a job '
            f'beside another on their nodes (interference), or a fault of image {c.image} that strikes '
            'now and then' + (f'; {len(far) - 1} other test(s) alike' if len(far) > 1 else ''))


# --- failed runs, located by the runs they were -------------------------------------------------------

TRANSIENT = 'a transient'


def _located(failed, runs, partitions=(), size=None):
    """The Verdict on the failed runs after, where the candidates that would fail exactly those
    runs (a node: every run on it; the fabric: every run across nodes; an image, or its network
    layer; the host stack: every run) say where they are, or where one run alone failed (it may
    be a transient); None where no candidate accounts for exactly them (the cells then judge
    them as losses)."""
    failing = frozenset(failed)
    across = lambda r: r.num_nodes > 1
    predicted = {'host stack': lambda r: True, 'fabric': across}
    for image in sorted({r.image for r in runs}):
        predicted[f'image {image}'] = lambda r, image=image: r.image == image
        predicted[network_layer(image)] = lambda r, image=image: r.image == image and across(r)
    exact = [name for name, fails in predicted.items()
             if frozenset(r for r in runs if fails(r)) == failing]
    # a node (or its link) fails exactly the runs on it (across nodes): the runs of each node
    # gathered in one pass, not a test per node and run (runs over 100,000 nodes each, issue 48)
    on = {}
    for r in runs:
        for node in r.nodes:
            on.setdefault(node, []).append(r)
    for node in sorted(on):
        if frozenset(on[node]) == failing:
            exact.append(f'node {node}')
        if frozenset(r for r in on[node] if across(r)) == failing:
            exact.append(f'the link of {node}')
    what = _failures_said(failed)
    if len(failed) == 1:
        [run] = failed
        named = [(TRANSIENT,)] + [(n,) for n in dict.fromkeys(
            exact + [f'node {n}' for n in sorted(run.nodes)] + [f'image {run.image}'])]
        return Verdict('cannot tell', tuple(named), what,
                       _command([('-n', run.test.split()[0])], run.image, run.num_nodes, ['--repeat', '3'],
                                'the failed test again: a transient passes'))
    if failed and all(placement_said(r.reason) for r in failed) and not any(
            n.startswith(('node ', 'image ')) for n in exact):
        return None     # the placement sanity failed on no one node nor image: the binding
    if len(exact) == 1:
        [name] = exact
        if name.startswith('node '):
            where = f'every failed run used {name.split()[-1]}, and every run that used it failed'
        else:
            where = f'the failed runs are exactly those {_scope(name)}'
        elsewhere = {r.test for r in failed} & {r.test for r in runs if not r.failed}
        return Verdict('cause', ((name,),), f'{what}; {where}'
                       + ('; the same tests passed elsewhere' if elsewhere else ''))
    if not exact:
        return None
    hypotheses = tuple((n,) for n in exact)
    return Verdict('cannot tell', hypotheses, f'{what}; the failed runs fit each',
                   separating(hypotheses, [], runs, partitions, size))


def _scope(name):
    """Which runs a candidate fails, in words: 'of image X', 'across nodes'..."""
    if name.endswith(NETWORK):
        return f'of {name.removesuffix(NETWORK)} across nodes'
    if name.startswith('image '):
        return f'of {name}'
    if name.startswith('the link of '):
        return f'across nodes that used {name.split()[-1]}'
    return {'fabric': 'across nodes', 'host stack': 'of every test'}.get(name, f'of {name}')


def _failures_said(failed):
    """'12 runs failed after (5 tests; sanity: ...)', or the one run with its nodes."""
    reasons = sorted({r.reason for r in failed if r.reason})
    why = f': {reasons[0]}' + (f' and {len(reasons) - 1} other reason(s)' if len(reasons) > 1 else '') \
        if reasons else ''
    if len(failed) == 1:
        [r] = failed
        return (f'1 run failed after ({r.test}, repetition {r.repetition}, on '
                f'{",".join(sorted(r.nodes)) or "nodes not recorded"}{why})')
    return f'{len(failed)} runs failed after ({_count(sorted({r.test for r in failed}), "test")}{why})'


# --- the verdict ----------------------------------------------------------------------------------

def diagnose(cells, stacks=None, partitions=(), size=None):
    """The Verdict of one partition's cells (at least one worse); `partitions`: the records'
    partition names (no node named like one is passed on in a command); `size`: the nodes the
    site config says the partition has at least (separating)."""
    ev = Evidence.of(cells)
    left, more = ev.standing()
    stacks = {} if stacks is None else stacks
    if ('fabric',) in left and _every_image_network(stacks, cells):
        # the images' own network layer, changed alike in every one of them, slows just what the
        # fabric slows: no cell tells them apart, the stack line says it changed
        at = left.index(('fabric',)) + 1
        left = left[:at] + [(EVERY_NETWORK,)] + left[at:]
    worse = [cells[i] for i in sorted(ev.worse) if cells[i].aspect in (SPEED, RANK, LOADER, MEMORY)
             and not cells[i].whole]
    on_nodes = [cells[i] for i in sorted(ev.worse) if cells[i].pooled]
    what = '; '.join(filter(None, [_what(worse, cells) if worse else '', *map(_on_node_said, on_nodes)])) or (
        'figures fail the gate, but no test is clearly worse than its noise on the nodes its runs '
        f'used (by {Z:g} spreads): too near the noise to single out a cause')
    # a loss pooled over the tests of a node or an image is repeated, not one run alone
    alone = _one_run(worse, cells) if not on_nodes else None
    if alone:
        # one run alone lost, the test's other runs did not: a job beside another, or one bad
        # moment, reads as that run's node or image; only running it again tells
        named = ((TRANSIENT,),) + tuple(dict.fromkeys(tuple(left) + tuple(more) + tuple(
            (n,) for n in ev.reach if ev.worse <= ev.reach[n])))
        # on the same nodes: on a busy partition a repetition lands wherever nodes are free, and
        # one on other nodes passes under a slow node as under a transient
        nodes = sorted(alone.used or ())
        pinned = ['-J', f'nodelist={",".join(nodes)}'] if nodes and not any(
            node_names.refusal(n, partitions) for n in nodes) else []
        return Verdict('cannot tell', named, f'{what}; one run alone, on '
                       f'{",".join(nodes) or "nodes not recorded"}',
                       _command([('-n', alone.check)], alone.image, alone.num_nodes, ['--repeat', '3'] + pinned,
                                f'that test again{" on its nodes" if pinned else ""}: a transient passes'))
    if worse and len(left) == 1 and not more:
        return Verdict('cause', left, f'{what}; {_support(left[0], ev, stacks)}')
    hypotheses = tuple(left + more)
    if not hypotheses:
        # none fits every cell: those that explain the losses, though some cell they predict
        # worse is not (one model of an image spared, a second cause that hides the first)
        covering = tuple((n,) for n in ev.reach if ev.worse <= ev.reach[n])
        if ev.untried:
            return Verdict('cannot tell', covering, f'{what}; none of these also leaves unchanged what it '
                           f'should slow, and {ev.untried} candidates (nodes that ran differently) are '
                           'too many to try in pairs', separating(covering, cells, (), partitions, size))
        return Verdict('cannot tell', covering,
                       f'{what}; none of these also leaves unchanged what it should slow, nor does a '
                       'pair' + ('' if covering else ': more than two causes at once, or one that is '
                                 'not a candidate'), separating(covering, cells, (), partitions, size))
    if not worse and not on_nodes:
        near = _near_the_noise(ev, hypotheses, cells, what)
        if near:
            return near
    why = (f'{len(ev.unclear)} cell(s) too close to the noise to clear another cause; '
           if more else '') + ('the cells fit it' if len(left) == 1 else 'the cells fit each')
    stated = list(dict.fromkeys(part for h in left for part in
                                _stack_note(h, stacks, cells).split('; ') if part))
    # the run separates the single causes left; the pairs, a second cause hidden near the noise,
    # only where one is left ('to clear it')
    return Verdict('cannot tell', hypotheses, '; '.join([what, why] + stated),
                   separating(tuple(left) if len(left) > 1 else hypotheses, cells, (), partitions, size))


# how many spreads the losses of the tests one candidate slows, beyond the others', must stand
# out to be said the likeliest where no cell is clear (under Z, which names a cause), and the
# share of that the next candidate's may reach: the host stack, over every image, shares an
# image's loss diluted (with three images its spreads are about 0.7 of the image's), and 1 of
# 30 reports of an image 10 % slower leaned on it without this margin
LEANS_FROM, NEXT_AT_MOST = 2.5, 0.8


def _near_the_noise(ev, hypotheses, cells, what):
    """Where figures fail the gate but no cell is clearly worse (one run after a --repeat 3
    baseline): the Verdict naming the candidate that the losses together point to (leaning), by
    LEANS_FROM spreads and more than any other, and how many runs after would tell it by Z (the
    runs the baseline has stay); None where none stands out."""
    singles = [h[0] for h in hypotheses if len(h) == 1]
    found = leaning(ev, singles)
    if not found or found[0][0] < LEANS_FROM or len(found) > 1 and found[1][0] > NEXT_AT_MOST * found[0][0]:
        return None
    z, name, beyond, spread = found[0]
    runs = max((c.runs for c in ev.cells if c.aspect == SPEED and not c.whole), default=1)
    tell = next((n for n in range(runs + 1, compare.MOST_REPEATS + 1)
                 if next(iter(x for x in leaning(ev, [name], n)), (0,))[0] >= Z), None)
    said = (f'{what}; the tests {name} slows lost {100 * beyond:.0f} % beyond the others together '
            f'({z:.1f} spreads' + (f', short of the {Z:g} that name a cause)' if z < Z else
                                  ', though no one test is clear by itself)'))
    checks = [('-n', check) for check in _moved(cells, ())]
    run = _command(checks, None, None, ['--repeat', str(tell)],
                   f'{tell} runs after of the tests that moved, every image: at this spread they tell '
                   f'{name}\'s loss from the noise') if tell and checks else ''
    ordered = ((name,),) + tuple(h for h in hypotheses if h != (name,))
    return Verdict('cannot tell', ordered, said, run, likeliest=name)


def _one_run(worse, cells=()):
    """The cell of the one run that lost, where every worse cell is of that one run (one test,
    one set of nodes, one run after) and no other run repeats its loss (_repeated); else None."""
    runs = {(c.test, c.used) for c in worse}
    if len(runs) != 1:
        return None
    speed = [c for c in worse if c.aspect == SPEED] or worse
    alone = speed[0] if all(c.runs == 1 for c in worse) and speed[0].runs == 1 else None
    return None if alone is None or any(_repeated(c, cells) for c in worse) else alone


def _repeated(lone, cells, rule=compare.Rule()):
    """Whether the other runs of `lone`'s image, or those on one of its nodes, lost clearly too,
    pooled (each cell weighted by its precision) though each alone is too near its noise: a
    fault, not one run. A red-team's d31 (one run a test after, image torch-2.9.1 20 % slower:
    its six training cells 12-21 % each, one past 3.5 spreads) and d37 (nid006 power-capped 15
    %: its runs' slowest rank's fraction -15 % in seven jobs, one just past three thresholds)
    read `a transient ... one run alone`."""
    like = [c for c in cells if c.aspect == lone.aspect and c.status == 'unclear' and c.loss < FAILED
            and c.training == lone.training and c.spread > 0 and (c.test, c.used) != (lone.test, lone.used)]
    groups = [[c for c in like if c.image == lone.image]] + [
        [c for c in like if c.used and node in c.used] for node in sorted(lone.used or ())]
    for of in groups:
        if len(of) < 2:
            continue
        weights = [1 / c.spread ** 2 for c in of]
        loss = sum(w * c.loss for w, c in zip(weights, of)) / sum(weights)
        if loss > rule.threshold and loss > Z * math.sqrt(1 / sum(weights)):
            return True
    return False


def _what(worse, cells):
    tests = sorted({(c.image, c.num_nodes) for c in worse})
    images = sorted({i for i, _ in tests})
    counts = sorted({n for _, n in tests})
    failed = len({c.test for c in worse if c.loss == 1.0})
    # a memory figure's rise as itself (+30 %), not as a share of speed lost (-23 %)
    losses = [-c.loss for c in worse if c.loss < 1.0 and c.aspect != MEMORY]
    rises = [c.loss / (1 - c.loss) for c in worse if c.aspect == MEMORY and c.loss < 1.0]
    measured = ', '.join(filter(None, [_range_of(losses), f'{failed} failed' if failed else '',
                                       f'{MEMORY_FIGURE} {_range_of(rises)}' if rises else '']))
    return (f'{_count(sorted({c.test for c in worse}), "test")} worse ({measured}: '
            f'{listed(images)} at {_counts(counts)})')


MEMORY_FIGURE = 'peak memory'


def _on_node_said(cell):
    """'the runs on nid006 lost 21 % beyond the same tests' runs on other nodes (8 tests across
    nodes, 9 runs)', or 'the tests of image X across nodes lost 17 % beyond the same tests in the
    other images (4 tests, 4 runs)'."""
    if cell.aspect == BEYOND_IMAGE:
        return (f'{cell.test} lost {100 * cell.loss:.0f} % beyond the same tests in the other images '
                f'({cell.pooled} tests, {cell.runs} runs)')
    where = 'across nodes' if cell.num_nodes > 1 else 'at 1 node'
    return (f'{cell.test} lost {100 * cell.loss:.0f} % beyond the same tests\' runs on other nodes '
            f'({cell.pooled} tests {where}, {cell.runs} runs)')


def _support(hypothesis, ev, stacks):
    """What rules the others out: the cells it predicts unchanged that are, and its stack."""
    cells = ev.cells
    reach = frozenset().union(*(ev.reach[c] for c in hypothesis))
    fine = sorted({(cells[i].image, cells[i].num_nodes) for i in ev.same - reach
                   if cells[i].aspect == SPEED and cells[i].image is not None})
    parts = []
    if fine:
        parts.append(f'unchanged: {listed([f"{i} at {_counts([n])}" for i, n in fine], 6)}')
    rank = [cells[i] for i in ev.worse if cells[i].aspect == RANK]
    if rank:
        parts.append(f'{RANK_VAR} {_range_of([-c.loss for c in rank])}')
    note = _stack_note(hypothesis, stacks, cells)
    return '; '.join(parts + ([note] if note else [])) or 'no other candidate fits'


# what every image carries of its own network layer (its RCCL and RCCL's network plugin); not
# libfabric, which a site's images most often bind-mount from the host (the fabric's own)
IMAGE_NETWORK_FACTS = ('nccl', 'net_plugin')
EVERY_NETWORK = 'the network layer of every image'


def _every_image_network(stacks, cells):
    """The changes of the network layer that every image run across nodes recorded alike, where
    there are two or more (with one, `image X (its network layer)` is that candidate); else []."""
    images = images_of(cells, across=True)
    if len(images) < 2:
        return []
    return [change for change in stacks.get(images[0], []) if change[0] in IMAGE_NETWORK_FACTS
            and all(change in stacks.get(image, []) for image in images)]


def _stack_note(hypothesis, stacks, cells):
    """The recorded stack changes that fit the hypothesis: those every image shares for the host
    stack or the fabric, an image's own (less the shared ones) for an image."""
    images = images_of(cells)
    shared = [change for change in stacks.get(images[0], [])
              if all(change in stacks.get(i, []) for i in images)] if len(images) > 1 else []
    notes = []
    for name in hypothesis:
        if name.startswith('image '):
            image = name[len('image '):].removesuffix(NETWORK).removesuffix(MEMORY_OF)
            own = [c for c in stacks.get(image, []) if c not in shared]
            notes.append(f'{image}\'s stack: {stack.change_line(own)}' if own else '')
        elif name.removesuffix(MEMORY_OF).removesuffix(COMMUNICATION_OF) in ('host stack', 'fabric'):
            notes.append(f'{stack.change_line(shared)} in every image' if shared else '')
    return '; '.join(filter(None, notes))


# --- the run that separates -----------------------------------------------------------------------

RUN = 'reframe -c checks/ -r'
REPEAT = 5      # the repetitions the gate is measured at (docs/performance-history.md)


def separating(hypotheses, cells, runs=(), partitions=(), size=None):
    """The cheapest run that tells the hypotheses apart, as a command with what it runs in
    brackets: one check and image that lost (and a check whose figures moved), at the fewest
    nodes that can tell (the job size of a fabric fault that shows only there), on nodes Slurm
    can give it (the records' or, per the site config, the partition's); more repetitions only
    where a cell sits near its threshold; '' where no run of these checks on these nodes can
    separate them (the line then says why). One function, so that a site's node-name check
    (mlcheck-nodes) can wrap it. `partitions`: the records'
    partition names, which no node passed on may have; `size`: the nodes the site config says the
    partition has at least (its max_nodes), None where it does not know the partition."""
    names = {n for h in hypotheses for n in h}
    refusal = functools.partial(_refusal, partitions=partitions)
    refused = list(filter(None, map(refusal, _nodes_named(names))))
    run = _separating_run(names, cells, runs, refusal, size)
    if refused and not run:
        return f'no command printed: {"; ".join(refused)}'
    if refused and '(refused: ' not in run:
        return f'{run} (refused: {"; ".join(refused)})'
    return run


def _refusal(name, partitions=()):
    """node_names.refusal of a candidate's node, or of each node of a candidate named as a host
    list (candidates.node_groups: nodes that reach the cells alike): a name refused among them
    refuses the list."""
    if not GROUPED.search(name):
        return node_names.refusal(name, partitions)
    try:
        return next(filter(None, (node_names.refusal(n, partitions) for n in hostlist.expand(name))), '')
    except InputError as e:
        return str(e)


def _members(name):
    try:
        return hostlist.expand(name) if GROUPED.search(name) else [name]
    except InputError:
        return []


GROUPED = re.compile(r'[\[,]')     # what no one node's name holds (hostlist.checked)


def _nodes_named(names):
    """The nodes the hypotheses' `names` name (node X, a GPU of X, the link of X)."""
    return sorted({n.split()[-1] for n in names if n.startswith(NODE_KINDS)})


def _separating_run(names, cells, runs, refusal, size=None):
    """separating()'s run, for the hypotheses' `names`, no node refused by `refusal` in it;
    `size`: the nodes the site config says the partition has at least (None: not known)."""
    moved = _moved(cells, runs)
    pinned = _pinned_run(names, cells, runs, refusal, moved, size)
    if pinned is not None:
        return pinned
    if EVERY_NETWORK in names:
        # no repetition separates them: only a network layer that did not change
        return ('the interconnect check across nodes in an image whose RCCL and network plugin are as '
                'they were before the upgrade (none of these images): the fabric slows it, the images\' '
                'network layer does not')
    if len(names) > 3 and _more_repetitions(cells, moved) and _repetitions_separate(names, cells):
        # many causes left beside cells near their threshold: the noise is what to clear first
        return _more_repetitions(cells, moved)
    seen = sorted(set().union(*(c.used or () for c in cells), *(r.nodes for r in runs)))
    named = _nodes_named(names)
    members = {n for name in named for n in _members(name)}
    free = sorted(set(seen) - members)
    # a name from data that Slurm reads as many nodes (ALL, a partition's) never reaches --exclude
    refused = list(filter(None, map(refusal, named)))
    named = [n for n in named if not refusal(n)]
    # ReFrame's -J passes `exclude=...` on as `#SBATCH --exclude=...` (`-J --exclude` is refused)
    exclude = ['-J', f'exclude={",".join(named)}'] if named else []
    said = f' (refused: {"; ".join(refused)})' if refused else ''
    lost = _cheapest_lost(cells, runs)
    images = sorted(set(images_of(cells)) | {r.image for r in runs})
    counts = sorted({c.num_nodes for c in cells} | {r.num_nodes for r in runs})
    # the job size of a run across nodes: that of the fabric as only jobs that large use it, where
    # it is among the causes (a smaller job passes under it as under a node's link)
    sizes = sorted(filter(None, map(fabric_size, names)))
    across = sizes[-1] if sizes else 2
    others = functools.partial(_other_nodes, free, len(seen), len(members), size, _fixed_placement(cells))
    if named and (sizes or any(n.startswith('the link of ') for n in names)):
        caveat = others(across)
        if caveat is None:
            # no nodes but these to send between at that size: the named ones alone, smaller
            return _below_the_size(sizes, members, names, cells, runs)
        checks = _with_moved([('-n', INTERCONNECT)], moved)
        what, it = ('the interconnect', 'it') if len(checks) == 1 else ('these checks', 'them')
        layers = [n for n in sorted(names) if not n.startswith(NODE_KINDS)]
        slows = (f'{" or ".join(layers) or "another cause"} would slow {it}, {_and(named)} '
                 f'{"do" if len(named) > 1 else "does"} not')
        return _command(checks, lost[1] if len(checks) > 1 else None, across, exclude,
                        f'{what} at {across} nodes without {_and(named)}: {slows}{caveat}', said)
    if named:
        caveat = others(1)
        if caveat is None:
            return ''
        return _command(_with_moved(lost[0], moved), lost[1], 1, exclude,
                        f'the same check on other nodes{caveat}', said)
    network = [n for n in names if n.endswith(NETWORK)]
    if network:
        image = network[0][len('image '):-len(NETWORK)]
        if f'image {image}' in names:
            # the image slows its runs within one node too, its network layer only those across
            # nodes; another image across nodes passes under both (n07, the sixth red-team). Its
            # loss there was near the noise, else it had cleared the network layer: repetitions
            trained = [c for c in lost[0] if c[1] != INTERCONNECT] or \
                [('-n', check) for check in moved if check != INTERCONNECT][:1]
            if trained:
                return _command(trained, image, 1, ['--repeat', str(REPEAT)],
                                f'image {image} within one node: the image slows it, its network layer does not')
        other = next((i for i in images if i != image), 'host')
        return _command(_with_moved([('-n', INTERCONNECT)], moved), other,
                        across if sizes else min(n for n in counts if n > 1), [],
                        'another image across nodes: the fabric slows it too, the image\'s network '
                        'layer does not')
    if sizes and 'fabric' in names:
        return _command(_with_moved([('-n', INTERCONNECT)], moved), lost[1],
                        max([n for n in counts if 1 < n < sizes[0]], default=2), [],
                        f'smaller jobs across nodes: the fabric slows them, {fabric_from(sizes[0])} does not')
    if 'fabric' in names and 1 not in counts:
        return _command(_with_moved(lost[0], moved), lost[1], 1, [], 'within one node')
    if 'data path' in names:
        return _command(_with_moved([('-n', 'CIFAR100ResNetCheck')], moved), None, None, [],
                        f'it records {LOADER_VAR}')
    if any(n.startswith('image ') for n in names) and len(images) < 2:
        return _command(_with_moved(lost[0], moved), 'host', counts[0], [],
                        'the host\'s own Python beside the image')
    return _more_repetitions(cells, moved) if _repetitions_separate(names, cells) else ''


def _below_the_size(sizes, members, names, cells, runs):
    """Where the fabric as only jobs of some size use it stands beside named nodes, and the
    partition has no nodes to run that size without them: a job of the named nodes that no
    smaller job across nodes used, at a size the records hold below it (one Slurm schedules: the
    records' job sizes are real, whatever the site config's max_nodes says). Their links slow
    the interconnect, the nodes a training check; the fabric at that size neither (the sixth
    red-team's f27, f37: `no run ... separates them` under max_nodes 4). '' where none is."""
    if not sizes:
        return ''
    smallest = sizes[0]
    across = [(c.num_nodes, c.used) for c in cells if c.used] + [(r.num_nodes, frozenset(r.nodes)) for r in runs]
    cleared = set().union(*(used for n, used in across if 1 < n < smallest))
    fresh = sorted(members - cleared)
    count = max((n for n, _ in across if 2 <= n <= len(fresh) and n < smallest), default=None)
    if count is None:
        return ''
    trained = [check for check in _cheapest_lost(cells, runs)[0] if check[1] != INTERCONNECT]
    checks = [('-n', INTERCONNECT)] + trained
    chosen = fresh[:count]
    return _command(checks, _cheapest_lost(cells, runs)[1] if trained else None, count,
                    ['-J', f'nodelist={",".join(chosen)}'],
                    f'{"these checks" if trained else "the interconnect"} on {_and(chosen)} alone, below '
                    f'the {smallest}-node jobs: their links{" or the fabric" if "fabric" in names else ""} or '
                    f'the nodes slow {"them" if trained else "it"}, {fabric_from(smallest)} does not')


def _other_nodes(free, seen, named, size, fixed, needed):
    """Whether a run of `needed` nodes that leaves the `named` nodes out has nodes to go to: ''
    where the records (`free`: the nodes they show but the named ones, of `seen` in all) or the
    site config (`size`: the nodes the partition has at least, its max_nodes) know them; None
    where they know it has no more (a 2-node partition whose two nodes are named: Slurm refuses
    the run; a busy partition's records, placed wherever nodes were free, show its nodes); else,
    where every job took the same nodes (`fixed`: an idle partition's lowest ones) and neither
    knows the partition's size, the words that it needs them."""
    if len(free) >= needed or size is not None and max(size, seen) - named >= needed:
        return ''
    if size is not None or not fixed:
        return None
    return NEEDS_OTHERS


NEEDS_OTHERS = '; it needs nodes these runs did not use: if the partition has none, no run separates these'


def _and(names):
    return names[0] if len(names) == 1 else ', '.join(names[:-1]) + ' and ' + names[-1]


def _fixed_placement(cells, alike=lambda c: c.num_nodes):
    """Whether the jobs `alike` (of one node count; or of one test) all used one set of nodes (an
    idle partition gives every job the lowest ones): their records show no other node (and a
    test's repetitions land there again)."""
    placed = group([c for c in cells if c.aspect == SPEED and c.used], alike)
    return all(len({c.used for c in of}) == 1 for of in placed.values())


def _moved(cells, runs):
    """The checks whose figures moved (a worse cell of a test, or where none is, a cell past the
    threshold too near the noise to be clear, a training check's before the interconnect's, whose
    figures chance moves more; a failed run after), cheapest first: a run that
    leaves them out cannot show their loss again (a red-team's d35: peak host memory +40 % in
    every MNIST test, and the run proposed was of CIFAR-100 and the interconnect)."""
    near = [c for c in cells if c.status == 'unclear' and c.aspect == SPEED and c.loss > compare.Rule.threshold]
    found = {c.check for c in local(cells) if c.status == 'worse' and c.aspect in (SPEED, RANK, LOADER, MEMORY)} or (
        {c.check for c in near if c.training} or {c.check for c in near})
    found |= {r.test.split()[0] for r in runs if r.failed}
    return sorted(found, key=lambda check: (check == INTERCONNECT, check))


def _with_moved(checks, moved, every=False):
    """[('-n', CHECK)] of `checks`, and where none of them moved, the first of the `moved`
    checks (the cheapest), or with `every`, each moved check not among them (repetitions
    measure again what moved)."""
    have = {check for _, check in checks}
    if not every and (have & set(moved) or not moved):
        return list(checks)
    return list(checks) + [('-n', check) for check in (moved if every else moved[:1]) if check not in have]


NETWORK = ' (its network layer)'
NODE_KINDS = ('node ', 'a GPU of ', 'the link of ')


# --- the run pinned to one node -----------------------------------------------------------------

def _pinned_run(names, cells, runs, refusal=node_names.refusal, moved=(), size=None):
    """Where every hypothesis is of a named node, the run pinned to one of them (_pinned): a run
    that leaves them all out passes under each, and more repetitions of nodes that always ran
    together keep them together; None where some hypothesis is not of a node."""
    if not names or not all(n.startswith(NODE_KINDS) for n in names):
        return None
    named = [n for n in _nodes_named(names) if not refusal(n)]
    if any(GROUPED.search(n) for n in named):
        return None     # a run on one node of a group tells nothing of its others
    seen = sorted(set().union(*(c.used or () for c in cells), *(r.nodes for r in runs)))
    # the partition may have nodes the records do not show: where the config says so, or where
    # every job took the lowest ones (an idle partition's); a busy one's records show them all
    more = _fixed_placement(cells) if size is None else max(size, len(seen)) > len(named)
    return _pinned(named, [n for n in seen if n not in named], names, _cheapest_lost(cells, runs), moved,
                   more) if named else None


def _pinned(named, free, names, lost, moved=(), more=False):
    """The run on one named node that the hypotheses predict differently: the interconnect
    between it and a node not named where links are among them (its link slows that pair, the
    others' do not), else the lost check on it alone (a slow node or a GPU of it slows it, another
    node does not; a GPU of it also lowers slowest_rank_fraction, a whole node does not). `more`:
    whether the partition may have nodes the records do not show (Slurm then adds one)."""
    target = named[0]
    links = [n for n in names if n.startswith('the link of ')]
    if links and (free or more):
        # a node not named: one the records show, else one Slurm adds, the named ones excluded
        pinned = ['-J', f'nodelist={target},{free[0]}'] if free else ['-J', f'nodelist={target}'] + (
            ['-J', f'exclude={",".join(named[1:])}'] if named[1:] else [])
        checks = _with_moved([('-n', INTERCONNECT)], moved)
        return _command(checks, lost[1] if len(checks) > 1 else None, 2, pinned,
                        f'the interconnect between {target} and a node not named: the link of {target} '
                        'slows it, the others do not' + ('' if free else NEEDS_OTHERS))
    checks, image = lost
    if not checks or checks[0][1] == INTERCONNECT:
        return ''
    return _command(_with_moved(checks, moved), image, 1, ['-J', f'nodelist={target}'],
                    f'the same check on {target} alone: a slow {target} slows it, another node '
                    f'does not; a GPU of {target} also lowers {RANK_VAR}, a whole node does not')


# a word that the shell reads as itself (what shlex.quote leaves as it is), not an option
PLAIN = re.compile(r'[A-Za-z0-9_@%+=:,./][A-Za-z0-9_@%+=:,./-]*')


def _command(checks, image, num_nodes, more, why, said=''):
    """`reframe -c checks/ -r -n CHECK ... -P image=IMAGE -P num_nodes=N MORE (why)`, each word
    quoted for the shell; `checks`: [('-n', CHECK)]. The check and image come from data (a perf
    log, a results database): a check that is not one of checks/, or an image that is not a
    plain word, prints no command but says why (issue 48: `-P image=0;touch ...` would run
    whatever followed the `;` when pasted)."""
    for _, check in checks:
        if check not in RECORDED_DEFAULTS:
            return (f'no command printed: test {check!r} of the data is not one of the checks '
                    f'({", ".join(sorted(RECORDED_DEFAULTS))})')
    if image is not None and not PLAIN.fullmatch(image):
        return (f'no command printed: image {image!r} of the data is not a plain name (letters, '
                'digits and _@%+=:,./-)')
    words = [w for pair in checks for w in pair]
    words += ['-P', f'image={image}'] if image is not None else []
    words += ['-P', f'num_nodes={num_nodes}'] if num_nodes is not None else []
    return ' '.join([RUN] + [shlex.quote(str(w)) for w in words + list(more)]) + said + f' ({why})'


def _cheapest_lost(cells, runs, interconnect=False):
    """([('-n', CHECK)], IMAGE) of a test that lost: the one check and image to run again; a
    training check, which every candidate but the fabric and the links must slow, unless
    `interconnect` (the interconnect's runs in seconds); ([], None) where none lost."""
    lost = [(c.check, c.num_nodes, c.image) for c in local(cells) if c.status == 'worse' and c.aspect == SPEED] \
        or [(r.test.split()[0], r.num_nodes, r.image) for r in runs if r.failed]
    if not lost:
        return [], None
    check, _, image = min(lost, key=lambda t: ((t[0] == INTERCONNECT) != interconnect, t[1], t[0], t[2]))
    return [('-n', check)], image


def _repetitions_separate(names, cells):
    """Whether more repetitions can tell the candidates `names` apart: some of them can slow
    another set of the cells near their threshold (unclear) than others. Where every test's runs
    used one set of nodes (an idle partition gives every job the lowest ones), the repetitions
    land on those nodes again: each candidate must then slow another set than every other (the
    fabric and the link of nid001, the host stack and nid001, reach the same runs there, and both
    predict what the repetitions show)."""
    ev = Evidence.of(cells)
    reach = [ev.reach[n] & ev.unclear for n in names if n in ev.reach]
    if len(names) > len(reach):
        return True
    return len(set(reach)) == len(reach) if _fixed_placement(cells, lambda c: c.test) else len(set(reach)) > 1


def _more_repetitions(cells, moved=()):
    """More repetitions of the tests whose cells sit near their threshold (unclear: neither
    clearly worse nor clearly unchanged), and of the checks that `moved`, or '' where no cell sits
    near its threshold: repetitions cannot separate losses that are already clear."""
    near = sorted({c.check for c in cells if c.status == 'unclear' and c.aspect == SPEED})
    if not near:
        return ''
    return _command(_with_moved([('-n', check) for check in near], moved, every=True), None, None,
                    ['--repeat', str(REPEAT)],
                    'more repetitions of the tests near their threshold and of those that moved')


# --- helpers -------------------------------------------------------------------------------------

class _stack_changes(dict):
    """{image: [(fact, old, new)]} of each image whose recorded stack differs, worked out for the
    images a line names (most verdicts name none)."""

    def __init__(self, before, after):
        super().__init__()
        self.sides = [group([s for s in ss if s.stack], lambda s: s.image) for ss in (before, after)]

    def get(self, image, default=None):
        if image not in self and all(image in side for side in self.sides):
            self[image] = stack.changes(*([_decoded(s.stack) for s in side[image]] for side in self.sides))
        return super().get(image, default)


@functools.lru_cache(maxsize=256)
def _decoded(text):
    return stack.decode(text)


def _range_of(changes):
    changes = sorted(changes, reverse=True)
    if not changes or _percent(changes[0]) == _percent(changes[-1]):
        return _percent(changes[0]) if changes else ''
    return f'{_percent(changes[0])} to {_percent(changes[-1])}'


def _percent(change):
    return f'{100 * change:+.0f} %'


def _counts(counts):
    """'1 node', '2 and 4 nodes', '1, 2 and 4 nodes'."""
    if counts == [1]:
        return '1 node'
    words = list(map(str, counts))
    return (', '.join(words[:-1]) + ' and ' if len(words) > 1 else '') + words[-1] + ' nodes'


def _count(items, noun):
    return f'{len(items)} {noun}{"s" if len(items) != 1 else ""}'
