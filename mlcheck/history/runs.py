"""The runs of a comparison: the Samples a reader returns (one per performance value) gathered
into the jobs they came from, each with its test, image, node count, the nodes it used, its
repetition, session, end time, each figure or its failure and reason, and its stack facts. The
rows, the gate and the likely cause (mlcheck.history.evidence) all read these."""

import functools
from dataclasses import dataclass

from mlcheck.errors import InputError
from mlcheck.history import hostlist
from mlcheck.history.samples import group, run_inputs


@dataclass(frozen=True)
class Run:
    side: str              # 'before' or 'after'
    partition: str
    test: str              # the test's name with its parameters
    settings: str          # its run inputs that change a figure (Sample.settings)
    image: str
    num_nodes: int
    nodes: frozenset       # the nodes it used (empty where not recorded: no node judged)
    job: str
    session: str           # session UUID or perf log path
    end: float             # job completion, Unix seconds
    repetition: int        # 1, 2, ... in the order the test's runs of one side ended
    figures: tuple         # ((var, value, unit), ...); value None where the run failed
    reason: str = ''       # why it failed, where the record says (the results database)
    stack: str = ''

    @property
    def failed(self):
        return any(value is None for _, value, _ in self.figures)

    @property
    def test_key(self):
        return self.partition, self.test, self.settings


def runs_of(samples, side):
    """[Run] of one side's samples: one per job (its id, or its end time where none is
    recorded), numbered by end time within each test."""
    jobs = group(samples, lambda s: (s.partition, s.name, run_inputs(s.settings), s.source, s.jobid or s.time,
                                     s.nodelist))
    runs = []
    for (partition, name, settings, source, _, nodelist), of in jobs.items():
        first = of[0]
        runs.append(Run(side, partition, name, settings, first.image, first.num_nodes,
                        nodes_of(nodelist, first.num_nodes), first.jobid, source,
                        max(s.time for s in of), 0, tuple((s.var, s.value, s.unit) for s in of),
                        next((s.problem for s in of if s.problem), ''), first.stack))
    numbered = []
    for _, of in group(sorted(runs, key=lambda r: r.end), lambda r: r.test_key).items():
        numbered += [Run(**{**r.__dict__, 'repetition': i}) for i, r in enumerate(of, 1)]
    return numbered


@functools.lru_cache(maxsize=4096)
def nodes_of(nodelist, num_nodes=None):
    """The node names of a recorded node list ('nid001,nid002' or 'nid[001-003]'); none where
    it is absent, unreadable or longer than its job's `num_nodes` (the node is then not judged)."""
    limit = num_nodes if isinstance(num_nodes, int) and num_nodes > 0 else hostlist.MAX_HOSTS
    try:
        return frozenset(hostlist.expand(nodelist, limit)) if nodelist else frozenset()
    except InputError:
        return frozenset()
