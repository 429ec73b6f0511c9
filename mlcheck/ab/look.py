"""The A/B job's look between rounds: `python -m mlcheck.ab.look ROUND ...`, run by the job script
in its stage directory after the rounds of each look (rounds.round_lines), prints `stop` when the
rule finds B `slower` on the rounds so far (a step that failed stops the job too: the verdict can
only be `inconclusive`), else `go on`, and adds the look's line to ab/looks.txt. It judges as the check's
verdict does afterwards (rule.judge over the same looks), so the job stops where that verdict is
decided; where it cannot run, the job runs every round, and the verdict is the same.
"""

import argparse

from mlcheck.ab import rounds, rule

LOOKS_FILE = f'{rounds.DIR}/looks.txt'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('round', type=int, help='the rounds run so far')
    parser.add_argument('--fact', required=True, help="the result fact compared (the check's main rate)")
    parser.add_argument('--threshold', type=float, required=True)
    parser.add_argument('--most', type=int, required=True, help='the most rounds the job may run')
    parser.add_argument('--false-slower', type=float, default=rule.FALSE_SLOWER)
    args = parser.parse_args(argv)
    names = {rounds.A: 'A', rounds.B: 'B'}
    a_rates, b_rates, failed = rounds.judged_rates(rounds.read_steps('.', args.round, names), args.fact)
    failed = [*rounds.warm_up_problems('.', names), *failed]
    verdict = rule.judge(a_rates, b_rates, args.threshold, failed=failed, most=args.most,
                         false_slower=args.false_slower, going_on=True)
    with open(LOOKS_FILE, 'a') as f:
        f.write(f'after round {args.round}: {verdict.reason}\n')
    stop = verdict.verdict == 'slower' or bool(failed)
    print('stop' if stop else 'go on')


if __name__ == '__main__':
    main()
