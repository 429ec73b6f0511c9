"""Whether a test has performance references: ReFrame passes a value without one (it logs
`perf_ref 0`), so a test without them must say that its performance was not judged."""

import os

import yaml


def missing_references(path, check, keys, variables):
    """Why the references file `path` judges none or only some of `variables` of test `check`
    with index values `keys` ({'$partition': 'sim:cluster', 'image': ..., 'num_nodes': 2});
    None when it judges all of them."""
    if not os.path.isfile(path):
        return f'no references file {path}'
    with open(path) as f:
        references = (yaml.safe_load(f) or {}).get(check)
    if not isinstance(references, dict):
        return f'no references of {check} in {path}'
    entry = references
    for name in references.get('$index', []):
        entry = entry.get(keys.get(name)) if isinstance(entry, dict) else None
        if entry is None:
            where = ', '.join(f'{n.lstrip("$")} {keys.get(n)}' for n in references['$index'])
            return f'no references for {where} in {path}'
    absent = sorted(set(variables) - set(entry or {}))
    if absent:
        return f'no references for {", ".join(absent)} in {path}'
    return None
