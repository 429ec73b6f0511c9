"""Performance samples: the Sample (one value of one test case run), what is compared like with
like (its key, test_of), and grouping (which way a figure is better: mlcheck.figures.directions). Every reader (perf logs, the
results database) produces Samples; the comparison, the report and the baseline consume them.
"""

import functools
import hashlib
import re
from collections import defaultdict
from dataclasses import dataclass

from mlcheck.ab import rounds
from mlcheck.visible import visible

NOT_RECORDED = 'settings not recorded'   # how values without a settings column are labelled


@dataclass(frozen=True)
class Sample:
    """One performance value of one test case run."""
    partition: str        # system:partition
    name: str             # test name with its parameters, e.g. 'Check %image=x %num_nodes=2'
    image: str
    num_nodes: int
    var: str              # performance variable
    value: float          # None: the test case ran and failed before its performance stage
    unit: str
    time: float           # job completion, Unix seconds
    jobid: str = ''
    nodelist: str = ''
    reference: tuple = ()  # (value, lower, upper) as ReFrame applied them
    result: str = ''
    source: str = ''      # session UUID or perf log path
    settings: str = ''    # the run's settings that change a figure ('' where not recorded)
    stack: str = ''       # its software stack (mlcheck.figures.stack; '' where not recorded)
    problem: str = ''     # why the test case failed, where the record says (the results database)
    num_tasks: int = 0    # its ranks, where the record says (the results database): 0 unknown
    machine_speed: float = None   # the machine's speed its references were brought to, if recorded

    def __post_init__(self):
        # every text of a record comes from data others write: its control characters (a newline
        # that would start a forged `scontrol update ... State=RESUME` line, a tab, an escape)
        # are escaped here, the one place every reader's records pass, so that no value can
        # start or hide a line of any output (issue 48)
        for field in _TEXT_FIELDS:
            text = getattr(self, field)
            if isinstance(text, str) and text != (shown := visible(text)):
                object.__setattr__(self, field, shown)

    @property
    def key(self):
        """What is compared like with like: the test, its settings (its inputs: run_inputs()) and
        the variable. The one place the comparison key is built."""
        return (self.partition, self.name, self.var, run_inputs(self.settings))

    @property
    def system(self):
        return self.partition.split(':')[0]

    @property
    def check(self):
        """The test's class name, which keys its references."""
        return self.name.split()[0]


_TEXT_FIELDS = ('partition', 'name', 'image', 'var', 'unit', 'jobid', 'nodelist', 'result', 'source',
                'settings', 'stack', 'problem')


@functools.lru_cache(maxsize=4096)     # a report asks once a record a comparison reads
def run_inputs(settings):
    """The recorded settings of a run that are its inputs, by which every comparison (and the
    evidence table's runs, mlcheck.history.runs) is keyed: the one place that decides it. An
    output recorded among them (an older A/B run's rounds and verdict, rounds.NOT_INPUTS) is
    taken out, so that runs of one image against one other are compared whatever their verdict:
    a fixed image's ab_ratio (0.82 -> 1.00) with the broken one's."""
    items = settings.split(';')
    kept = [item for item in items if item.partition('=')[0] not in rounds.NOT_INPUTS]
    return settings if len(kept) == len(items) else ';'.join(kept)


def recorded(text):
    """A column that older perf logs lack, or that ReFrame wrote as null: ''."""
    return '' if text in (None, 'null', 'None', '<undefined>') else text


def valued(samples):
    """The samples that hold a value (not those of test cases that failed before it)."""
    return [s for s in samples if s.value is not None]


def test_of(key):
    """(partition, name, settings) of a sample's or comparison's key."""
    partition, name, _, settings = key
    return partition, name, settings


def test_of_sample(sample):
    return test_of(sample.key)


def group(samples, by):
    """{by(sample): [samples]} in sample order."""
    groups = defaultdict(list)
    for s in samples:
        groups[by(s)].append(s)
    return dict(groups)


def slug(text):
    return re.sub(r'[^A-Za-z0-9.]+', '-', text).strip('-')


MAX_NAME = 200      # of a file written for a test (a name may hold 255 bytes; the scratch adds some)


def file_name(*parts, suffix):
    """The slugs of `parts` joined by '-', then `suffix`: a name a file system takes, its parts
    cut short and a digest of them kept where they would be longer than MAX_NAME (a test whose
    image is a long path: ENAMETOOLONG stopped -o before the verdict was printed)."""
    name = '-'.join(map(slug, parts))
    if len(name) + len(suffix) > MAX_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:12]
        name = f'{name[:MAX_NAME - len(suffix) - 13]}-{digest}'
    return name + suffix


def listed(names, most=4):
    """'a, b, c, d and 2 more': names in a line of the report."""
    return ', '.join(names[:most]) + (f' and {len(names) - most} more' if len(names) > most else '')
