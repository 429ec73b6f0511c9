"""config/all.py, the one configuration of every site: `reframe -c checks/ -r` as written."""

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, load_site_config
from reframe_runner import REFRAME

ALL = os.path.join(REPO, 'config', 'all.py')


def load_all():
    spec = importlib.util.spec_from_file_location('mlcheck_config_all', ALL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reframe_list(tmp_path, **env):
    """`reframe -c checks/ -l` as a user types it, in an empty directory and home."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith('RFM_')}
    return subprocess.run([REFRAME, '-c', os.path.join(REPO, 'checks'), '-l'], cwd=tmp_path,
                          env={**clean, 'HOME': str(tmp_path), **env}, capture_output=True, text=True,
                          timeout=300)


def test_reframe_with_the_entry_point_lists_the_simulated_checks(tmp_path):
    done = reframe_list(tmp_path, RFM_CONFIG_FILES=ALL)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert 'Found 18 check(s)' in done.stdout and "'sim'" in done.stdout


def test_reframe_without_an_mlcheck_configuration_says_how_to_give_one(tmp_path):
    done = reframe_list(tmp_path)
    assert done.returncode != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if 'mlcheck' in line]
    assert lines == ["mlcheck: system 'generic' has no mlcheck configuration: give one with "
                     "-C config/<site>.py, or RFM_CONFIG_FILES=<mlcheck>/config/all.py "
                     "(`. .venv/bin/activate` sets it)"], done.stdout[-2000:]
    assert 'parameters are undefined' not in done.stdout + done.stderr


def test_every_site_file_is_merged_with_the_catch_all_last():
    config = load_all().site_configuration
    names = [system['name'] for system in config['systems']]
    # sites added later (e.g. config/alps.py) come in too: at least these, the fallback last
    assert names[-1] == 'sim' and {'frontier', 'lumi', 'perlmutter'} <= set(names[:-1]), names
    # each site keeps its own results database
    storage = {tuple(s['target_systems']): s['sqlite_db_file'] for s in config['storage']}
    for site, system in (('simulated', 'sim'), ('lumi', 'lumi')):
        assert storage[(system,)] == load_site_config(site)['storage'][0]['sqlite_db_file']
    assert all(entry['target_systems'] for entry in config['environments'] + config['logging'])


def site_file(directory, name, systems, extra=''):
    entries = ', '.join(f"{{'name': '{s}', 'hostnames': {pats!r}, 'partitions': []}}"
                        for s, pats in systems.items())
    (directory / f'{name}.py').write_text(
        f"site_configuration = {{'systems': [{entries}], "
        f"'environments': [{{'name': 'builtin'}}]{extra}}}\n")


def test_a_site_file_added_later_is_included_and_catch_alls_go_last(tmp_path):
    all_py = load_all()
    site_file(tmp_path, 'aaa', {'anywhere': ['.*']})
    site_file(tmp_path, 'zzz', {'alps': [r'daint-ln\d+']})
    sites = {path: all_py.load_site(path) for path in all_py.site_files(str(tmp_path))}
    config = all_py.merged(sites)
    assert [s['name'] for s in config['systems']] == ['alps', 'anywhere']
    assert [e['target_systems'] for e in config['environments']] == [['anywhere'], ['alps']]


def test_a_system_defined_twice_or_an_unscoped_section_is_a_one_line_error(tmp_path):
    all_py = load_all()
    site_file(tmp_path, 'one', {'x': ['a']})
    site_file(tmp_path, 'two', {'x': ['b']})
    with pytest.raises(SystemExit, match="system 'x' is defined by two files"):
        all_py.merged({p: all_py.load_site(p) for p in all_py.site_files(str(tmp_path))})
    site_file(tmp_path, 'two', {'y': ['b']}, extra=", 'autodetect_methods': ['hostname']")
    with pytest.raises(SystemExit, match="two.py: section 'autodetect_methods' cannot be merged"):
        all_py.merged({p: all_py.load_site(p) for p in all_py.site_files(str(tmp_path))})


def test_a_host_that_two_sites_match_must_name_its_system():
    """LUMI's, Perlmutter's and Alps' compute nodes are all nidNNNNNN: the first site would win silently."""
    all_py = load_all()
    systems = all_py.site_configuration['systems']
    with pytest.raises(SystemExit, match=r"hostname 'nid001234' matches systems daint, lumi, perlmutter .*"
                                         r"--system=<name> or RFM_SYSTEM=<name>"):
        all_py.check_unambiguous(systems, 'nid001234', argv=['-r'], environ={})
    all_py.check_unambiguous(systems, 'nid001234', argv=['--system=perlmutter', '-r'], environ={})
    all_py.check_unambiguous(systems, 'nid001234', argv=['-r'], environ={'RFM_SYSTEM': 'lumi'})
    for host in ('uan01', 'login12', 'login01.frontier.olcf.ornl.gov', 'daint-ln001', 'dgx-login01', 'vm'):
        all_py.check_unambiguous(systems, host, argv=['-r'], environ={})
    # ReFrame takes the first system with a pattern that re.match-es: Frontier's, not Perlmutter's
    # login\d+, on a Frontier login node
    [first, *_] = [s['name'] for s in systems if any(re.match(p, 'login01.frontier.olcf.ornl.gov')
                                                     for p in s['hostnames'])]
    assert first == 'frontier'


def test_setup_makes_activate_export_the_entry_point_once(tmp_path):
    """bin/setup's line in the venv's activate script: added once, rewritten when the checkout moves."""
    activate = tmp_path / 'bin' / 'activate'
    activate.parent.mkdir()
    activate.write_text('VIRTUAL_ENV=/x\nexport VIRTUAL_ENV\n')
    function = subprocess.run(['sed', '-n', '/^export_config_in_activate()/,/^}/p',
                               os.path.join(REPO, 'bin', 'setup')], capture_output=True, text=True).stdout
    script = (f'say() {{ :; }}\n{function}\nvenv={tmp_path}\nrepo=/old\nexport_config_in_activate\n'
              f'repo={REPO}\nexport_config_in_activate\nexport_config_in_activate\n'
              f'. {activate}\necho "$RFM_CONFIG_FILES"')
    done = subprocess.run(['bash', '-euc', script], capture_output=True, text=True)
    assert done.stdout.strip() == ALL, done.stderr
    assert activate.read_text().count('RFM_CONFIG_FILES') == 1
    assert activate.read_text().startswith('VIRTUAL_ENV=/x\nexport VIRTUAL_ENV\n')


def test_the_activate_line_is_quoted_for_any_checkout_path(tmp_path):
    """Issue 48 item 10: a checkout under '/tmp/a b/it's' (on 42e5ead the line was unquoted: the
    sourced activate failed or exported the wrong path)."""
    activate = tmp_path / 'bin' / 'activate'
    activate.parent.mkdir()
    activate.write_text('')
    function = subprocess.run(['sed', '-n', '/^export_config_in_activate()/,/^}/p',
                               os.path.join(REPO, 'bin', 'setup')], capture_output=True, text=True).stdout
    repo = "/tmp/a b/it's"
    script = (f'say() {{ :; }}\n{function}\nvenv={tmp_path}\nrepo="{repo}"\nexport_config_in_activate\n'
              f'. {activate}\necho "$RFM_CONFIG_FILES"')
    done = subprocess.run(['bash', '-euc', script], capture_output=True, text=True)
    assert done.stdout == f'{repo}/config/all.py\n', done.stderr


# Loaded as ReFrame loads a site config, in a process of its own, watched by an audit hook: every
# file opened for writing, every directory made or file renamed, every process started.
WATCHED_LOAD = '''
import importlib.util, json, sys
seen = []
def watch(event, args):
    if event == 'open' and args[1] is not None and any(c in str(args[1]) for c in 'wax+'):
        seen.append(f'open {args[0]} {args[1]}')
    elif event == 'open' and isinstance(args[2], int) and args[2] & 0o3:   # os.open, O_WRONLY|O_RDWR
        seen.append(f'os.open {args[0]}')
    elif event in ('os.mkdir', 'os.rename', 'os.replace', 'subprocess.Popen', 'os.exec',
                   'os.posix_spawn', 'os.fork', 'os.system'):
        seen.append(f'{event} {args[0]}')
sys.addaudithook(watch)
spec = importlib.util.spec_from_file_location('site_all', sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps({'seen': seen, 'torch': 'torch' in sys.modules,
                  'speed': [p['extras']['mlcheck'].get('machine_speed') for s in module.site_configuration['systems']
                            for p in s['partitions']]}))
'''


@pytest.mark.parametrize('config', ['all', 'simulated'])
def test_loading_the_config_measures_and_writes_nothing(config, tmp_path):
    """Issue 37 item 3: config/all.py is every `reframe` run's config at a site. Loading it (or
    config/simulated.py) runs no speed workload, starts no process and writes no file; the
    simulated partition's speed is measured only when one of its tests is set up."""
    home = tmp_path / 'home'
    home.mkdir()
    env = {**os.environ, 'HOME': str(home), 'XDG_CACHE_HOME': str(home / '.cache'),
           'SIMSLURM_DIR': str(tmp_path / 'simslurm'), 'RFM_SYSTEM': 'sim'}
    # -B: no bytecode written for the config files themselves
    done = subprocess.run([sys.executable, '-B', '-c', WATCHED_LOAD, os.path.join(REPO, 'config', f'{config}.py')],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert loaded['seen'] == [] and not loaded['torch'], loaded
    assert 'measured' in loaded['speed']
    assert sorted(p.name for p in tmp_path.rglob('*')) == ['home']


def test_every_system_writes_under_its_own_prefix_whatever_the_directory(tmp_path):
    """`reframe -C config/<site>.py -c checks/ -r` from any directory writes stage, output and perf
    logs under the system's prefix (ReFrame puts all three below it), not into the directory staff
    happen to be in: the simulated system under the checkout's var/rfm (where README and the
    report's examples look), a site's under the user's ~/.local/share/mlcheck/<system>."""
    prefixes = {s['name']: s.get('prefix') for s in load_all().site_configuration['systems']}
    assert prefixes.pop('sim') == os.path.join(REPO, 'var', 'rfm')
    home = os.path.expanduser('~')
    assert prefixes and all(p == os.path.join(home, '.local', 'share', 'mlcheck', name)
                            for name, p in prefixes.items()), prefixes


def test_dry_run_perf_logs_go_to_the_users_own_cache(monkeypatch):
    """Issue 48 item 10: /tmp/mlcheck-dry-run-$USER, a name another user could make first."""
    from mlcheck.harness.config import dry_run_perflog_dir
    assert dry_run_perflog_dir({'XDG_CACHE_HOME': '/home/u/.cache'}) == '/home/u/.cache/mlcheck/dry-run-perflogs'
    monkeypatch.setenv('HOME', '/home/u')
    assert dry_run_perflog_dir({}) == '/home/u/.cache/mlcheck/dry-run-perflogs'
    assert dry_run_perflog_dir({'MLCHECK_DRY_RUN_PERFLOG_DIR': '/x'}) == '/x'


@pytest.mark.parametrize('argv, environ, expected', [
    (['-c', 'checks/', '--prefix', '/p', '-r'], {}, '/p'),
    (['--prefix=/p', '-r'], {'RFM_PREFIX': '/q'}, '/p'),
    (['--pre', '/p'], {}, '/p'),
    (['-r'], {'RFM_PREFIX': '/q'}, '/q'),
    (['-r', '--prgenv', 'x'], {}, None),
])
def test_the_prefix_a_command_line_gives(argv, environ, expected):
    from mlcheck.harness.config import given_prefix
    assert given_prefix(argv, environ) == expected


def test_reframe_log_goes_under_the_prefix_from_another_directory(tmp_path):
    """New-user trial: stage, output and the database went under the prefix, reframe.log into the
    directory reframe was started in."""
    elsewhere, prefix = tmp_path / 'elsewhere', tmp_path / 'prefix'
    elsewhere.mkdir()
    prefix.mkdir()
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), 'reframe'),
                           '-C', os.path.join(REPO, 'config', 'simulated.py'), '-c', os.path.join(REPO, 'checks'),
                           '--prefix', str(prefix), '--dry-run', '-n', 'MNIST', '-P', 'image=host', '-P', 'num_nodes=1'],
                          cwd=elsewhere, capture_output=True, text=True,
                          env={**os.environ, 'RFM_SQLITE_DB_FILE': str(tmp_path / 'results.db'),
                               'MLCHECK_DRY_RUN_PERFLOG_DIR': str(tmp_path / 'dry')})
    assert done.returncode == 0, done.stdout + done.stderr
    assert list(elsewhere.iterdir()) == []
    assert (prefix / 'reframe.log').is_file() and f"'{prefix}/reframe.log'" in done.stdout
