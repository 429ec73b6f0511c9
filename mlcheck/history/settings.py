"""Two selections' recorded settings made comparable. A run records the settings that change a
figure (`run_settings`, `name=value;...`); a knob added since a run was recorded is absent from
that run's record. Absent there and at its default on the other side, it is the same setting: a
run of before the knob existed ran what the knob's default runs now (issue 30: the CIFAR-100
`mode` knob made every run of an older baseline OTHER SETTINGS AFTER).
"""

import dataclasses

from mlcheck.figures.stack import decode
from mlcheck.history.samples import group


def with_defaults(samples, defaults):
    """(samples, filled): the samples in their order, each whose record lacks a setting that another
    record of the same check has with that setting at its knob's default (`defaults`: {check:
    {name: text}}) where the default is known; `filled`: the sorted (check, name, default) filled in."""
    order = {}        # {check: every name recorded for it, in the order of its fullest record}
    for check, runs in group(samples, lambda s: s.check).items():
        names = order.setdefault(check, [])
        for s in sorted(runs, key=lambda s: -len(decode(s.settings))):
            names += [name for name in decode(s.settings) if name not in names]
    filled, out = set(), []
    for s in samples:
        recorded, known = decode(s.settings), defaults.get(s.check, {})
        missing = [n for n in order[s.check] if n not in recorded and n in known]
        if not s.settings or not missing:
            out.append(s)
            continue
        recorded.update({n: known[n] for n in missing})
        filled.update((s.check, n, known[n]) for n in missing)
        out.append(dataclasses.replace(s, settings=';'.join(
            f'{n}={recorded[n]}' for n in order[s.check] if n in recorded)))
    return out, sorted(filled)
