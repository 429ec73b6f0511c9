"""Whether a test has performance references: ReFrame passes a value without one (it logs
`perf_ref 0`), so a test without them must say which of its figures were not judged.

And the references at this machine's speed, where a references file records the speed of the
machine it was measured on (`$machine_speed`, the simulated partition: mlcheck.simulated.speed)."""

import os
import stat

import yaml

from mlcheck.errors import InputError
from mlcheck.figures import directions
from mlcheck.files import Directory

MACHINE_SPEED = '$machine_speed'
JOB_SPEED = 'job_speed'      # the workload's rate read in the job, a figure of the entry


def linked_file(refs, name):
    """(the Directory, the name) of the file that the references file `name` of the opened
    references directory `refs` is: `name` itself, or where it is a symbolic link, the existing
    regular file its relative target names inside the directory, each folder on the way opened
    without following a link (so a co-writer who swaps a folder for a link mid-way, with
    renameat2, moves nothing). A link out of the directory (absolute, `..`, through another link)
    or to nothing is refused in one line: a read or a write through it could reach any file."""
    shown = refs.shown(name)
    try:
        if not stat.S_ISLNK(os.stat(name, dir_fd=refs.fd, follow_symlinks=False).st_mode):
            return refs, name
        target = os.readlink(name, dir_fd=refs.fd)
    except FileNotFoundError:
        return refs, name
    *folders, last = [part for part in target.split('/') if part not in ('', '.')] or ['']
    if target.startswith('/') or '..' in folders + [last]:
        raise InputError(f'references file {shown} is a link to {target}, outside {refs.path}: not '
                         'followed, no references read or written; replace the link with the file')
    place = refs
    try:
        for folder in folders:
            place = place.below(folder)
        regular = stat.S_ISREG(os.stat(last, dir_fd=place.fd, follow_symlinks=False).st_mode)
    except OSError:
        regular = False
    if not regular:
        raise InputError(f'references file {shown} is a link to {target}, which is no file: no file '
                         f'is created through a link (one is followed only to a file of {refs.path}, '
                         'through no other link); replace the link with the file')
    return place, last


# a references file larger than this is not read (the simulated partition's is some kB)
MAX_REFERENCES_BYTES = 16 << 20


# a references file whose aliases, expanded, would hold more values than this is refused before
# it is built: a 702-byte 'billion laughs' file (ten levels of ten aliases of the level above)
# hung mlcheck-baseline copying it; the simulated partition's file holds some hundreds
MAX_REFERENCES_VALUES = 100_000


def _refuse_alias_bombs(root, shown):
    """An InputError where the composed YAML `root` (aliases still shared, nothing built) would
    hold more than MAX_REFERENCES_VALUES values with its aliases expanded, or an alias inside its
    own anchor (expanded for ever)."""
    sizes = {}      # id(node): its values expanded; None while it is being counted

    def size(node):
        if id(node) in sizes:
            if sizes[id(node)] is None:
                raise InputError(f'references file {shown}: an alias inside its own anchor: refused')
            return sizes[id(node)]
        sizes[id(node)] = None
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) \
            else node.value if isinstance(node, yaml.SequenceNode) else []
        sizes[id(node)] = 1 + sum(map(size, children))
        return sizes[id(node)]
    if root is not None and size(root) > MAX_REFERENCES_VALUES:
        raise InputError(f'references file {shown}: its aliases expand to {size(root):,} values, more '
                         f'than {MAX_REFERENCES_VALUES:,}: refused, not built')


def read_file(refs, name):
    """(its text, its YAML: a mapping of checks) of the references file `name` of the opened
    references directory `refs`, None where there is none: a link followed only as linked_file
    allows; a FIFO, a device or a file larger than MAX_REFERENCES_BYTES refused, not waited on
    (mlcheck.files: opened non-blocking, without following a link, fstat'ed regular); its YAML
    composed and refused before it is built where its aliases would expand past
    MAX_REFERENCES_VALUES. An InputError of one line otherwise."""
    place, name = linked_file(refs, name)
    shown = place.shown(name)
    try:
        content = place.read(name, MAX_REFERENCES_BYTES)
    finally:
        if place is not refs:
            os.close(place.fd)
    if content is None:
        return None
    try:
        text = content.decode()
        _refuse_alias_bombs(yaml.compose(text, Loader=yaml.SafeLoader), shown)
        data = yaml.safe_load(text) or {}
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as err:
        # RecursionError: lists nested some hundred deep, which the YAML composer recurses into
        raise InputError(f'references file {shown} cannot be read: '
                         f'{(str(err).splitlines() or [type(err).__name__])[0]}') from None
    if not isinstance(data, dict):
        raise InputError(f'references file {shown}: expected a mapping of checks at the top')
    return text, data


def load_file(path):
    """The YAML of the references file `path` as read_file reads it (its directory opened once,
    a link in it followed only to a file inside it), None where there is none: nothing checked
    first and opened later, so a co-writer's swap in between is read as what it is."""
    directory, name = os.path.split(os.path.abspath(path))
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise InputError(f'references directory {directory} cannot be opened ({err.strerror})') from None
    with Directory(directory, what='references directory', fd=fd) as refs:
        found = read_file(refs, name)
    return found and found[1]


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
    loaded = load_file(path)
    if loaded is None:
        return everything, f'no references file {path}'
    references = loaded.get(check)
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
    loaded = load_file(path)
    if loaded is None:
        return None
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
