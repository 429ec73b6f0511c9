"""Which layer broke, by elimination: from the judged comparisons of an upgrade, the candidates
(each node that ran a worse job, a GPU of it, its link, the fabric, the host stack, each image,
the data path, the binding) that the measured cells leave standing, rendered as one line:
`likely cause: <it>` where one is left, `cannot tell: A or B` and the run that would separate
them where several are, the smallest pair where no single one explains the cells.
docs/performance-history.md states the rule.

The cells (what the runs say, against the noise) are mlcheck.history.cells; the candidates, what
each predicts of the cells and which stand, mlcheck.history.candidates.
"""

import functools
from dataclasses import dataclass

from mlcheck.figures import stack
from mlcheck.history import compare, node_names
from mlcheck.history.candidates import Evidence
from mlcheck.history.cells import INTERCONNECT, LOADER, LOADER_VAR, RANK, RANK_VAR, SPEED, Z, cells_of
from mlcheck.history.samples import group
from mlcheck.judging.sanity import placement_said


@dataclass(frozen=True)
class Verdict:
    """What the report says first: kind 'cause' (one candidate, or a pair: the second beyond the
    first), 'cannot tell' (hypotheses: tuples of candidates) or 'binding' (failed placement)."""
    kind: str
    hypotheses: tuple
    evidence: str
    separating: str = ''

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
        listed = ' or '.join(_name(h) for h in self.hypotheses) or 'no one cause nor pair of causes fits'
        return (f'likely cause: cannot tell: {listed}: {self.evidence}'
                + (f'; to separate them: {self.separating}' if self.separating else ''))


def _name(hypothesis):
    return hypothesis[0] if len(hypothesis) == 1 else f'{hypothesis[0]}, and {hypothesis[1]} beyond it'


def likely_causes(comparisons, before=(), after=(), rule=compare.Rule()):
    """[Verdict] of judged comparisons (mlcheck.history.compare.compare); `before` and `after`
    are their samples, failed ones included: their node lists, software stacks and, where the
    record keeps it (the results database, not a perf log), why a test failed."""
    found = []
    several = len({c.key[0] for c in comparisons}) > 1
    for partition, judged in sorted(group(comparisons, lambda c: c.key[0]).items()):
        side = lambda samples: [s for s in samples if s.partition == partition]
        for v in _of_partition(judged, side(before), side(after), rule):
            found.append(Verdict(v.kind, v.hypotheses,
                                 (f'on {partition}: ' if several else '') + v.evidence, v.separating))
    return found


def _of_partition(judged, before, after, rule):
    found = []
    reasons = {s.name: s.problem for s in after if s.value is None and s.problem}
    binding = sorted({c.key[1] for c in judged if c.verdict == compare.NO_RESULT
                      and placement_said(reasons.get(c.key[1], ''))})
    if binding:
        found.append(Verdict('binding', (('binding',),), f'{_count(binding, "test")} failed the '
                             f'placement sanity ({_listed(binding)})'))
    rest = [c for c in judged if c.key[1] not in binding]
    cells = cells_of(rest, after, rule)
    # nothing clearly worse on its nodes, and yet a figure fails the gate: a loss too near the
    # noise to single out a cause, not "nothing got slower"
    if not any(c.status == 'worse' for c in cells) and not any(
            c.verdict in compare.FAILING and c.key in {s.key for s in after} for c in rest):
        return found
    return found + [diagnose(cells, _stack_changes(before, after))]



# --- the verdict ----------------------------------------------------------------------------------

def diagnose(cells, stacks=None):
    """The Verdict of one partition's cells (at least one worse)."""
    ev = Evidence.of(cells)
    left, more = ev.standing()
    worse = [cells[i] for i in sorted(ev.worse) if cells[i].aspect in (SPEED, RANK, LOADER)]
    what = _what(worse, cells) if worse else (f'figures fail the gate, none by more than {Z:g} '
                                              'spreads of the noise on the nodes it ran on')
    if worse and len(left) == 1 and not more:
        return Verdict('cause', left, f'{what}; {_support(left[0], ev, {} if stacks is None else stacks)}')
    hypotheses = tuple(left + more)
    if not hypotheses:
        # none fits every cell: those that explain the losses, though some cell they predict
        # worse is not (one model of an image spared, a second cause that hides the first)
        covering = tuple((n,) for n in ev.reach if ev.worse <= ev.reach[n])
        return Verdict('cannot tell', covering,
                       f'{what}; none of these also leaves unchanged what it should slow, nor does a '
                       'pair', separating(covering, cells) if covering else
                       f'{RUN} --repeat 5 (more repetitions, to clear the noise)')
    why = (f'{len(ev.unclear)} cell(s) too close to the noise to clear another cause; '
           if more else '') + 'the cells fit each'
    stated = [s for s in (_stack_note(h, {} if stacks is None else stacks, cells) for h in left) if s]
    return Verdict('cannot tell', hypotheses, '; '.join([what, why] + stated),
                   separating(hypotheses, cells))


def _what(worse, cells):
    tests = sorted({(c.image, c.num_nodes) for c in worse})
    images = sorted({i for i, _ in tests})
    counts = sorted({n for _, n in tests})
    failed = len({c.test for c in worse if c.loss == 1.0})
    losses = [-c.loss for c in worse if c.loss < 1.0]
    measured = ', '.join(filter(None, [_range_of(losses), f'{failed} failed' if failed else '']))
    return (f'{_count(sorted({c.test for c in worse}), "test")} worse ({measured}: '
            f'{_listed(images)} at {_counts(counts)})')


def _support(hypothesis, ev, stacks):
    """What rules the others out: the cells it predicts unchanged that are, and its stack."""
    cells = ev.cells
    reach = frozenset().union(*(ev.reach[c] for c in hypothesis))
    fine = sorted({(cells[i].image, cells[i].num_nodes) for i in ev.same - reach
                   if cells[i].aspect == SPEED})
    parts = []
    if fine:
        parts.append(f'unchanged: {_listed([f"{i} at {_counts([n])}" for i, n in fine], 6)}')
    rank = [cells[i] for i in ev.worse if cells[i].aspect == RANK]
    if rank:
        parts.append(f'{RANK_VAR} {_range_of([-c.loss for c in rank])}')
    note = _stack_note(hypothesis, stacks, cells)
    return '; '.join(parts + ([note] if note else [])) or 'no other candidate fits'


def _stack_note(hypothesis, stacks, cells):
    """The recorded stack changes that fit the hypothesis: those every image shares for the host
    stack or the fabric, an image's own (less the shared ones) for an image."""
    images = sorted({c.image for c in cells if c.aspect == SPEED})
    shared = [change for change in stacks.get(images[0], [])
              if all(change in stacks.get(i, []) for i in images)] if len(images) > 1 else []
    notes = []
    for name in hypothesis:
        if name.startswith('image '):
            own = [c for c in stacks.get(name[len('image '):], []) if c not in shared]
            notes.append(f'{name[len("image "):]}\'s stack: {stack.change_line(own)}' if own else '')
        elif name in ('host stack', 'fabric'):
            notes.append(f'{stack.change_line(shared)} in every image' if shared else '')
    return '; '.join(filter(None, notes))


# --- the run that separates -----------------------------------------------------------------------

RUN = 'reframe -c checks/ -r'


def separating(hypotheses, cells):
    """A command that runs what tells the first hypotheses apart."""
    names = {n for h in hypotheses for n in h}
    # the first two nodes named: a run that leaves them out tells them from the rest (all of them
    # out could leave no node to run on)
    named = sorted(dict.fromkeys(n.split()[-1] for h in hypotheses for n in h
                                 if n.startswith(('node ', 'a GPU of ', 'the link of '))))
    # a name from data that Slurm reads as many nodes (ALL) never reaches --exclude
    refused = list(filter(None, map(node_names.refusal, named)))
    nodes = [n for n in named if not node_names.refusal(n)][:2]
    # ReFrame's -J passes `exclude=...` on as `#SBATCH --exclude=...` (`-J --exclude` is refused)
    exclude = f'-J exclude={",".join(nodes)}' if nodes else ''
    if refused:
        exclude += f' (refused: {"; ".join(refused)})'
    if any(n.startswith('the link of ') for n in names):
        return f'{RUN} -n {INTERCONNECT} -P num_nodes=2 {exclude} (the interconnect on other nodes)'
    if nodes:
        return f'{RUN} -P num_nodes=1 {exclude} (the checks on other nodes)'
    images = sorted({c.image for c in cells if c.aspect == SPEED})
    counts = sorted({c.num_nodes for c in cells})
    if 'fabric' in names and 1 not in counts:
        return f'{RUN} -P num_nodes=1 (the checks within one node)'
    if 'data path' in names:
        return f'{RUN} -n CIFAR100ResNetCheck (it records {LOADER_VAR})'
    if any(n.startswith('image ') for n in names) and len(images) < 2:
        return f'{RUN} -P image=host -P num_nodes={counts[0]} (the host\'s own Python beside the image)'
    return f'{RUN} --repeat 5 (more repetitions, to clear the noise)'


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


def _listed(names, most=4):
    return ', '.join(names[:most]) + (f' and {len(names) - most} more' if len(names) > most else '')
