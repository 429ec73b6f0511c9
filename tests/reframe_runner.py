"""Running reframe from the tests, into a private prefix so no user results are touched:
stage, output, perf logs, the results database and dry-run perf logs all go under it."""

import difflib
import json
import os
import pathlib
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import margins
from conftest import REPO
from mlcheck.data.staging import stage_mnist

REFRAME = os.path.join(os.path.dirname(sys.executable), 'reframe')
# for a run whose test reads no per-rank figure: no rank timed alone (MNIST's solo phase is 35
# steps, three of its 1-node epochs), and with it no slow-rank rule
NO_SOLO = ('-S', 'solo_steps=0')


def start_reframe(config, prefix, *args, perflogdir=None, env=None):
    """reframe -C config/<config>.py (or the file `config`) -c checks/, writing under `prefix`
    (perf logs too, unless `perflogdir` is given), as a running process."""
    if not os.path.isfile(str(config)):
        config = os.path.join(REPO, 'config', f'{config}.py')
    command = [REFRAME, '-C', str(config),
               '-c', os.path.join(REPO, 'checks'), '--prefix', str(prefix),
               '--perflogdir', str(perflogdir or prefix / 'perflogs'),
               '--report-file', str(prefix / 'report.json'), *args]
    prefix.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, 'RFM_SAVE_LOG_FILES': 'n', 'RFM_SQLITE_DB_FILE': str(prefix / 'results.db'),
           'MLCHECK_DRY_RUN_PERFLOG_DIR': str(prefix / 'dry-run-perflogs'), **(env or {})}
    return subprocess.Popen(command, cwd=prefix, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def run_reframe(config, prefix, *args, timeout=900, judged=True, **kwargs):
    """start_reframe() and wait for it: a CompletedProcess with its output. The figures its
    references judged are recorded for bin/run-tests's table of margins (tests/margins.py), unless
    not `judged`: a run whose test lets its figures fail their references (a fault on purpose, a
    run that only the report or the node sweep judges)."""
    started = int(time.time())
    process = start_reframe(config, prefix, *args, **kwargs)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    if judged:
        record_margins(kwargs.get('perflogdir') or prefix / 'perflogs', (started, time.time() + 1))
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def record_margins(perflogdir, period):
    """The judged figures of the perf logs under `perflogdir` in `period`, for tests/margins.py;
    the slowest rank's fraction also against the simulated partition's slow-rank limit."""
    if os.environ.get(margins.ENV):
        from conftest import settings_of
        margins.record_perflogs(perflogdir, period, settings_of('simulated', 'sim:cluster').slow_rank_fraction)


def utc_now(round_up=False):
    """Now in ReFrame's period syntax, whole seconds as in the perf log: rounded down for a start,
    up for an end (the perf log shows a job done at 05.6 as 05, in the period up to 06)."""
    now = datetime.now(timezone.utc) + (timedelta(seconds=1) if round_up else timedelta())
    return now.strftime('%Y%m%dT%H%M%S+0000')


def report_cases(prefix, check=None):
    """The test cases of the run report, of one check class if given."""
    with open(prefix / 'report.json') as f:
        report = json.load(f)
    cases = [case for run in report['runs'] for case in run['testcases']]
    return [c for c in cases if check is None or c['name'].startswith(check + ' ')]


def simulated_config_with(tmp_path, **mlcheck):
    """A site config file in `tmp_path`: config/simulated.py with these extras.mlcheck keys replaced."""
    path = tmp_path / 'simulated_with.py'
    simulated = os.path.join(REPO, 'config', 'simulated.py')
    path.write_text(
        'import importlib.util\n'
        f"spec = importlib.util.spec_from_file_location('simulated', {simulated!r})\n"
        'module = importlib.util.module_from_spec(spec)\n'
        'spec.loader.exec_module(module)\n'
        'site_configuration = module.site_configuration\n'
        f"site_configuration['systems'][0]['partitions'][0]['extras']['mlcheck'].update({mlcheck!r})\n")
    return path


def dry_run_scripts(config, system, tmp, *args):
    """{(check, num_nodes): (job script, stage directory)} of a dry run of every check of `config`
    on `system` into a new prefix under `tmp`, the datasets staged in `tmp`/data once (the checks
    read MNIST's headers at setup; CIFAR-100's directory need only exist)."""
    data = tmp / 'data'
    if not data.exists():
        stage_mnist(str(data))
        (data / 'cifar-100-python').mkdir()
    prefix = tmp / f'rfm{len(list(tmp.glob("rfm*")))}'
    done = run_reframe(config, prefix, '--system', system, '--dry-run', '-S', f'data_dir={data}', *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return {(case['name'].split()[0], case['num_nodes']):
            ((pathlib.Path(case['stagedir']) / 'rfm_job.sh').read_text(), pathlib.Path(case['stagedir']))
            for case in report_cases(prefix)}


def job_file(case, name='rfm_job.out'):
    """A file of a test case's job: in its output directory if it passed; ReFrame keeps a failed
    case's files (one that failed only its performance too) in its stage directory."""
    return os.path.join(case['outputdir'] if case['result'] == 'pass' else case['stagedir'], name)


def perf(case):
    """{variable: [value, reference, lower, upper, unit, result]} of a reported test case."""
    return {key.split(':')[-1]: entry for key, entry in case['perfvalues'].items()}


def job_scripts_by_image(prefix, image_paths=()):
    """{image name: job script} of the run under `prefix`, with what each variant has of its own
    by nature (stage directory, job name, image name, and any of `image_paths`) written OWN, so
    that the scripts of two images can be compared line by line."""
    scripts = {}
    for case in report_cases(prefix):
        text = (prefix / case['stagedir'] / 'rfm_job.sh').read_text()
        for own in (case['stagedir'], *map(str, image_paths), case['hashcode'], case['image']):
            text = text.replace(own, 'OWN')
        scripts[case['image']] = text
    return scripts


def changed_lines(before, after):
    """The lines of text `before` that `after` lacks ('- ...') and those it adds ('+ ...')."""
    return [line for line in difflib.ndiff(before.splitlines(), after.splitlines())
            if line[:1] in '+-']


# one image of each generation config/lumi.py names, each with its own RCCL settings
OLD_IMAGE = 'appl/local/containers/sif-images/lumi-pytorch-rocm-6.2.4-test.sif'
NEW_IMAGE = ('appl/local/laifs/containers/lumi-multitorch-u24r70f21m50t210-20260415_130625/'
             'lumi-multitorch-full-u24r70f21m50t210-20260415_130625.sif')


def lumi_config_under(root):
    """config/lumi.py with LUMI's /appl/local moved under `root`, and one (empty) image there of
    each generation it names: a dry run finds them as it would on LUMI."""
    for image in (OLD_IMAGE, NEW_IMAGE):
        (root / image).parent.mkdir(parents=True)
        (root / image).touch()
    config = root / 'lumi_here.py'
    config.write_text((pathlib.Path(REPO) / 'config' / 'lumi.py').read_text().replace("'/appl/local/", f"'{root}/appl/local/"))
    return config
