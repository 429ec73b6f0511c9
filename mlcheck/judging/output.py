"""Reading a training job's output: the `MLCHECK {json}` facts and every other line, per task.

srun --label prefixes each line with the task id that printed it (`3: ...`, right-aligned with
spaces when there are ten tasks or more), which ties library lines such as NCCL's to a rank.
The job's stderr is kept apart, per task too: tracebacks of the ranks, and unlabelled, the
launcher's own messages (`srun: error: nid002: task 3: Exited with exit code 1`).
"""

import gc
import json
import os
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

from mlcheck.contract import FACT_PREFIX
DECODER = json.JSONDecoder()


@dataclass
class RunOutput:
    facts: list = field(default_factory=list)                    # dicts; 'task' added when labelled
    lines: dict = field(default_factory=lambda: defaultdict(list))  # task id -> its other lines
    malformed: list = field(default_factory=list)                # fact lines that are not JSON
    errors: dict = field(default_factory=lambda: defaultdict(list))  # task id -> its stderr lines
    _index: tuple = field(default=(-1, {}, {}), init=False, repr=False, compare=False)

    def _indexed(self):
        """({event: facts}, {(event, rank): facts}), built once per set of facts: judging
        thousands of ranks must not scan every fact once per rank."""
        if self._index[0] != len(self.facts):
            by_event, by_rank = defaultdict(list), defaultdict(list)
            with cyclic_gc_paused():
                for fact in self.facts:
                    by_event[fact.get('event')].append(fact)
                    if 'rank' in fact:
                        by_rank[fact.get('event'), fact['rank']].append(fact)
            self._index = (len(self.facts), dict(by_event), dict(by_rank))
        return self._index[1:]

    def events(self, name):
        """The facts of event `name`, in output order (a shared list: do not modify it)."""
        return self._indexed()[0].get(name, [])

    def rank_events(self, name, rank):
        """The facts of event `name` that `rank` reported, in output order."""
        return self._indexed()[1].get((name, rank), [])

    def by_rank(self, name):
        return {f['rank']: f for f in self.events(name) if 'rank' in f}

    def positive(self, name, field):
        """{rank: its `name` fact's `field`} of the ranks whose fact gives a positive number
        (a figure absent, zero or not a number is no figure)."""
        return {rank: fact[field] for rank, fact in self.by_rank(name).items()
                if isinstance(fact.get(field), (int, float)) and not isinstance(fact.get(field), bool)
                and fact[field] > 0}

    def result(self):
        results = self.events('result')
        return results[-1] if results else None

    # --- performance figures: the program's own result line -------------------------------

    def train_seconds(self):
        return self.result_value('train_seconds')

    def result_value(self, name):
        """A figure of the program's own result line (None if absent)."""
        result = self.result()
        return result.get(name) if result else None


def split_label(raw):
    """(task, line) of a line srun labelled (whitespace, the task id, ':', an optional space),
    else (None, raw). No regex: an 8,192-rank output has 400,000 lines (docs/per-rank.md)."""
    head, colon, line = raw.partition(':')
    task = head.lstrip()
    if not colon or not task.isdecimal():
        return None, raw
    return int(task), line[1:] if line.startswith(' ') else line


def _no_label(raw):
    return None, raw


def json_document(text):
    """json.loads(text), a quarter faster where `text` is one document with nothing around it
    (every fact line): raw_decode skips loads' search for whitespace before and after it."""
    try:
        value, end = DECODER.raw_decode(text)
        if end == len(text):
            return value
    except ValueError:
        pass
    return json.loads(text)    # whitespace around the document, or not one: as loads says


@contextmanager
def cyclic_gc_paused():
    """Python's cycle collector off while a run's facts are read, indexed and judged: the
    ~75,000 facts of 8,192 ranks are all kept, so its passes over them find nothing and cost
    10-25 % of the time. Also a decorator: @cyclic_gc_paused()."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@cyclic_gc_paused()
def parse(text, labelled=True, stderr=''):
    """Split job output into facts and per-task lines. Unlabelled lines belong to task None."""
    out = RunOutput()
    split = split_label if labelled else _no_label
    for raw in stderr.splitlines():
        task, line = split(raw)
        out.errors[task].append(line)
    for raw in text.splitlines():
        task, line = split(raw)
        if line.startswith(FACT_PREFIX):
            try:
                fact = json_document(line[len(FACT_PREFIX):])
                if not isinstance(fact, dict):
                    raise ValueError('not an object')
            except ValueError:
                out.malformed.append(raw)
                continue
            if task is not None:
                fact['task'] = task
            out.facts.append(fact)
        else:
            out.lines[task].append(line)
    return out


def read(path, stderr_path=None, labelled=True):
    with open(path, errors='replace') as stream:
        text = stream.read()
    stderr = ''
    if stderr_path and os.path.exists(stderr_path):
        with open(stderr_path, errors='replace') as stream:
            stderr = stream.read()
    return parse(text, labelled, stderr)
