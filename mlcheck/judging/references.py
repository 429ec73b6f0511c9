"""Whether a test has performance references: ReFrame passes a value without one (it logs
`perf_ref 0`), so a test without them must say which of its figures were not judged.

And the references at this machine's speed, where a references file records the speed of the
machine it was measured on (`$machine_speed`, the simulated partition: mlcheck.simulated.speed)."""

import os

import yaml

from mlcheck.figures import directions

MACHINE_SPEED = '$machine_speed'
JOB_SPEED = 'job_speed'      # the workload's rate read in the job, a figure of the entry


def _load(path):
    with open(path) as f:
        return yaml.safe_load(f) or {}


def _entry_of(references, keys):
    """The {variable: [value, lower, upper, unit]} entry of one check's references for index
    values `keys`, or None."""
    entry = references
    for name in references.get('$index', []):
        entry = entry.get(keys.get(name)) if isinstance(entry, dict) else None
        if entry is None:
            return None
    return entry


def unjudged(path, check, keys, variables):
    """(the figures of `variables` that the references file `path` does not judge, why) for test
    `check` with index values `keys` ({'$partition': 'sim:cluster', 'image': ..., 'num_nodes': 2});
    None when it judges all of them."""
    everything = sorted(variables)
    if not os.path.isfile(path):
        return everything, f'no references file {path}'
    references = _load(path).get(check)
    if not isinstance(references, dict):
        return everything, f'no references of {check} in {path}'
    entry = _entry_of(references, keys)
    if entry is None:
        where = ', '.join(f'{n.lstrip("$")} {keys.get(n)}' for n in references['$index'])
        return everything, f'no references for {where} in {path}'
    absent = sorted(set(variables) - set(entry or {}))
    if absent:
        return absent, f'no references for {", ".join(absent)} in {path}'
    return None


def missing_references(path, check, keys, variables):
    """Why the references file `path` judges none or only some of `variables` (unjudged()), or None."""
    found = unjudged(path, check, keys, variables)
    return found and found[1]


def at_speed(entry, follows, ratio):
    """Entry `entry` ({variable: [value, lower, upper, unit]}) on a machine `ratio` times as fast
    as the one it was measured on: each variable in `follows` expected `ratio` times as high where
    higher is better (a rate) and 1/ratio times where lower is (a time); the bounds are fractions
    of the value and stay."""
    scaled = {}
    for var, (value, lower, upper, unit) in entry.items():
        if var in follows:
            better = directions.better(var, unit)
            value *= ratio if better == directions.HIGHER else 1 / ratio if better == directions.LOWER else 1
        scaled[var] = (value, lower, upper, unit)
    return scaled


def at_recorded_speed(value, var, unit, speed_then, recorded):
    """Figure `var` measured as `value` on the machine at `speed_then` (steps/s), as it would be
    at the speed `recorded` ($machine_speed) notes; figures it does not follow as they are. What a
    new reference is written as, so that the file's figures stay at its one recorded speed."""
    follows = set(recorded.get('follow', [])) - set(recorded.get('follow_in_job', []))
    return at_speed({var: (value, None, None, unit)}, follows,
                    float(recorded['steps_per_s']) / speed_then)[var][0]


def at_machine_speed(path, check, keys, speed_now, job_speed=None):
    """The references of test `check` with index values `keys` at this machine's speed
    `speed_now` (the workload's steps/s), {variable: (value, lower, upper, unit)}; None where
    the file records no machine speed or has no entry for the test.

    The figures of `$machine_speed`'s `follow_in_job` follow instead the workload's rate read in
    the test's own job, `job_speed`, against the rate the entry records with them (its own
    `job_speed` figure); where either is missing they follow `speed_now` as the others do."""
    if not os.path.isfile(path):
        return None
    loaded = _load(path)
    recorded, references = loaded.get(MACHINE_SPEED), loaded.get(check)
    if not recorded or not isinstance(references, dict):
        return None
    entry = _entry_of(references, keys)
    if not entry:
        return None
    follow, in_job = set(recorded['follow']), set(recorded.get('follow_in_job', []))
    then = entry.get(JOB_SPEED)
    if not (job_speed and then and then[0]):
        return at_speed(entry, follow | in_job, speed_now / float(recorded['steps_per_s']))
    scaled = at_speed(entry, follow - in_job, speed_now / float(recorded['steps_per_s']))
    in_the_job = at_speed(entry, in_job, job_speed / float(then[0]))
    return {var: in_the_job[var] if var in in_job else value for var, value in scaled.items()}
