"""Compare the performance of two selections, tell regressions from noise, and report.

    python -m mlcheck.commands.report BEFORE AFTER [-C CONFIG] [--db FILE] [-o DIR]

BEFORE and AFTER are each a session UUID, a period START:END (ReFrame's syntax, e.g.
now-1d:now), 'latest', or a perf log file or directory with an optional @START:END. Every test
and performance variable is compared by the mean of its repetitions (reframe --repeat N). A
change is a regression only when it is worse than both --threshold and --noise-factor times the
noise (the standard deviation of the repetitions, pooled over both sides, or of the one side with
repetitions) and the report, judged as a whole, holds it beyond chance at --false-alarm (see
docs/performance-history.md). It starts with the likely cause, one line per
cause (mlcheck.history.causes: what the evidence leaves, or `cannot tell` and the run that
separates what it cannot). With -o DIR it writes
DIR/report.md and PNG plots.

Exit status: 0 no regression; 1 regression found, a test with values before and none after
(failed, not run, or run only with other settings), a change worse than the threshold with too
few repetitions to judge, or an after session whose every test case failed; 2 bad input, a selection that names no test case included; 3
internal error (one line on stderr for either).
"""

import os
import sys
from datetime import datetime

from mlcheck.commands.common import (add_source_arguments, argument_parser, one_line_errors, open_database,
                         parse_fraction, partition_sizes, slurm_partitions, text_table)
from mlcheck.commands.common import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_REGRESSION  # noqa: F401 - its documented codes
from mlcheck.errors import InputError
from mlcheck.files import Directory
from mlcheck.visible import visible, write_escaped
from mlcheck.history import compare, hostlist
from mlcheck.history.causes import REPEAT
from mlcheck.history.evidence import EvidenceTable
from mlcheck.figures import stack
from mlcheck.history import settings as recorded_settings, trial_runs
from mlcheck.history.recorded_defaults import RECORDED_DEFAULTS
from mlcheck.history.compare import Rule
from mlcheck.history.samples import NOT_RECORDED, file_name, group, listed, test_of_sample, valued
from mlcheck.history.selection import AllFailed, load, parse_selection, within_budget

COLUMNS = ('partition', 'test', 'variable', 'n before', 'n after', 'mean before', 'mean after',
           'change', 'noise', 'verdict')


def parse_args(argv):
    parser = argument_parser('python -m mlcheck.commands.report', __doc__.split('\n')[0])
    parser.add_argument('before', help='the selection to compare against (e.g. the baseline)')
    parser.add_argument('after', help='the selection under test (e.g. after the upgrade)')
    add_source_arguments(parser)
    parser.add_argument('--threshold', default=f'{100 * Rule.threshold:g}%',
                        help='relative change that matters: 5%% or 0.05 (default: %(default)s)')
    parser.add_argument('--noise-factor', type=float, default=Rule.noise_factor,
                        help='a change must also exceed this many times the noise (default: %(default)s)')
    parser.add_argument('--false-alarm', default=f'{100 * Rule.false_alarm:g}%',
                        help='the share of unchanged sessions whose report may judge any figure changed: '
                             'each change is judged at this level over the report\'s figures (default: %(default)s)')
    parser.add_argument('--min-repeats', type=int, default=Rule.min_repeats,
                        help='repetitions a side needs for its own spread; a side with fewer is '
                             "judged against the other side's (default: %(default)s)")
    parser.add_argument('--require-repeats', type=int, default=0, metavar='N',
                        help='refuse to gate (exit 2, one line) where a compared test has fewer than '
                             f'N runs on a side; a CI gate wants {REPEAT}: fewer raise false alarms '
                             '(docs/performance-history.md) (default: gate on any)')
    parser.add_argument('-n', '--name', action='append', default=[],
                        help='only tests whose name contains this text (given several times: '
                             'any of them)')
    parser.add_argument('-o', '--output', metavar='DIR',
                        help='write DIR/report.md and PNG plots')
    parser.add_argument('--plot-var', default=None,
                        help="performance variable to plot (default: each check's first rate, "
                             'by name: a unit per second, e.g. samples_per_s)')
    return parser.parse_args(argv)


def percent(value):
    return '' if value is None else f'{100 * value:+.1f}%'


# the order a reader acts in: what broke or got slower first, then what got faster
ORDER = (compare.NO_RESULT, compare.OTHER_SETTINGS, compare.UNIT_CHANGED, compare.REGRESSION,
         compare.TOO_FEW_WORSE, compare.IMPROVED, compare.SHARE_OF_FASTER, compare.CHANGED, compare.ZERO_BEFORE, compare.WITHIN_NOISE, compare.UNCHANGED, compare.TOO_FEW,
         compare.ONLY_BEFORE, compare.ONLY_AFTER)
ACT_ON = compare.FAILING


def rows(comparisons, table=None):
    """Table rows of the judged comparisons, in ORDER; a test's settings are shown where the
    same test ran with other settings too, and its failed runs (`1 of 3 failed after`) beside
    its verdict."""
    tests = group(comparisons, lambda c: c.key[:3])
    out = []
    for c in sorted((c for c in comparisons if c.verdict in ORDER),
                    key=lambda c: (ORDER.index(c.verdict), c.key)):
        partition, name, var, settings = c.key
        if len({other.key[3] for other in tests[c.key[:3]]}) > 1:
            name = f'{name} [{settings or NOT_RECORDED}]'
        noise = '' if c.noise is None else f'{100 * c.noise:.1f}%' + (
            f' ({c.noise_of} only)' if c.noise_of != 'both' else ' (like cells)' if c.pooled else '')
        failed = table.runs_note(c) if table else ''
        out.append((partition, name, var, str(len(c.before)), str(len(c.after)),
                    _figure(c.mean_before, c.unit), _figure(c.mean_after, c.unit),
                    percent(c.change), noise, c.verdict + (f'; {failed}' if failed else '')))
    return out


def _figure(value, unit):
    return '' if value is None else f'{value:.4g} {unit}'


def markdown_table(header, body):
    escape = lambda cell: cell.replace('|', '\\|')
    return '\n'.join(['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header),
                      *('| ' + ' | '.join(map(escape, r)) + ' |' for r in body)])


def summary(comparisons, rule):
    """The verdict counts, then one line each for what could not be judged, with the advice."""
    count = lambda verdict: sum(c.verdict == verdict for c in comparisons)
    lines = [f'{count(compare.REGRESSION)} regression(s), {count(compare.IMPROVED)} improved, '
             f'{count(compare.WITHIN_NOISE)} within noise, {count(compare.UNCHANGED)} unchanged '
             f'of {len(comparisons)} compared '
             f'(rule: worse by more than {100 * rule.threshold:g}% and {rule.noise_factor:g} x noise)']
    if count(compare.NO_RESULT):
        failed = sum(c.verdict == compare.NO_RESULT and c.failed_after > 0 for c in comparisons)
        lines.append(f'{count(compare.NO_RESULT)} {compare.NO_RESULT}: values before and none '
                     'after (failed or not run): fails like a regression'
                     + (f'; {failed} ran and failed before their performance stage' if failed else ''))
    if count(compare.OTHER_SETTINGS):
        lines.append(f'{count(compare.OTHER_SETTINGS)} {compare.OTHER_SETTINGS}: ran after only '
                     'with other settings (shown in brackets), so not comparable: fails the gate; '
                     'run the settings of before, or record a new baseline')
    if count(compare.UNIT_CHANGED):
        lines.append(f'{count(compare.UNIT_CHANGED)} {compare.UNIT_CHANGED}: after is measured in a '
                     'unit that does not convert to before\'s, so it is not the same figure: fails the gate')
    for verdict, why in ((compare.CHANGED, 'a figure that is neither better higher nor lower '
                          '(power): shown, not judged'),
                         (compare.SHARE_OF_FASTER, 'a share of a faster reference (communication or '
                          'scaling efficiency) fell where its test\'s rates improved and none got '
                          'worse: the job is faster, its reference more so; said, not gated'),
                         (compare.ZERO_BEFORE, 'a figure of 0 before has no relative change')):
        if count(verdict):
            lines.append(f'{count(verdict)} {verdict}: {why}')
    few = count(compare.TOO_FEW) + count(compare.TOO_FEW_WORSE)
    if few:
        tests = sorted({c.key[1] for c in comparisons
                        if c.verdict in (compare.TOO_FEW, compare.TOO_FEW_WORSE)})
        lines.append(f'{few} with too few repetitions to estimate noise (fewer than '
                     f'{rule.min_repeats} on both sides), judged by the threshold alone, '
                     f'{count(compare.TOO_FEW_WORSE)} worse beyond it ({compare.TOO_FEW_WORSE}: '
                     f'fails the gate): run them with --repeat {max(rule.min_repeats, 3)} or more '
                     f'({listed(tests)})')
    one_sided = sorted({c.key[1] for c in comparisons if c.noise_of in ('before', 'after')})
    if one_sided:
        lines.append(f'{len(one_sided)} test(s) with too few repetitions on one side, judged '
                     "against the other side's spread (noise marked 'only'): "
                     f'{listed(one_sided)}')
    unrecorded = sum(c.key[3] == '' for c in comparisons)
    if unrecorded and any(c.key[3] for c in comparisons):
        lines.append(f'{unrecorded} with {NOT_RECORDED} (a perf log older than its '
                     'run_settings column): compared only with values that lack them too')
    for verdict in (compare.ONLY_BEFORE, compare.ONLY_AFTER):
        if count(verdict):
            lines.append(f'{count(verdict)} {verdict} (no value on the other side: not '
                         'measured, or new)')
    return lines


def repeats_note(few):
    """One line where the gate ran on fewer repetitions than it is measured at."""
    if not few or few[0] >= REPEAT:
        return []
    return [f'gated on as few as {few[0]} run(s) a side ({few[1]}, {few[2]}): the gate is measured '
            f'at --repeat {REPEAT}; fewer see less (at 3 a side one test 15-20 % slower can read '
            'within noise) and a side of one run against two is judged by the threshold alone where no like cells pool its spread, with more false '
            f'alarms (docs/performance-history.md); --require-repeats {REPEAT} refuses such a gate']


def defaults_note(filled):
    """One line on the settings one side's records lack, taken at their knob's default."""
    if not filled:
        return []
    return ['settings recorded on one side only (a knob newer than the runs), taken at their '
            'default: ' + ', '.join(f'{check} {name}={default}' for check, name, default in filled)]


def without_reference(samples):
    """Tests whose values had no reference to pass or fail against: ReFrame logs those as
    reference 0 without bounds (or null, in a dry run)."""
    return sorted({s.name for s in samples
                   if s.reference and s.reference[0] in (None, 0) and s.reference[1:] == (None, None)})



def stack_changes(before, after):
    """[(partition, image, change line)] for each image whose software stack differs."""
    found = []
    sides = [group(ss, lambda s: (s.partition, s.image)) for ss in (before, after)]
    for key in sorted(set(sides[0]) & set(sides[1])):
        stacks = [[stack.decode(s.stack) for s in side[key] if s.stack] for side in sides]
        changed = stack.changes(*stacks)
        if changed:
            rocm = any('rocm' in facts for facts in stacks[0] + stacks[1])
            found.append((*key, stack.change_line(changed, rocm)))
    return found


def write_report(directory, args, before, after, table, likely=()):
    """DIR/report.md and its plots; returns the report's path. What a reader acts on comes
    first: regressions, improvements, the software stack's changes, then the rest."""
    directory = Directory(directory, make=True, what='report folder')
    comparisons, rule = table.comparisons, table.rule
    lines = summary(comparisons, rule) + table.failed_lines()
    table = rows(comparisons, table)
    failed = lambda r: ' failed after' in r[-1]
    sections = {'Regressions and failed runs': [r for r in table if r[-1].split(';')[0] in ACT_ON or failed(r)],
                'Improvements': [r for r in table if r[-1].split(';')[0] == compare.IMPROVED and not failed(r)]}
    text = [f'# Performance: {args.after} against {args.before}', '',
            f'Written {datetime.now().astimezone():%Y-%m-%d %H:%M %Z} by `python -m mlcheck.commands.report`'
            f' from `{args.before}` ({len(before)} values) and `{args.after}` ({len(after)} values).',
            '', f'**{lines[0]}**', '']
    if likely:
        text += ['## Likely cause', '', *(f'- {line}' for line in likely), '']
    for title, body in sections.items():
        text += [f'## {title}', '', markdown_table(COLUMNS, body) if body else 'None.', '']
    text += ['## What changed in the software stack', '']
    changes = stack_changes(before, after)
    text += [f'- **{image}** on {partition}: {line}' for partition, image, line in changes] or [
        'Nothing that both sides recorded changed.']
    rest = [r for r in table if r not in sum(sections.values(), [])]
    text += ['', '## Everything else', '', *(f'- {line}' for line in lines[1:] + notes(after)), '',
             markdown_table(COLUMNS, rest) if rest else 'Nothing else was compared.', '',
             'Change: of the mean of the repetitions. Noise: standard deviation of the '
             'repetitions about their mean, both sides pooled, relative to the before mean '
             "(marked 'only' where one side has too few repetitions: that side's deviation, "
             'scaled to the spread expected of the other mean; see docs/performance-history.md).', '']
    for title, name in plot_all(directory, args.plot_var, before, after):
        text += [f'## {title}', '', f'![{title}]({name})', '']
    with directory:
        return write_escaped(directory, 'report.md', '\n'.join(text))


def notes(after):
    missing = without_reference(after)
    if not missing:
        return []
    return [f'{len(missing)} test(s) ran without a reference, so ReFrame could not pass or fail '
            f'their figures: record one with python -m mlcheck.commands.baseline ({listed(missing)})']


def plot_all(directory, plot_var, before, after):
    """Two figures per partition and check, of its plotted variable: against node count, and
    each test's repetitions over time; [(title, file name)]."""
    from mlcheck.history import plots
    plotted = {check: plot_var or min((s.var for s in ss if s.unit.endswith('/s')), default='')
               for check, ss in group(before + after, lambda s: s.check).items()}
    sides = {side: group([s for s in ss if s.var == plotted[s.check]],
                         lambda s: (s.partition, s.check))
             for side, ss in (('before', before), ('after', after))}
    colour_of = plots.colours({s.image for ss in (before, after) for s in ss})
    pictures = []
    for partition, check in sorted(set(sides['before']) | set(sides['after'])):
        of = {side: found.get((partition, check), []) for side, found in sides.items()}
        var = plotted[check]
        name = file_name('scaling', partition, check, suffix='.png')
        directory.written_by(name, lambda stream: plots.scaling(
            of, f'{check} on {partition}: {var} against node count', stream, colour_of))
        pictures.append((f'{check} on {partition}: {var} against node count', name))
        tests = sorted(set(group(of['before'] + of['after'], test_of_sample)))
        several = len({settings for _, _, settings in tests}) > 1
        panels = [(f'{_test_label(of, test)}' + (f'\n{test[2]}' if several else ''),
                   _image_of(of, test),
                   {side: [s for s in ss if test_of_sample(s) == test]
                    for side, ss in of.items()}) for test in tests]
        name = file_name('time', partition, check, suffix='.png')
        directory.written_by(name, lambda stream: plots.over_time(
            panels, f'{check} on {partition}: {var} of each repetition', stream, colour_of))
        pictures.append((f'{check} on {partition}: {var} of each repetition', name))
    return pictures


def _image_of(sides, test):
    return next(s.image for ss in sides.values() for s in ss if test_of_sample(s) == test)


def _test_label(sides, test):
    sample = next(s for ss in sides.values() for s in ss if test_of_sample(s) == test)
    return f'{sample.image}, {sample.num_nodes} node(s)'


def main(argv=None):
    args = parse_args(argv)
    return one_line_errors('mlcheck.commands.report', lambda: compare_and_report(args))


def compare_and_report(args):
    rule = Rule(parse_fraction(args.threshold, '--threshold'), args.noise_factor,
                args.min_repeats, parse_fraction(args.false_alarm, '--false-alarm'))
    selections = [parse_selection(args.before), parse_selection(args.after)]
    database = open_database(args, selections)
    # test cases without values count: a selection whose tests all failed names them
    ran_before = stopped_at_setup(load, selections[0], database)
    try:
        ran_after = stopped_at_setup(load, selections[1], database)
    except AllFailed as failed:
        print(f'likely cause: cannot tell: {failed}: nothing ran to compare; fails like a regression')
        return EXIT_REGRESSION
    if args.name:
        ran_before, ran_after = ([s for s in ss if any(name in s.name for name in args.name)]
                                 for ss in (ran_before, ran_after))
        if not ran_before and not ran_after:
            raise InputError(f'no test named like {" or ".join(map(repr, args.name))} in either selection')
    if ran_before and _records(ran_before) == _records(ran_after):
        # `mlcheck-report X latest` where X is the newest: a session against itself says nothing
        raise InputError(f'before ({args.before!r}) and after ({args.after!r}) select the same records '
                         f'({listed(sorted({s.source for s in ran_before}))}): nothing to compare; '
                         'name an older session or perf log as before')
    ran_before, ran_after, not_judged = _within_budget(selections, ran_before, ran_after)
    if not ran_before and not ran_after:
        print('\n'.join(not_judged))
        return EXIT_BAD_INPUT
    ran, filled = recorded_settings.with_defaults(ran_before + ran_after, RECORDED_DEFAULTS)
    ran_before, ran_after = ran[:len(ran_before)], ran[len(ran_before):]
    ran_before, trials = trial_runs.without_trial_runs(ran_before, ran_after)
    # the rows, the exit status and the likely cause, all from one table of the runs
    table = EvidenceTable.of(ran_before, ran_after, rule,
                             {name for names, _ in slurm_partitions(args).values() for name in names},
                             partition_sizes(args))
    comparisons = table.comparisons
    few = table.fewest_runs()
    if few and args.require_repeats and few[0] < args.require_repeats:
        raise InputError(f'--require-repeats {args.require_repeats}: {few[1]} has {few[0]} run(s) '
                         f'{few[2]}; run both sides with --repeat {args.require_repeats}')
    before, after = valued(ran_before), valued(ran_after)
    likely = table.cause_lines()
    text = ['\n'.join(not_judged + likely), '', text_table(COLUMNS, rows(comparisons, table)), '',
            '\n'.join(summary(comparisons, rule) + table.failed_lines() + repeats_note(few)
                      + defaults_note(filled)
                      + trial_runs.left_out_lines(trials) + notes(after))]
    text += [f'stack of {image} on {partition}: {line}' for partition, image, line in stack_changes(before, after)]
    # the report's files first: a reader that stops reading (| head) must not cost them
    if args.output:
        text.append(f'report: {write_report(args.output, args, before, after, table, not_judged + likely)}')
    print('\n'.join(text))     # a closed pipe ends only the output (common.one_line_errors)
    # a test not judged may be the regression: never a pass
    return table.exit_status() or (EXIT_BAD_INPUT if not_judged else 0)


def _within_budget(selections, before, after):
    """(before, after, [line]) less every record of a test that lost any to the node-list budget,
    each such test named NOT JUDGED: left with the records it kept, it read as NO RESULT AFTER, a
    retired test to leave out (the fourth security pass, G1). Each side keeps first the node lists
    whose hosts the other side names, which a planted list of new names cannot undercut."""
    sides, lost = [], {}
    for selection, own, other in ((selections[0], before, after), (selections[1], after, before)):
        known = frozenset(hostlist.names_of(s.nodelist for s in other if s.nodelist))
        kept, dropped = within_budget(own, f'selection {visible(selection.spec)!r}', known)
        sides.append(kept)
        for s in dropped:
            lost[test_of_sample(s)] = lost.get(test_of_sample(s), 0) + 1
    if not lost:
        return before, after, []
    before, after = ([s for s in side if test_of_sample(s) not in lost] for side in sides)
    return before, after, [f'{NOT_JUDGED}: {name} on {partition}: {count} record(s) left out by the node-list '
                           'budget (named on stderr); neither side of it is compared'
                           for (partition, name, _), count in sorted(lost.items())]


NOT_JUDGED = 'NOT JUDGED'

# ReFrame's exception for a session ended from a check's hook (harness.reframe_api.stop_session):
# a -S name no check knows, before any job ran
SETUP_STOP = 'ForceExitError'


def _records(samples):
    """What identifies the records a selection took (a NaN value is no use here: never equal): a
    perf log by its file, however spelled (pl/x.log, ./pl/x.log, its absolute path, a link or d1/.:
    the fourth security pass compared them with themselves), a stored session by its id."""
    files = {source: _file_of(source) for source in {s.source for s in samples}}
    return frozenset((files[s.source], s.partition, s.name, s.var, s.time, s.jobid, s.nodelist) for s in samples)


def _file_of(source):
    """(device, inode) of the perf log file `source` names; else `source` (a session's id)."""
    try:
        found = os.stat(source)
    except (OSError, ValueError):
        return source
    return (found.st_dev, found.st_ino)


def stopped_at_setup(load, selection, database):
    """The selection's samples; a session that stopped on a config error before any job ran
    (a mistyped -S) is bad input, not a regression: nothing of the upgrade ran."""
    try:
        return load(selection, database, with_failed=True, budget=None)     # _within_budget
    except AllFailed as failed:
        if SETUP_STOP not in str(failed):
            raise
        raise InputError(f'selection {selection.spec!r} is a session that stopped before any job ran '
                         f'({failed}): not a run to compare; name another session '
                         '(reframe --list-stored-sessions)') from None


if __name__ == '__main__':
    sys.exit(main())
