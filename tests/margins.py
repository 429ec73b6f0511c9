"""Each judged figure's margin in a test run (issue 51), so that a run that passed narrowly says so.

`bin/run-tests` points MLCHECK_MARGINS at a file under its run's temporary directory; every ReFrame
run of the tests (reframe_runner.run_reframe) records there the figures ReFrame judged against a
reference (its perf log: the value, and the floor or ceiling the reference and its bound make), and
the slowest rank's fraction also against the partition's slow-rank limit, which sanity applies;
a test that judges a figure itself records it with `record`. At the end `bin/run-tests` prints
the table (`python tests/margins.py FILE`): per figure the narrowest margin of the run, and the
figures that ended below their limit, which the fault tests do on purpose. Without the variable
(a test run by hand) nothing is recorded.
"""

import json
import os
import sys

ENV = 'MLCHECK_MARGINS'


def record(figure, value, limit, higher=True, test=None):
    """Figure `figure` was judged: `value` against `limit`, passing above it where `higher` (a
    floor), else below it (a ceiling, or a broken case that must stay below the rule's limit)."""
    path = os.environ.get(ENV)
    if not path or not isinstance(value, (int, float)) or not isinstance(limit, (int, float)):
        return
    test = test or os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]
    line = json.dumps({'test': test, 'figure': figure, 'value': value, 'limit': limit, 'higher': higher})
    with open(path, 'a') as f:      # appended whole, one line per write
        f.write(line + '\n')


def record_perflogs(perflogdir, period, slow_rank_limit=None):
    """Record every figure ReFrame judged in the perf logs under `perflogdir` in `period` (Unix
    seconds, from and before: a directory that several runs share holds the others' lines too);
    the slowest rank's fraction also against `slow_rank_limit` (the partition's, which its sanity
    applies)."""
    from mlcheck.history.perflog import perflog_files, read_perflog
    if not os.environ.get(ENV) or not os.path.isdir(perflogdir):
        return
    for path in perflog_files(str(perflogdir)):
        for sample in read_perflog(path, period=period):
            figure = f'{sample.name.split()[0]} {sample.var} at {sample.num_nodes} node(s)'
            reference, lower, upper = (sample.reference + (None, None, None))[:3]
            if isinstance(reference, (int, float)):
                if isinstance(lower, (int, float)):
                    record(figure, sample.value, reference * (1 + lower))
                if isinstance(upper, (int, float)):
                    record(figure, sample.value, reference * (1 + upper), higher=False)
            if sample.var == 'slowest_rank_fraction' and slow_rank_limit:
                record(f'{figure}, slow-rank rule', sample.value, slow_rank_limit)


def margin(entry):
    """How far the value is on the passing side of its limit, as a fraction of the limit."""
    value, limit = entry['value'], entry['limit']
    if not limit:
        return float('inf') if entry['higher'] else -value
    return value / limit - 1 if entry['higher'] else 1 - value / limit


def table(entries):
    """The lines bin/run-tests prints: per figure its narrowest passing margin, narrowest first,
    then the figures that ended beyond their limit."""
    passed, beyond = {}, []
    for entry in entries:
        if margin(entry) < 0:
            beyond.append(entry)
            continue
        group = passed.setdefault(entry['figure'], [])
        group.append(entry)
    lines = [f'run-tests: each judged figure\'s narrowest margin in this run ({len(entries)} judged; '
             f'margin = how far the value is inside its limit)']
    for figure, group in sorted(passed.items(), key=lambda fg: min(map(margin, fg[1]))):
        worst = min(group, key=margin)
        side = '>=' if worst['higher'] else '<='
        note = '  NARROW' if margin(worst) < 0.1 else ''
        lines.append(f'  {margin(worst):7.1%}  {figure}: {worst["value"]:.4g} against {side} '
                     f'{worst["limit"]:.4g} ({len(group)} judged; narrowest in {worst["test"]}){note}')
    if beyond:
        lines.append('run-tests: figures beyond their limit (the fault tests\' on purpose; '
                     'anywhere else a failure of its own):')
        for entry in sorted(beyond, key=margin):
            side = '>=' if entry['higher'] else '<='
            lines.append(f'  {margin(entry):7.1%}  {entry["figure"]}: {entry["value"]:.4g} against '
                         f'{side} {entry["limit"]:.4g} in {entry["test"]}')
    return lines


def main(path):
    try:
        with open(path) as f:
            entries = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        entries = []
    if not entries:
        print('run-tests: no judged figure recorded in this run (margins)')
        return
    print('\n'.join(table(entries)))


if __name__ == '__main__':
    main(sys.argv[1])
