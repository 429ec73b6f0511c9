"""What a run ran on and how it was set up, recorded with every performance value, so that a
report can say what changed in the software stack and compare only runs set up alike.

Stack facts come from three places: the ranks' `rank` line (torch, torchvision, CUDA/ROCm,
NCCL/RCCL as torch links it, kernel, GPU driver), the collective library's own NCCL_DEBUG=INFO
lines (the NCCL/RCCL that was loaded, the OFI network plugin, libfabric), and the job and the
check (Slurm's version, the image's identity). Both are recorded as `name=value;...` text: a
check variable, so a perf log field and a column of the results database.
"""

import os
import re
from collections import Counter, defaultdict
from datetime import datetime, timezone

from mlcheck.contract import FACT_PREFIX
from mlcheck.errors import ConfigError
from mlcheck.visible import control_characters, visible

# in the order a report lists them, with the label it uses
FACTS = {'image': 'image', 'torch': 'torch', 'torchvision': 'torchvision', 'nccl': 'NCCL',
         'net_plugin': 'network plugin', 'libfabric': 'libfabric', 'rocm': 'ROCm',
         'cuda': 'CUDA', 'gpu_driver': 'GPU driver', 'kernel': 'kernel', 'slurm': 'Slurm'}
RANK_LINE_FACTS = ('torch', 'torchvision', 'nccl', 'rocm', 'cuda', 'gpu_driver', 'kernel')

# NCCL_DEBUG=INFO lines of NCCL/RCCL and of the aws-ofi-nccl/aws-ofi-rccl plugins (older
# plugins say "Using", newer ones "Initializing"); the loaded library wins over torch's word
LIBRARY_LINES = (
    ('nccl', re.compile(r'NCCL INFO NCCL version (\S+)')),
    ('net_plugin', re.compile(r'NET/OFI (?:Using|Initializing) (aws-ofi-[a-z]+ \S+)')),
    ('libfabric', re.compile(r'NET/OFI Using Libfabric version (\S+)')),
)
JOB_EVENT = 'job'     # the job script's own fact line, with what the ranks cannot know
# of the encoding and of the perf log, and every control character (\r, which a text stream
# reads as a newline, among them: issue 48)
SEPARATORS = re.compile('[;=|\x00-\x1f\x7f-\x9f\u2028\u2029]+')


def encode(facts):
    """`name=value;...` of the facts that are known, in a fixed order."""
    order = list(FACTS) + sorted(set(facts) - set(FACTS))
    return ';'.join(f'{name}={_clean(facts[name])}' for name in order
                    if facts.get(name) not in (None, ''))


def decode(text):
    """The facts of encode()'s text; {} for an empty or absent field (an older perf log)."""
    facts = {}
    for item in (text or '').split(';'):
        name, sep, value = item.partition('=')
        if sep and name.strip():
            facts[name.strip()] = value.strip()
    return facts


def _clean(value):
    return SEPARATORS.sub(' ', str(value)).strip()


def settings_of(test, names):
    """The test's settings that change a figure, as encode()d text; a ConfigError for a text
    setting (-S NAME=VALUE) holding a control character: it would be logged unescaped."""
    for name in names:
        value = getattr(test, name)
        if isinstance(value, str) and control_characters(value):
            raise ConfigError(f'-S {name}={visible(repr(value))[:80]}: a control character cannot be '
                              f'logged (it holds {control_characters(value)})')
    return ';'.join(f'{name}={_clean(getattr(test, name))}' for name in names)


def job_fact_command():
    """A job script line that reports what the ranks cannot know: the Slurm version (the last
    word of `srun --version`, which reads 'slurm 23.02.7' or 'slurm-wlm 22.05.8')."""
    return (f'printf \'{FACT_PREFIX}{{"event": "{JOB_EVENT}", "slurm": "%s"}}\\n\' '
            '"$(srun --version 2>/dev/null | awk \'{print $NF}\')"')


def of_run(run, image_path=None):
    """The stack facts of a job's parsed output (mlcheck.judging.output.RunOutput), lowest rank
    first where ranks differ, and of its image file or directory."""
    facts = {}
    ranks = run.by_rank('rank')
    if ranks:
        line = ranks[min(ranks)]
        facts.update({name: line[name] for name in RANK_LINE_FACTS if line.get(name)})
    for job in run.events(JOB_EVENT):
        facts.update({name: value for name, value in job.items()
                      if name not in ('event', 'task') and value})
    from_library = set()
    for task in sorted(run.lines, key=lambda t: (t is None, t or 0)):
        for line in run.lines[task]:
            for name, pattern in LIBRARY_LINES:
                found = pattern.search(line)
                if found and name not in from_library:
                    facts[name] = found.group(1)
                    from_library.add(name)
    if image_path:
        facts['image'] = image_identity(image_path)
    return facts


def image_identity(path):
    """Cheap to take for a 10 GB image: a file's size and modification time; for an unpacked
    directory image, the newest modification time of it and its top-level entries."""
    try:
        info = os.stat(path)
        if os.path.isdir(path):
            times = [info.st_mtime] + [entry.stat().st_mtime for entry in os.scandir(path)]
            return f'directory modified {_utc(max(times))}'
        return f'{info.st_size} bytes modified {_utc(info.st_mtime)}'
    except OSError as err:
        return f'unreadable ({err.strerror})'


def _utc(seconds):
    return datetime.fromtimestamp(seconds, timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def typical(stacks):
    """Per fact, its most common value over the stacks (dicts) of one side."""
    counts = defaultdict(Counter)     # one Counter per fact, made once (this runs per comparison)
    for facts in stacks:
        for name, value in facts.items():
            counts[name][value] += 1
    return {name: counter.most_common(1)[0][0] for name, counter in counts.items()}


NONE = 'none'    # a fact one side recorded and the other did not: it appeared, or vanished


def changes(before, after):
    """[(fact, old, new)] of the facts that differ, 'none' where one side recorded the fact and
    the other did not (a network plugin RCCL no longer loads is the change that matters)."""
    old, new = typical(before), typical(after)
    order = list(FACTS) + sorted((set(old) | set(new)) - set(FACTS))
    return [(name, old.get(name, NONE), new.get(name, NONE)) for name in order
            if (name in old or name in new) and old.get(name) != new.get(name)]


def change_line(found, rocm=False):
    """'RCCL 2.20.5 -> 2.22.3; aws-ofi-rccl 1.4.0 -> aws-ofi-nccl 1.18.0; network plugin
    aws-ofi-rccl 1.4.0 -> none (not loaded)'. The plugin's value names itself; NCCL is called
    RCCL on ROCm."""
    parts = []
    for name, old, new in found:
        label = 'RCCL' if name == 'nccl' and rocm else FACTS.get(name, name)
        # a plugin's value names it, unless one side has none
        said = f'{old} -> {new}' if name == 'net_plugin' and NONE not in (old, new) else f'{label} {old} -> {new}'
        parts.append(said + (' (not loaded)' if name == 'net_plugin' and new == NONE else ''))
    return '; '.join(parts)
