"""The rule that tells regressions from noise: its settings (Rule), one judged Comparison per test,
settings and performance variable of two selections' samples, the verdicts and which of them
fail the gate, and the statistics the rule judges with (the noise of the repetitions).
"""

import functools
import math
import statistics
from dataclasses import dataclass, field

from mlcheck.errors import InputError
from mlcheck.figures.directions import SHARES, worse_by
from mlcheck.history.samples import group, test_of

REGRESSION, IMPROVED, WITHIN_NOISE, UNCHANGED, TOO_FEW = (
    'REGRESSION', 'improved', 'within noise', 'unchanged', 'too few repetitions')
# neither side has the repetitions for a spread, and after is worse by more than the threshold:
# nothing says the change is noise, so it fails the gate
TOO_FEW_WORSE = 'WORSE, TOO FEW TO JUDGE'
ONLY_BEFORE, ONLY_AFTER = 'only before', 'only after'
# a test with values before and none at all after: it broke outright, the worst regression
NO_RESULT = 'NO RESULT AFTER'
# a figure that is neither better higher nor lower (power: mlcheck.figures.directions) and moved
# beyond the rule: shown, never failing
CHANGED = 'changed (informational)'
# a share of a faster reference (mlcheck.figures.directions.SHARES) that fell where its test's own
# rates improved and none of its figures got worse: the job is faster, its reference more so
SHARE_OF_FASTER = 'lower share, faster job'
# a figure of 0 before: no relative change exists
ZERO_BEFORE = 'zero before: not comparable'
# after measured in a unit that cannot be converted to before's: the figure is not the same one
UNIT_CHANGED = 'UNIT CHANGED: not compared'
# ... or ran after only with other settings (epochs, model...): it cannot be said to be as fast
OTHER_SETTINGS = 'OTHER SETTINGS AFTER'
# verdicts that fail the gate
FAILING = (REGRESSION, NO_RESULT, OTHER_SETTINGS, TOO_FEW_WORSE, UNIT_CHANGED)

# units of the same quantity, in one base unit each: a value is converted to the other side's unit
SCALES = [{'us': 1e-6, 'ms': 1e-3, 's': 1, 'min': 60, 'h': 3600},
          {'B': 1, 'KB': 1e3, 'MB': 1e6, 'GB': 1e9, 'TB': 1e12, 'KiB': 2**10, 'MiB': 2**20, 'GiB': 2**30},
          {'MB/s': 1e6, 'GB/s': 1e9, 'MiB/s': 2**20, 'GiB/s': 2**30}]


@dataclass(frozen=True)
class Rule:
    threshold: float = 0.05    # relative change that matters
    noise_factor: float = 2.0  # a change must also exceed this many times the noise
    min_repeats: int = 2       # repetitions a side needs for a noise estimate
    # the chance that an unchanged session has any figure judged changed: a report judges some
    # hundred figures, each on a spread of 3-5 repetitions, so each one's level is this over
    # how many were judged (judge_together)
    false_alarm: float = 0.01

    def __post_init__(self):
        # a standard deviation needs two values on a side; a bound of 1 or more is no bound
        if self.min_repeats < 2:
            raise InputError(f'--min-repeats {self.min_repeats}: the noise estimate needs at '
                             'least 2 repetitions on each side')
        if self.noise_factor < 0:
            raise InputError(f'--noise-factor {self.noise_factor:g}: expected 0 or more')
        if not 0 < self.false_alarm < 1:
            raise InputError(f'--false-alarm {self.false_alarm:g}: expected a fraction above 0 '
                             'and under 1 (1% or 0.01)')


@dataclass
class Comparison:
    key: tuple
    unit: str
    image: str
    num_nodes: int
    before: list = field(default_factory=list)   # values
    after: list = field(default_factory=list)
    verdict: str = ''
    change: float = None    # relative change of the mean, after against before
    worse: float = None     # the change in the direction that is worse (positive: slower)
    noise: float = None     # the spread the change is judged against, relative (see judge)
    noise_of: str = ''      # 'both' sides pooled, or the one side ('before', 'after') that has it
    failed_after: int = 0   # test case runs after that ended without a value
    failed_before: int = 0  # ... and before (a baseline's failed repetition: said, not gated)
    dof: int = 0            # the degrees of freedom of the noise
    pooled: bool = False    # the noise is its like cells' (pool_noise), wider than its own runs'
    p: float = None         # the chance of a change this far (this way) from the noise alone
    alone: float = None     # the p a change needs to fail the gate where it moves alone (judge_together)
    units_after: set = field(default_factory=set)   # after's units that are not before's

    @property
    def mean_before(self):
        return statistics.fmean(self.before) if self.before else None

    @property
    def mean_after(self):
        return statistics.fmean(self.after) if self.after else None


def relative_noise(before, after):
    """Standard deviation of the repetitions about their side's mean, both sides pooled,
    relative to the before mean."""
    dof = len(before) + len(after) - 2
    means = [(side, statistics.fmean(side)) for side in (before, after)]
    squares = sum((v - mean) ** 2 for side, mean in means for v in side)
    return math.sqrt(squares / dof) / statistics.fmean(before)


# a run this many robust spreads (and more than the threshold) from its side's median is not
# like the others (a slow node among healthy ones); 5: a healthy run of 4-5 that far from the
# median of its side is rarer than 1 in 1,000 (bench/gate_false_alarms.py measures the gate)
FAR = 5.0
LIKE_FROM = 4      # fewer runs on a side cannot tell a far run from a wide spread


def like_runs(values, threshold):
    """The runs of one side that are alike: all of them, less a minority of two or more that lie
    more than FAR robust spreads (1.4826 x the median absolute deviation) and more than the
    threshold from the side's median: runs on a slow node (the cause line's cells see them), or
    on nodes with none in common (interference: mlcheck.history.causes.scattered). The rows'
    noise counts every run (judge)."""
    if len(values) < LIKE_FROM:
        return values
    middle = statistics.median(values)
    spread = 1.4826 * statistics.median(abs(v - middle) for v in values)
    alike = [v for v in values if abs(v - middle) <= max(FAR * spread, threshold * abs(middle))]
    # one far run stays: one stray repetition is the cells' to judge (one run alone)
    return alike if len(values) - len(alike) >= 2 and 2 * len(alike) > len(values) else values


def one_sided_noise(spread_side, other, mean_before):
    """The spread of the change when only one side has repetitions for a standard deviation:
    that side's standard deviation s (n values), as far as a mean of the other side's m values
    is expected to fall from its mean, s * sqrt(1/m + 1/n), relative to the before mean."""
    return stdev(spread_side) * means_error(spread_side, other) / mean_before


def means_error(before, after):
    """The spread of the change of two sides' means, in one run's spreads: sqrt(1/n + 1/m)."""
    return math.sqrt(1 / len(before) + 1 / len(after))


def stdev(values, mean=None):
    """The sample standard deviation, in floats: statistics.stdev's exact sums take most of the
    report's time on large matrices."""
    mean = statistics.fmean(values) if mean is None else mean
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def judge(comparison, rule):
    """The verdict on one comparison. Means, not medians: the noise is the spread about the means,
    and one stray repetition moves a mean by less than it widens that spread (1/n against about
    1/sqrt(n) of its distance), so it cannot make a regression on its own; a median of few
    repetitions can jump by more than the spread when they fall into two groups (busy, idle).
    With too few repetitions on one side, the spread is the other side's (one_sided_noise); with
    too few on both, a change worse than the threshold fails as TOO_FEW_WORSE."""
    c = comparison
    if c.units_after:
        c.verdict = UNIT_CHANGED
        return c
    if not c.after:
        c.verdict = ONLY_BEFORE
        return c
    if not c.before:
        c.verdict = ONLY_AFTER
        return c
    if c.mean_before == 0:
        c.verdict = ZERO_BEFORE
        return c
    c.change = c.mean_after / c.mean_before - 1
    c.worse = worse_by(c.key[2], c.unit, c.change)
    enough = [name for name, side in (('before', c.before), ('after', c.after))
              if len(side) >= rule.min_repeats]
    if len(enough) == 2:
        # the spread of every run: a far run is a draw of the noise too where nothing changed (a
        # job beside another), and left out (like_runs) it made one healthy report in 50 fail; a
        # slow node's few runs are the cause line's to see, pooled over the tests it ran
        c.noise = relative_noise(c.before, c.after)
        c.noise_of, c.dof = 'both', len(c.before) + len(c.after) - 2
        # the spread of the change of the means, in noises
        error = means_error(c.before, c.after)
    elif enough == ['before']:
        c.noise, c.noise_of = one_sided_noise(c.before, c.after, c.mean_before), 'before'
        c.dof, error = len(c.before) - 1, 1.0
    elif enough == ['after']:
        c.noise, c.noise_of = one_sided_noise(c.after, c.before, c.mean_before), 'after'
        c.dof, error = len(c.after) - 1, 1.0
    else:
        c.verdict = TOO_FEW_WORSE if c.worse is not None and c.worse > rule.threshold else TOO_FEW
        return c
    return _verdict(c, rule, error)


def _verdict(c, rule, error):
    """The verdict of a comparison whose noise and degrees of freedom are set; `error`: the spread
    of the change of the means, in noises."""
    c.p = _one_sided_p(c.change, c.noise * error, c.dof)
    beyond = abs(c.change) > rule.threshold
    if beyond and abs(c.change) > rule.noise_factor * c.noise:
        c.verdict = CHANGED if c.worse is None else REGRESSION if c.worse > 0 else IMPROVED
    else:
        c.verdict = WITHIN_NOISE if beyond else UNCHANGED
    return c


# cells of one check's figure at one job size on one partition (its images, those of the report)
# whose noise is pooled; fewer cannot tell a typical spread from one cell's
POOL_FROM = 3
# a cell's spread past this quantile of its own chi-square about the pool's typical one is not
# like the others (a cell with an interfered run, a noisier image): kept out of the pool
UNLIKE = 0.99


def pool_noise(judged, rule):
    """Each cell judged on its own spread, judged again on the noise of its like cells where
    theirs is the wider: the runs of one check's figure at one job size on one partition share a
    relative spread far more than their means, so the cells (images) pooled give that spread on
    many degrees of freedom where one cell of 3 runs a side has 4, and Student's t on 4 is wide
    (a one-sided 1 % over a hundred figures: 11 standard errors on 4, 5 on 12, 4 on 36). Robust:
    the pool's typical spread is the median of the cells' variances (each over its chi-square's
    median), the pool the cells within UNLIKE of it, so a few cells with an interfered run or on a
    busier node do not widen the noise that judges the others; a cell noisier than the pool keeps
    its own spread and degrees of freedom (max(own, pooled)), so pooling never narrows a noise.
    A cell with a spread on one side only (one run after a --repeat 3 baseline) is pooled too,
    over its check's figure at every job size where its own job size has too few like cells:
    three runs' spread on 2 degrees of freedom is as often a third of the noise as not, and
    judged on it a healthy upgrade run once after its baseline failed the gate 49 times in 50."""
    spread = [c for c in judged if c.noise_of and c.noise]
    like = lambda c: (c.key[0], c.key[1].split()[0], c.key[2])
    pools = {key: _pooled(cells) for key, cells in group(spread, lambda c: like(c) + (c.num_nodes,)).items()}
    wide = {key: _pooled(cells) for key, cells in group(spread, like).items()}
    for c in spread:
        pool = pools[like(c) + (c.num_nodes,)]
        if pool is None and c.noise_of != 'both':
            pool = wide[like(c)]
        if pool is None:
            continue
        if c.noise <= pool[0] * _one_run(c):
            c.noise, c.dof, c.pooled = pool[0] * _one_run(c), pool[1], True
        elif c.noise_of != 'both':
            # a one-sided spread wider than its pool's is kept, on the pool's degrees of freedom:
            # on its own one or two, a t tells nothing, and the threshold judges alone
            c.dof = max(c.dof, pool[1])
        else:
            continue
        # the spread of the change of the means, in noises (judge; 1 where the noise holds it)
        _verdict(c, rule, means_error(c.before, c.after) / _one_run(c))
    return judged


def _one_run(c):
    """What a cell's noise is in one run's spreads: 1 where both sides have a spread (the row
    shows one run's, judge); where one side has, its noise is the change's (one_sided_noise)."""
    return 1.0 if c.noise_of == 'both' else means_error(c.before, c.after)


def _pooled(cells):
    """(one run's relative spread, degrees of freedom) of like cells pooled robustly, or None
    where fewer than POOL_FROM cells have one."""
    if len(cells) < POOL_FROM:
        return None
    own = [((c.noise / _one_run(c)) ** 2, c.dof) for c in cells]
    typical = statistics.median(v * dof / _chi2_quantiles(dof)[0] for v, dof in own)
    alike = [(v, dof) for v, dof in own if v <= typical * _chi2_quantiles(dof)[1] / dof]
    dof = sum(d for _, d in alike)
    return math.sqrt(sum(d * v for v, d in alike) / dof), dof


def _one_sided_p(change, error, dof):
    """Student's t: the chance that the noise alone moves a mean this far, this way (only a
    change to the worse fails the gate: its false alarms are one-sided)."""
    if error == 0:
        return 0.0 if change else 0.5
    return _t_sf(abs(change) / error, dof)


@functools.lru_cache(maxsize=None)
def _chi2_quantiles(dof):
    """The chi-square's median and UNLIKE quantile on `dof` degrees of freedom, once a dof: a
    scipy quantile costs about 0.3 ms, and a report asks for these once a cell."""
    from scipy.stats import chi2      # here: a look that judges nothing imports no more than it needs
    return float(chi2.median(dof)), float(chi2.ppf(UNLIKE, dof))


def _t_sf(x, dof):
    """Student's t's survival function: scipy's t.sf(x, dof), which is stdtr(dof, -x) (the same
    value for every x and dof, infinite and invalid ones too), by the ufunc alone: 1 us a call
    where t.sf's argument checks take 0.3 ms, and a report makes thousands."""
    from scipy.special import stdtr
    return float(stdtr(dof, -x))


# the degrees of freedom of a one-sided spread that the report's t judges (judge_together)
JUDGED_FROM = 2

# two figures of one test whose runs move together this closely are one measurement in two
# units (samples/s, per GPU, train time): the runs' figures share one draw of the noise
SAME_MEASUREMENT = 0.999


def judge_together(judged, rule):
    """The verdicts of a whole report at once: a change counts (REGRESSION, improved, changed)
    only where its chance under the noise alone, p, stays under the Benjamini-Hochberg bound of
    the measurements judged (the figures of a test that are one measurement in other units count
    once): an unchanged session has any figure judged changed at most `rule.false_alarm` of the
    time, where each figure against twice its own spread of 3-5 repetitions a side made one of a
    hundred fail by chance in a quarter of unchanged sessions (docs/performance-history.md); a
    real fault moves many figures at once, and their p-values raise the bound."""
    # a side of fewer than min_repeats runs, against a spread of fewer than JUDGED_FROM degrees of
    # freedom (two runs on the other side, and too few like cells to pool), is judged by the
    # threshold and that spread, as one run a side is (TOO_FEW_WORSE), not demoted by a t of one
    # degree of freedom: one run after at -67 % against two before at 6 % read `within noise`
    # (p 0.04); the report says such a gate raises more false alarms, and --require-repeats
    # refuses it. On 2 or more, it is judged with the rest: by the threshold alone, a healthy
    # upgrade run once after a --repeat 3 baseline failed the gate 49 times in 50
    measured = [c for c in judged if c.p is not None and (c.noise_of == 'both' or c.dof >= JUDGED_FROM)]
    groups = _measurements(measured)
    firsts = [min(c.p for c in of) for of in groups]
    m = len(firsts)
    # half the rate for the figures one by one, half for the layers where some layer ran two
    # tests or more (slower_layers), else all of it for the figures
    layers = _layers(groups)
    level = rule.false_alarm / (2 if layers else 1)
    bound = max((p for k, p in enumerate(sorted(firsts), 1) if p <= k * level / m), default=-1.0)
    for c in measured:
        c.alone = level / m
    slower = _slower_layers(layers, level)
    # one measurement, one verdict: a rate and its time are judged by the clearer of the two
    # (a time's relative spread is not its rate's: +106 % at 15 % beside -52 % at 20 %)
    clearest = {id(c): min(o.p for o in of) for of in groups for c in of}
    for c in measured:
        if c.verdict in (REGRESSION, IMPROVED, CHANGED) and clearest[id(c)] > bound and not (
                c.verdict == REGRESSION and {(c.key[0], c.image), (c.key[0], None)} & slower):
            c.verdict = WITHIN_NOISE
    return judged


# the most repetitions a side the report would advise: past it, a quieter partition is the way
MOST_REPEATS = 30


def repetitions_to_tell(c, rule):
    """The fewest runs a side (above the comparison's own) that would tell a change of its size
    from its measured spread by the gate's own test (_verdict and judge_together: worse than the
    threshold and noise_factor x the spread, and a one-sided t's chance under c.alone, the level
    of a measurement that moves alone); None where no number up to MOST_REPEATS does: a change
    within noise_factor x the spread of one run stays within it however many runs measure it."""
    if c.p is None or c.alone is None or c.noise_of != 'both' or not c.noise:
        return None
    change = abs(c.change)
    if change <= rule.threshold or change <= rule.noise_factor * c.noise:
        return None
    runs = len(c.before) + len(c.after)
    for n in range(max(len(c.before), len(c.after)) + 1, MOST_REPEATS + 1):
        # a pooled spread's degrees of freedom grow with every cell's runs, as its own do
        dof = c.dof * (2 * n - 2) / (runs - 2)
        if _t_sf(change / (c.noise * math.sqrt(2 / n)), dof) <= c.alone:
            return n
    return None


def _layers(groups):
    """{(partition, image) or (partition, None): [normal score of each test's slowing]} of the
    layers that ran two tests or more. Each test counts by its speed: the measurement of the
    most figures (a rate, per GPU, its time); its score is its one-sided chance as a normal one,
    signed by the change (slower: positive)."""
    from scipy.stats import norm
    speed = {}
    for of in groups:
        c = of[0]
        test = (c.key[0], c.key[1], c.key[3])
        if c.worse is not None and len(of) > len(speed.get(test, ())):
            speed[test] = of
    scores = {}
    for of in speed.values():
        c = of[0]
        z = float(norm.isf(c.p)) * (1 if c.worse > 0 else -1)
        for layer in ((c.key[0], c.image), (c.key[0], None)):
            scores.setdefault(layer, []).append(z)
    return {layer: zs for layer, zs in scores.items() if len(zs) > 1}


def _slower_layers(layers, level):
    """{layer} of `layers` (_layers) whose tests together are slower beyond the noise at `level`,
    split over them (Stouffer's sum of the tests' normal scores): an image 10 % slower at 5 %
    noise moves each test's rate by some 3 standard errors, which no one figure among a hundred
    shows at a report's level, while its tests together show it far beyond."""
    from scipy.stats import norm
    return {layer for layer, zs in layers.items()
            if norm.sf(sum(zs) / math.sqrt(len(zs))) <= level / len(layers)}


def _measurements(judged):
    """[[Comparison]]: each test's figures, those that are one measurement together (their runs'
    logarithms correlate past SAME_MEASUREMENT on both sides: a rate, the rate per GPU, the time)."""
    found = []
    for _, of in group(judged, lambda c: (c.key[0], c.key[1], c.key[3])).items():
        groups = []
        for c in of:
            same = next((g for g in groups if _together(g[0], c)), None)
            if same is None:
                groups.append([c])
            else:
                same.append(c)
        found += groups
    return found


def _together(a, b):
    if len(a.before) != len(b.before) or len(a.after) != len(b.after) or len(a.before) + len(a.after) < 4:
        return False
    try:
        # about each side's own mean: a change between the sides would tie any two figures
        xs, ys = ([x - statistics.fmean(side) for side in sides for x in side]
                  for sides in ([[math.log(v) for v in s] for s in (c.before, c.after)] for c in (a, b)))
        return abs(statistics.correlation(xs, ys)) > SAME_MEASUREMENT
    except (ValueError, statistics.StatisticsError):
        return False      # a value of 0 or less, or one that never moves


def in_unit(value, unit, wanted):
    """`value` (in `unit`) in unit `wanted`, or None where the two are not units of one quantity."""
    if unit == wanted:
        return value
    scale = next((s for s in SCALES if unit in s and wanted in s), None)
    return value * scale[unit] / scale[wanted] if scale else None


def compare(before, after, rule=Rule()):
    """One judged Comparison per test, settings and performance variable of either selection:
    runs of other settings (epochs, model, batch size...) are never compared, and values whose
    settings were not recorded (settings '') are a group of their own. Samples without a value
    (test cases that failed before their performance stage) only tell that the test ran."""
    table = {}
    for side, samples in (('before', before), ('after', after)):
        for s in samples:
            entry = table.setdefault(s.key, Comparison(s.key, s.unit, s.image, s.num_nodes))
            if s.value is not None:
                value = in_unit(s.value, s.unit, entry.unit)
                if value is None:
                    entry.units_after.add(s.unit)
                else:
                    getattr(entry, side).append(value)
            elif side == 'after':
                entry.failed_after += 1
            else:
                entry.failed_before += 1
    judged = judge_together(pool_noise([judge(table[key], rule) for key in sorted(table) if table[key].before
                                        or table[key].after or table[key].units_after], rule), rule)
    _shares_of_faster_jobs(judged)
    settings_after = {test_of(c.key) for c in judged if c.after}
    tests_after = {c.key[:2] for c in judged if c.after}
    tests_compared = {c.key[:2] for c in judged if c.before and c.after}
    for c in judged:
        if c.verdict != ONLY_BEFORE or test_of(c.key) in settings_after:
            continue
        # it ran after in these settings and failed; else, a group of settings that did not run
        # after is a stray one (a smoke run in the baseline's period) where the test was
        # compared in other settings, and where it was compared in none, nothing says the test
        # is as fast as before
        if c.failed_after or c.key[:2] not in tests_compared:
            c.verdict = OTHER_SETTINGS if not c.failed_after and c.key[:2] in tests_after \
                else NO_RESULT
    return judged


def _shares_of_faster_jobs(judged):
    """A share's REGRESSION becomes SHARE_OF_FASTER where the same test's other figures with a
    direction include an improvement and nothing worse (failing, or worse within the noise): a
    faster job whose reference sped up more. Where the job got slower too, it stays; an exchange
    slower beside GPUs as much faster is the interconnect check's to see."""
    for _, of in group(judged, lambda c: test_of(c.key)).items():
        own = [c for c in of if c.key[2] not in SHARES and c.worse is not None]
        if not any(c.verdict == IMPROVED for c in own) or any(
                c.verdict in FAILING or c.verdict == WITHIN_NOISE and c.worse > 0 for c in own):
            continue
        for c in of:
            if c.verdict == REGRESSION and c.key[2] in SHARES:
                c.verdict = SHARE_OF_FASTER
