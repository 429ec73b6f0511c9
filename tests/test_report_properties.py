"""Invariants of the upgrade report's rule that a user relies on, over generated before/after
sample sets (tests x settings groups x repetitions) whose truth is known by construction.
The rule itself is in mlcheck.history.compare; docs/performance-history.md lists these invariants."""

import math
import statistics
import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st

from mlcheck.commands import report
from mlcheck.history import compare
from mlcheck.history.evidence import EvidenceTable
from mlcheck.history.compare import Rule
from mlcheck.history.samples import Sample

RULE = Rule()
UNITS = ('samples/s', 's')     # higher is better, lower is better


@st.composite
def groups(draw, tests=st.integers(1, 3)):
    """{(test, settings): (unit, before values, after values)}; an after value None is a test
    case that failed before its performance stage."""
    found = {}
    for test in range(draw(tests)):
        unit = draw(st.sampled_from(UNITS))
        for settings in range(draw(st.integers(1, 2))):
            base = draw(st.floats(10, 1000))
            spread = draw(st.floats(0, 0.1))
            factor = draw(st.floats(0.3, 2.0))
            noise = lambda: draw(st.floats(-1, 1)) * spread
            before = [base * (1 + noise()) for _ in range(draw(st.integers(0, 5)))]
            after = [base * factor * (1 + noise()) for _ in range(draw(st.integers(0, 5)))]
            if draw(st.booleans()) and not after:
                after = [None] * draw(st.integers(0, 2))
            found[f'Check{test}', f'epochs={settings + 1}'] = (unit, before, after)
    return found


def samples(found, side):
    out = []
    for (test, settings), (unit, *values) in found.items():
        for i, value in enumerate(values[side == 'after']):
            out.append(Sample('sim:cluster', f'{test} %num_nodes=1', 'host', 1, 'x', value,
                              unit, 1.8e9 + i, jobid=str(i), settings=settings))
    return out


def compared(found, rule=RULE):
    return compare.compare(samples(found, 'before'), samples(found, 'after'), rule)


def valued(values):
    return [v for v in values if v is not None]


@settings(max_examples=100, deadline=None)
@given(groups())
def test_a_test_with_values_before_and_none_after_never_passes(found):
    tests = {test for (test, _), (_, before, after) in found.items() if before}
    broken = {t for t in tests if not any(valued(after) for (test, _), (_, _, after) in found.items()
                                          if test == t)}
    if broken:
        table = EvidenceTable.of(samples(found, 'before'), samples(found, 'after'), RULE)
        assert table.exit_status() == report.EXIT_REGRESSION


@settings(max_examples=100, deadline=None)
@given(groups())
def test_a_change_beyond_threshold_and_noise_is_never_unchanged(found):
    for c in compared(found):
        before, after = c.before, c.after
        if len(before) < 2 or not after:
            continue
        spread = statistics.stdev(before) / statistics.fmean(before)
        change = statistics.fmean(after) / statistics.fmean(before) - 1
        if abs(change) > RULE.threshold and abs(change) > RULE.noise_factor * spread:
            assert c.verdict != compare.UNCHANGED, c
            # one run after, judged against the spread before as a mean of one is expected to fall
            # ... and it is judged changed where its chance under the noise alone is under the
            # report's false-alarm rate over its figures (compare.judge_together)
            figures = sum(other.p is not None for other in compared(found))
            if len(after) == 1 and abs(change) > RULE.noise_factor * spread * math.sqrt(1 + 1 / len(before)) \
                    and c.p <= RULE.false_alarm / figures:
                assert c.verdict in (compare.REGRESSION, compare.IMPROVED), c


@settings(max_examples=100, deadline=None)
@given(groups())
def test_settings_groups_are_never_compared_across(found):
    for c in compared(found):
        _, name, _, settings = c.key
        unit, before, after = found[name.split()[0], settings]
        assert sorted(c.before) == sorted(valued(before)) and sorted(c.after) == sorted(valued(after))


@settings(max_examples=100, deadline=None)
@given(groups(), st.lists(st.floats(10, 1000), min_size=1, max_size=4), st.data())
def test_a_stray_group_before_never_changes_another_groups_verdict(found, stray, data):
    test = data.draw(st.sampled_from(sorted({t for t, _ in found})))
    unit = next(u for (t, _), (u, _, _) in found.items() if t == test)
    verdicts = {c.key: c.verdict for c in compared(found)}
    with_stray = {**found, (test, 'epochs=99'): (unit, stray, [])}
    for c in compared(with_stray):
        if c.key[3] != 'epochs=99':
            assert c.verdict == verdicts[c.key], c


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(10, 1000), min_size=1, max_size=5),
       st.floats(-0.99, 0.99), st.sampled_from(UNITS), st.integers(1, 5), st.data())
def test_an_unchanged_test_is_never_a_regression(before, within, unit, runs, data):
    """After: values of the before side's spread, at a mean within the threshold of before's."""
    mean = statistics.fmean(before)
    after = [data.draw(st.sampled_from(before)) for _ in range(runs)]
    after = [v * (1 + within * RULE.threshold) * mean / statistics.fmean(after) for v in after]
    found = {('Check0', 'epochs=1'): (unit, before, after)}
    [c] = compared(found)
    assert c.verdict not in compare.FAILING, c


@settings(max_examples=15, deadline=None)
@given(groups())
def test_the_exit_status_is_1_iff_a_verdict_fails_or_a_run_failed_after(found):
    """End to end: perf logs written, read back and judged by the command: 1 iff a verdict fails,
    a run failed after, or a cause is named (tests/test_evidence.py: the contract on sessions
    of a partition)."""
    from perflogs import write_perflog
    before, after = samples(found, 'before'), samples(found, 'after')
    if not before and not after:
        return
    with tempfile.TemporaryDirectory() as scratch:
        # a side without any test case is bad input: give it one of an unrelated test
        filler = Sample('sim:cluster', 'Other %num_nodes=1', 'host', 1, 'x', 1.0, 's', 1.8e9)
        logs = [write_perflog(Path(scratch) / f'{side}.log', ss or [filler])
                for side, ss in (('before', before), ('after', after))]
        code = report.main(logs)
    table = EvidenceTable.of(before or [filler], after or [filler], RULE)
    verdicts = {c.verdict for c in table.comparisons}
    failed_after = any(s.value is None for s in after)
    assert code == (report.EXIT_REGRESSION if verdicts & set(compare.FAILING) or failed_after
                    or table.verdicts else 0), verdicts
