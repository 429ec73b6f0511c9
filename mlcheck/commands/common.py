"""The command-line plumbing that mlcheck-report, mlcheck-baseline and mlcheck-nodes share: their argument
parser with the selection forms, the source arguments (-C, --db) and the opening of the results
database from them, fractions as a person types them, the terminal table, the exit codes and
errors as one line on stderr, output that a closed pipe (`| head`) ends without ending the command.
"""

import argparse
import math
import os
import re
import shlex
import sys

from mlcheck import REPO
from mlcheck.errors import InputError
from mlcheck.history.database import ResultsDatabase, database_of
from mlcheck.history.selection import SELECTION_FORMS
from mlcheck.visible import shown_safely, visible

DEFAULT_CONFIG = os.path.join(REPO, 'config', 'simulated.py')
EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_INTERNAL = 1, 2, 3


def as_typed(prog):
    """The command's name as its user typed it: the console script (`mlcheck-report`) where that
    is what ran, else `prog` (`python -m mlcheck.commands.report`, or the module in a test)."""
    typed = os.path.basename(sys.argv[0]) if sys.argv else ''
    return typed if typed.startswith('mlcheck-') else prog


def argument_parser(prog, description):
    """A command's parser, its help ending with the forms of a selection."""
    return argparse.ArgumentParser(prog=as_typed(prog), description=description,
                                   epilog='selections:\n' + SELECTION_FORMS,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def add_source_arguments(parser):
    parser.add_argument('-C', '--config', default=None,
                        help='ReFrame config of the site, whose results database is read '
                             '(default: $RFM_CONFIG_FILES, else config/simulated.py)')
    parser.add_argument('--system', default=None,
                        help="the system whose results database is read, where the config holds "
                             "several sites' (default: $RFM_SYSTEM, else the one this host's name "
                             'matches, as ReFrame picks it)')
    parser.add_argument('--db', default=None,
                        help='results database file (default: $RFM_SQLITE_DB_FILE, else the '
                             "config's storage)")


def config_file(args):
    """The site config the command reads: -C, else ReFrame's $RFM_CONFIG_FILES, else the simulated one."""
    config = args.config or (os.environ.get('RFM_CONFIG_FILES', '').split(':')[0]) or DEFAULT_CONFIG
    if not os.path.isfile(config):
        raise InputError(f'config file not found: {config}')
    return config


def open_database(args, selections):
    """The results database, if any selection needs it."""
    if not any(s.stored for s in selections):
        return None
    config = config_file(args)
    system = getattr(args, 'system', None)
    return ResultsDatabase(args.db or database_of(config, system), config, system)


def parse_fraction(text, option):
    """A fraction as a person types it: '5%' or '0.05'; an InputError for anything else,
    a bare number of 1 or more included (is '5' meant as 5 % or as 500 %?)."""
    text = str(text).strip()
    percent = text.endswith('%')
    try:
        value = float(text.removesuffix('%'))
    except ValueError:
        value = math.nan
    if percent:
        value /= 100
    if not 0 < value < 1:
        raise InputError(f'{option} {text}: expected a fraction between 0 and 1 (0.05) or a '
                         'percentage (5%)')
    return value


def text_table(header, body):
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    line = lambda r: '  '.join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip()
    return '\n'.join([line(header), line(['-' * w for w in widths]), *map(line, body)])


class ReaderMayLeave:
    """sys.stdout for a command whose reader may stop reading (`| head`): once the pipe is
    closed the rest of the output goes nowhere, and the command goes on to write its files and
    return its exit status (Python would end it with BrokenPipeError, or exit 120 when the last
    flush fails)."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._reader_left()
            return len(text)

    def flush(self):
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._reader_left()

    def _reader_left(self):
        """Point the descriptor at /dev/null: what is still buffered, and all later output, goes
        there without another error."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def one_line_errors(command, run):
    """run() with its errors as one line on stderr and an exit code that is never the
    regression code: a crash must not read as a verdict; a reader that closes the pipe ends the
    output, never the files or the exit status. All it prints has its control characters
    escaped (data from others must not drive the terminal: mlcheck.visible)."""
    command = as_typed(command)
    stdout, sys.stdout = sys.stdout, ReaderMayLeave(sys.stdout)
    try:
        with shown_safely():
            return _one_line_errors(command, run)
    finally:
        sys.stdout.flush()
        sys.stdout = stdout


def _one_line_errors(command, run):
    try:
        return run()
    except InputError as err:
        print(f'{command}: error: {visible(str(err))}', file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as err:   # noqa: BLE001 - anything else is a bug, said in one line
        where = err.__traceback__
        while where.tb_next:
            where = where.tb_next
        print(f'{command}: internal error: {type(err).__name__}: {visible(str(err))} '
              f'({os.path.basename(where.tb_frame.f_code.co_filename)}:{where.tb_lineno})',
              file=sys.stderr)
        return EXIT_INTERNAL


def slurm_partitions(args):
    """{ReFrame's system:partition: (the Slurm partitions its `access` options name (--partition=X,
    -p X, X=a,b: every one), the features its --constraint requires (gpu, gpu&hbm80g) or None)}
    of the site config the command reads; {} where it cannot be read. A constraint of other
    operators (|, [, *) selects nodes no set of features says, and is not read."""
    from mlcheck.history.database import site_configuration
    try:
        site = site_configuration(config_file(args))
    except (InputError, OSError, ImportError):    # none to read: the fallbacks
        return {}
    found = {}
    for system in site.get('systems', []):
        for part in system.get('partitions', []):
            options = access_options(part.get('access', []))
            named = tuple(n for value in options.get('partition', []) for n in value.split(',') if n)
            constraint = (options.get('constraint') or [''])[-1]
            features = (frozenset(constraint.split('&')) if re.fullmatch(r'[\w.-]+(&[\w.-]+)*', constraint)
                        else None)
            if named or features:
                found[f'{system.get("name")}:{part.get("name")}'] = (named, features)
    return found


def partition_sizes(args):
    """{ReFrame's system:partition: the nodes it has at least (extras.mlcheck.max_nodes, the most
    one job may have)} of the site config the command reads; {} where it cannot be read. The
    report's separating run goes to nodes the records never show only where these say the
    partition has them (issue 49: a 16-node partition's idle runs show nid001-004 alone)."""
    from mlcheck.history.database import site_configuration
    try:
        site = site_configuration(config_file(args))
    except (InputError, OSError, ImportError):    # none to read: not known
        return {}
    return {f'{system.get("name")}:{part.get("name")}': part['extras']['mlcheck']['max_nodes']
            for system in site.get('systems', []) for part in system.get('partitions', [])
            if isinstance(((part.get('extras') or {}).get('mlcheck') or {}).get('max_nodes'), int)}


# the options of `access` read here, as sbatch reads them with getopt_long: long with = or a word
# after, by any prefix no other sbatch option shares (--part: --parsable shares --par; --cons:
# --container, --contiguous share --con; Slurm's sbatch(1)), short with the value joined or a word
# after, after a run of grouped flags that take no value (-Qpsim: -Q, then -p sim). Issue 48's
# third security pass, F5 (a regex read `--cpus-per-task=2` as the partition `er-task`), and the
# fourth, A1 (`--part=sim`, `-Qpsim`).
ACCESS_LONG = {'partition': ('partition', len('part')), 'constraint': ('constraint', len('cons'))}
ACCESS_SHORT = {'p': 'partition', 'C': 'constraint'}
# sbatch's short options that take no value (-h -H -O -Q -s -u -v -V -W), and -I and -k, whose
# value is optional and joined: read as flags, so that more is read as a partition (the safe side)
FLAGS = set('hHIkOQsuvVW')


def access_options(access):
    """{'partition': [X, ...], 'constraint': [...]} of a ReFrame partition's `access` list: each
    entry split into words as a shell does. An entry that does not split (an unbalanced quote,
    whose characters Slurm's #SBATCH reader drops) names, as far as is known, each of its words
    as a partition (the fourth security pass, A1): more names to refuse, never fewer."""
    words, found = [], {}
    for entry in access:
        try:
            words += shlex.split(str(entry))
        except ValueError:
            unquoted = re.sub('[\'"]', '', str(entry))
            found.setdefault('partition', []).extend(re.split(r'[\s=]+', unquoted))
            words += unquoted.split()
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ''
        if word.startswith('--'):
            name, eq, value = word[2:].partition('=')
            option = next((key for full, (key, shortest) in ACCESS_LONG.items()
                           if len(name) >= shortest and full.startswith(name)), None)
            if option:
                found.setdefault(option, []).append(value if eq else following)
        elif word.startswith('-'):
            for at, letter in enumerate(word[1:], 1):
                if letter in ACCESS_SHORT:
                    found.setdefault(ACCESS_SHORT[letter], []).append(word[at + 1:] or following)
                    break
                if letter not in FLAGS:
                    break       # an option that takes a value: the rest of the word is it
    return found
