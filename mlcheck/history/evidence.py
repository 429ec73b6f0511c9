"""The one table of evidence of a comparison, from which the report's rows, its exit status and
its `likely cause:` line are all drawn, so that they never disagree: every run of both sides
(mlcheck.history.runs: test, image, node count, nodes, repetition, session, end time, each figure
or its failure and reason, stack facts), the judged comparisons of their figures
(mlcheck.history.compare) and the causes located from them (mlcheck.history.causes).

The contract of the exit status (docs/performance-history.md): 1 if and only if the report
names a regression (a verdict that fails the gate), a failed run after, or a cause; 0 says
nothing failed nor got slower beyond the noise, and the first line says the same: NOTHING
where no figure got worse past the threshold, else WITHIN_NOISE with the largest such change
and how many runs a side would tell it from the noise.
"""

import functools
from dataclasses import dataclass

from mlcheck.history import causes, compare
from mlcheck.history.runs import runs_of
from mlcheck.history.samples import listed, test_of

NOTHING = 'no likely cause: nothing got slower or failed'
# where something got worse past the threshold within the noise: exit 0, and not NOTHING
WITHIN_NOISE = 'no likely cause: nothing failed, and no change beyond the noise'


@dataclass
class EvidenceTable:
    samples: tuple        # (before, after): [Sample], failed runs included (value None)
    comparisons: list     # [compare.Comparison], judged
    verdicts: list        # [causes.Verdict]
    rule: compare.Rule

    @classmethod
    def of(cls, ran_before, ran_after, rule=compare.Rule(), partitions=(), sizes=None):
        """The table of two sides' samples, failed runs included (value None); `partitions`:
        Slurm partition names the site config knows, which no separating command may exclude;
        `sizes`: {system:partition: the nodes the site config says it has at least}."""
        comparisons = compare.compare(ran_before, ran_after, rule)
        return cls((ran_before, ran_after), comparisons,
                   causes.likely_causes(comparisons, ran_before, ran_after, rule, partitions, sizes), rule)

    @functools.cached_property
    def before(self):
        """[Run] before (made when asked: most reports ask only the after side's failures)."""
        return runs_of(self.samples[0], 'before')

    @functools.cached_property
    def after(self):
        return runs_of(self.samples[1], 'after')

    def failed(self, side='after'):
        return [r for r in getattr(self, side) if r.failed]

    def failing(self):
        """The comparisons whose verdict fails the gate."""
        return [c for c in self.comparisons if c.verdict in compare.FAILING]

    def exit_status(self):
        """1 iff the report names a regression, a failed run after, or a cause; else 0."""
        return 1 if self.failing() or self.failed('after') or self.verdicts else 0

    def cause_lines(self):
        """The report's first lines: the causes, or what fails the gate where no cause is
        located (tests that did not run after), or that nothing got slower or failed."""
        if self.verdicts:
            lines = [v.line() for v in self.verdicts]
            missing = self.not_run_after()
            if missing:
                # a test that broke outright is no less a finding than the cause beside it
                lines[0] += (f'; and {len(missing)} test(s) did not run after ({compare.NO_RESULT}: '
                             f'{listed(missing)}; a retired image or node count: leave its tests out with -n)')
            return lines
        if self.exit_status():
            failing = self.failing()
            tests = sorted({c.key[1] for c in failing})
            return [f'no cause located: {len(tests)} test(s) fail the gate with no run after to locate '
                    f'it ({", ".join(sorted({c.verdict for c in failing}))}: {listed(tests)}); a retired '
                    'image or node count: leave its tests out with -n']
        return self.pass_lines()

    def not_run_after(self):
        """The tests with values before and no run at all after (NO RESULT AFTER, and no failed
        run after that a cause line would locate)."""
        ran = {r.test_key for r in self.after} if any(c.verdict == compare.NO_RESULT for c in self.comparisons) else set()
        return sorted({c.key[1] for c in self.comparisons if c.verdict == compare.NO_RESULT
                       and test_of(c.key) not in ran})

    def pass_lines(self):
        """The first line of a report that passes: NOTHING, or, where figures got worse past the
        threshold but within the noise, that (the largest named) and how many runs a side would
        tell a change of its size from the spread measured (compare.repetitions_to_tell)."""
        worse = [c for c in self.comparisons if c.verdict == compare.WITHIN_NOISE and c.worse and c.worse > 0]
        if not worse:
            return [NOTHING]
        c = max(worse, key=lambda c: c.worse)
        far = causes.scattered(self.comparisons, self.samples[1], self.rule, (compare.WITHIN_NOISE,))
        return [f'{WITHIN_NOISE}: {len(worse)} figure(s) worse past the {100 * self.rule.threshold:g} % '
                f'threshold but within the noise, the largest {c.key[1]} {c.key[2]} {100 * c.change:+.1f} % '
                f'(noise {100 * c.noise:.1f} %, {len(c.before)} runs before, {len(c.after)} after): '
                f'{self._what_decides(c)}'] + (
            [f'{causes.far_said(far)}: the test again with --repeat {causes.REPEAT} tells them apart'] if far else [])

    def _what_decides(self, c):
        """How many runs a side would tell the change of `c` from its noise, or why none would."""
        rule = self.rule
        if c.noise_of != 'both':
            return (f'a side of fewer than {rule.min_repeats} runs has no spread of its own: run both '
                    f'sides with --repeat {causes.REPEAT}')
        n = compare.repetitions_to_tell(c, rule)
        if n:
            return (f'at this spread, {n} runs a side (--repeat {n}) would tell a change that size from '
                    'the noise')
        if abs(c.change) <= rule.noise_factor * c.noise:
            return (f'within {rule.noise_factor:g} x the spread of one run, which more runs measure better '
                    'but do not narrow: a quieter partition would')
        return (f'more than {compare.MOST_REPEATS} runs a side would be needed at this spread: a '
                'quieter partition narrows it')

    def runs_note(self, comparison):
        """'1 of 3 failed after' (and before) of one comparison's test, or ''."""
        notes = []
        for side in ('before', 'after'):
            failed = getattr(comparison, f'failed_{side}')
            if failed:
                ran = failed + len(getattr(comparison, side))
                notes.append(f'{failed} of {ran} failed {side}')
        return '; '.join(notes)

    def fewest_runs(self):
        """(runs, test, side) of the compared test with the fewest runs on a side, failed ones
        counted; None where no test ran on both sides."""
        counts = {}
        for side in ('before', 'after'):
            for r in getattr(self, side):
                counts[(r.test_key, side)] = counts.get((r.test_key, side), 0) + 1
        both = [(n, key[1], side) for (key, side), n in counts.items()
                if (key, 'before') in counts and (key, 'after') in counts]
        return min(both) if both else None

    def failed_lines(self):
        """The summary's lines on failed runs: after's fail the gate, before's are said."""
        lines = []
        for side, consequence in (('after', 'fails the gate'),
                                  ('before', "the baseline's: said, not gated; record a baseline "
                                             'whose every run passed')):
            failed = self.failed(side)
            if failed:
                tests = sorted({r.test for r in failed})
                lines.append(f'{len(failed)} run{"s" if len(failed) != 1 else ""} failed {side} '
                             f'({listed(tests)}): {consequence}')
        return lines
