"""Each program's knobs, written once: the program's flags (default, help, what they accept) and
the ReFrame check's knobs of the same name are both made from these tables, so a program run by
hand with no arguments measures what its check measures.

The programs import this file as they import ddp_common (this directory is on their sys.path);
the checks read it through mlcheck.harness.knobs, which loads this same file by path (inside
the images mlcheck is not installed). Standard library only. Each rank 0 states the values it
ran as a `settings` fact (stated()), and the check's sanity compares them with what it asked.
"""

import argparse
import math
from dataclasses import dataclass

TRUE, FALSE = ('true', 'yes', 'on', '1'), ('false', 'no', 'off', '0')
DERIVED = 'derived'     # Knob.flag: the program's flag is the knob's name, `--batch-size` for batch_size


@dataclass(frozen=True)
class Knob:
    default: object                 # its type is the knob's type: bool, int, float or str
    help: str = ''
    choices: tuple = ()
    minimum: float = None
    maximum: float = None
    below: float = None             # values must be smaller than this
    at_least: str = None            # the name of a knob of the same check this one is never below
    # the program's flag(s) in the check's script_arguments(): DERIVED, a flag, a tuple of flags
    # (each given the value; the first is the knob's own) or None: not passed to the program (a
    # limit used by judging, a setting the base classes pass their own way). A bool knob is its
    # flag when true, `--no-` and its flag when false where its default is true.
    flag: object = DERIVED
    omit_default: bool = False      # the default is not passed (it is the program's own default too)
    # what a run ran before this knob existed, where that is not its default (a run recorded then
    # lacks the knob: mlcheck.history.settings compares it as this value); None: the default
    before_it_existed: object = None

    @property
    def kind(self):
        return type(self.default)

    def flags(self, name):
        """The program's flags of the knob called `name` (a tuple, empty when not passed)."""
        if self.flag == DERIVED:
            return ('--' + name.replace('_', '-'),)
        if self.flag is None:
            return ()
        return (self.flag,) if isinstance(self.flag, str) else tuple(self.flag)

    def arguments(self, name, value):
        """The program's arguments for `value` of the knob called `name`."""
        if self.kind is bool:
            return [flag if value else '--no-' + flag[2:] for flag in self.flags(name)] \
                if value or self.default else []
        if self.omit_default and value == self.default:
            return []
        return [word for flag in self.flags(name) for word in (flag, str(value))]

    def accepts(self):
        """What the knob accepts, in words."""
        if self.choices:
            return 'one of ' + ', '.join(map(str, self.choices))
        words = {bool: 'true or false', int: 'an integer', float: 'a number', str: 'text'}[self.kind]
        bounds = ' and '.join(f'{sign} {bound}' for sign, bound in (
            ('>=', self.minimum), ('<=', self.maximum), ('<', self.below)) if bound is not None)
        return f'{words} {bounds}' if bounds else words

    def parse(self, value, where, from_text=False):
        """`value` as the knob's type, converted from text if `from_text` (-S, a flag), else as it
        is in config; a ValueError naming `where` (e.g. '-S epochs') and what the knob accepts."""
        try:
            parsed = self._convert(value, from_text)
        except ValueError:
            parsed = None
        if parsed is None or (isinstance(parsed, float) and not math.isfinite(parsed)) or \
                (self.choices and parsed not in self.choices) or \
                (self.minimum is not None and parsed < self.minimum) or \
                (self.maximum is not None and parsed > self.maximum) or \
                (self.below is not None and parsed >= self.below):
            raise ValueError(f'{where}={value!r}: expected {self.accepts()}')
        return parsed

    def _convert(self, value, from_text):
        kind = self.kind
        if from_text and isinstance(value, str) and kind is not str:
            if kind is bool:
                word = value.strip().lower()
                return True if word in TRUE else False if word in FALSE else None
            return kind(value)
        if isinstance(value, bool) != (kind is bool):
            return None
        if kind is float and isinstance(value, int):
            return float(value)
        return value if isinstance(value, kind) else None


def add_arguments(parser, knobs):
    """Each knob's own flag (its first) as an argument of `parser`: its default, help and what it
    accepts, a bad value refused as the check refuses it. Returns the parser."""
    for name, knob in knobs.items():
        flag = knob.flags(name)[0]
        if knob.kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=knob.default,
                                help=knob.help)
            continue

        def value(text, knob=knob, flag=flag):
            try:
                return knob.parse(text, flag, from_text=True)
            except ValueError as err:
                raise argparse.ArgumentTypeError(str(err)) from None
        parser.add_argument(flag, type=value, default=knob.default, help=knob.help,
                            choices=knob.choices or None, metavar=None if knob.choices else name.upper())
    return parser


def stated(args, knobs):
    """{knob: the value the program runs} of `args` parsed by add_arguments(): the `settings` fact."""
    return {name: getattr(args, knob.flags(name)[0][2:].replace('-', '_')) for name, knob in knobs.items()}


# --- the tables: one per program, each knob a program flag (a check's knobs that only judging
# --- reads, flag=None, stay in the check)

STEPS = Knob(0, 'timed steps per rank and epoch (0: one pass over the data on one node), the same at '
                'every node count', minimum=0)



def solo_steps(default):
    """The solo phase's length (../solo_phase.py): 0 runs none, and the check then judges no
    slow rank and gives no per-rank figures (an A/B step needs neither: a slow rank slows both
    images' steps alike, and its solo phase would double the step)."""
    return Knob(default, 'timed steps of each rank alone, before the timed epochs (0: none, and no '
                         'per-rank figures or slow-rank rule)', minimum=0, omit_default=True)


MNIST = {
    'epochs': Knob(10, 'epochs; the first is warm-up, not counted in the throughput', minimum=1),
    'batch_size': Knob(64, 'samples per rank and step', minimum=1),
    'solo_steps': solo_steps(30),
}

CIFAR100 = {
    'model': Knob('resnet152', 'torchvision ResNet',
                  choices=('resnet18', 'resnet50', 'resnet101', 'resnet152')),
    'batch_size': Knob(128, 'samples per GPU and step', minimum=1),
    'epochs': Knob(3, 'epochs; the first is reported apart from the steady state', minimum=1),
    'steps': STEPS,
    'warmup_steps': Knob(10, 'untimed steps before epoch 1', minimum=0),
    'workers': Knob(4, 'data-loader workers per rank', minimum=0),
    'solo_steps': solo_steps(10),
    'data': Knob('device', 'device: the decoded set on the GPU, augmented there; loader: '
                           "torchvision's DataLoader, augmenting in its workers",
                 choices=('device', 'loader'), before_it_existed='loader'),
    'augment': Knob(True, 'random crop (4-pixel padding) and horizontal flip', before_it_existed=False),
    'amp': Knob(False, 'bf16 autocast'),
    'channels_last': Knob(False, 'channels_last memory format'),
    'mode': Knob('ddp', 'ddp: one rank per GPU; dp: one process, DataParallel over the '
                        "node's GPUs; single: one process, one GPU", choices=('ddp', 'dp', 'single'),
                 omit_default=True),
}

INTERCONNECT = {
    'min_bytes': Knob(8, 'smallest message of the sweep, and the one whose all_reduce time is '
                         'the latency (bytes; at least one float32 element)', minimum=4,
                      flag=('--min-bytes', '--latency-bytes')),
    'max_bytes': Knob(1 << 30, 'largest message of the sweep (bytes)', minimum=1, at_least='min_bytes'),
    'factor': Knob(4, 'size step of the sweep', minimum=2),
    'p2p_bytes': Knob(1 << 28, 'message of the node-pair exchange (bytes)', minimum=1),
    'pair_partners': Knob(3, 'partners each node meets in the node-pair exchange, in rounds '
                             'of disjoint pairs that exchange at once', minimum=1),
    'pair_ranks': Knob(0, 'ranks of each node in the node-pair exchange (0: every rank)', minimum=0),
    'max_iters': Knob(100, 'timed iterations per size at most (large sizes get fewer: about '
                           '8 x max_bytes each)', minimum=1),
    'blocks': Knob(5, 'timed blocks of iterations per size; the median block counts', minimum=1),
    'warmup_iters': Knob(5, 'untimed calls per size', minimum=0),
    # every timed block lasts 1/(1-slowdown) times as long: a known loss, to show what the
    # performance history flags
    'slowdown': Knob(0.0, 'fraction of bandwidth given up on purpose', minimum=0, below=1,
                     omit_default=True),
}
