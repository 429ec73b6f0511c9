"""Every site's systems in one ReFrame configuration; ReFrame picks the system by hostname.

Loads every config/<site>.py (a site file added later is included as it is) and merges them:
systems in file-name order, a catch-all system (the simulated cluster's '.*') last as the
fallback, since ReFrame takes the first system with a hostname pattern that matches
(re.match on socket.gethostname(), reframe/core/config.py _detect_system). Every other section
(environments, logging, storage, general, ...) keeps each site's own entries, scoped to that
site's systems with 'target_systems', so a site's results database and perf logs stay its own.

Used by `. .venv/bin/activate` (RFM_CONFIG_FILES) and at sites (docs/configuration.md);
`-C config/<site>.py` still selects one site alone.
"""

import glob
import importlib.util
import os
import re
import socket
import sys

CONFIG_DIR = os.path.dirname(os.path.abspath(__file__))
# sections whose entries may name their systems (ReFrame 4 schema: 'target_systems')
SCOPED_SECTIONS = ('environments', 'logging', 'storage', 'general', 'modes', 'schedulers')


def site_files(config_dir=CONFIG_DIR):
    """config/<site>.py, every one but this file and private helpers (_name.py)."""
    return [path for path in sorted(glob.glob(os.path.join(config_dir, '*.py')))
            if not os.path.basename(path).startswith('_')
            and os.path.abspath(path) != os.path.abspath(__file__)]


def load_site(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f'mlcheck_site_{name}', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return module.site_configuration
    except AttributeError:
        raise SystemExit(f'mlcheck: config error: {path} defines no site_configuration') from None


def is_catch_all(system):
    # a NUL byte is no real hostname: only a pattern that matches anything matches it
    return any(re.match(pattern, '\0') for pattern in system['hostnames'])


def merged(sites):
    """One ReFrame configuration of `sites` ({file: site_configuration})."""
    systems, sections = [], {name: [] for name in SCOPED_SECTIONS}
    for path, site in sites.items():
        names = [system['name'] for system in site['systems']]
        for key, entries in site.items():
            if key == 'systems':
                continue
            if key not in sections:
                raise SystemExit(f'mlcheck: config error: {path}: section {key!r} cannot be merged '
                                 f'with the other sites (it has no target_systems)')
            sections[key] += [{'target_systems': names, **entry} for entry in entries]
        systems += site['systems']
    seen = set()
    for system in systems:
        if system['name'] in seen:
            raise SystemExit(f"mlcheck: config error: system {system['name']!r} is defined by two "
                             f"files in {CONFIG_DIR}")
        seen.add(system['name'])
    systems.sort(key=is_catch_all)     # stable: the sites keep their order, catch-alls go last
    return {'systems': systems, **{key: entries for key, entries in sections.items() if entries}}


def systems_naming(systems, hostname):
    """Names of the systems, other than catch-alls, with a pattern that matches all of `hostname`."""
    return [s['name'] for s in systems
            if not is_catch_all(s) and any(re.fullmatch(p, hostname) for p in s['hostnames'])]


def check_unambiguous(systems, hostname, argv=None, environ=os.environ):
    """Two sites whose patterns both match the whole hostname (LUMI's and Perlmutter's compute
    nodes are both nid\\d+) would silently run the first one's settings: ask for the system.
    (A pattern matching only a prefix, Perlmutter's login\\d+ of login01.frontier..., is less
    specific: the first match, in file order, is the more specific one there.)"""
    argv = sys.argv[1:] if argv is None else argv
    if environ.get('RFM_SYSTEM') or any(arg.startswith('--system') for arg in argv):
        return
    names = systems_naming(systems, hostname)
    if len(names) > 1:
        raise SystemExit(f"mlcheck: hostname {hostname!r} matches systems {', '.join(names)} of "
                         f"{CONFIG_DIR}: pick one with --system=<name> or RFM_SYSTEM=<name>")


site_configuration = merged({path: load_site(path) for path in site_files()})
check_unambiguous(site_configuration['systems'], socket.gethostname())
