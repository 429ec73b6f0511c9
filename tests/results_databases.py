"""Results database files as ReFrame 4.10.4 writes them: each run report is stored by ReFrame's
own storage code (in a child process, under a scratch config whose storage is the file), so the
tables, the metadata row and the JSON are ReFrame's, hostile ids included."""

import json
import os
import subprocess
import sys
import textwrap
import uuid

from mlcheck import REPO

CONFIG = '''site_configuration = {
    'systems': [{'name': 'sim', 'hostnames': ['.*'], 'partitions': [{
        'name': 'cluster', 'scheduler': 'local', 'launcher': 'local', 'environs': ['builtin']}]}],
    'environments': [{'name': 'builtin'}],
    'storage': [{'enable': True, 'sqlite_db_file': %r}],
}
'''

STORE = textwrap.dedent('''
    import json, sys
    from mlcheck.harness.reframe_api import runtime_for
    runtime_for(sys.argv[1], 'sim')
    from reframe.frontend.reporting.storage import StorageBackend
    for report in json.load(open(sys.argv[2])):
        StorageBackend.default().store(report)
''')


def testcase(session, index, value, finished, node='nid001', name='MNISTDistributedCheck %image=host'):
    """A stored test case of `session` with one figure, samples_per_s = `value`, on `node`."""
    return {'name': name, 'system': 'sim', 'partition': 'cluster', 'environ': 'builtin',
            'job_completion_time_unix': finished, 'job_nodelist': [node], 'num_nodes': 1,
            'result': 'pass', 'fail_phase': None, 'fail_reason': None, 'session_uuid': session,
            'uuid': f'{session}:0:{index}', 'jobid': str(100 + index), 'num_tasks': 2,
            'perfvalues': {'sim:cluster:samples_per_s': [value, 0, None, None, 'samples/s', 'pass']}}


def report(session, started, cases, data_version='4.2'):
    """A run report of one run holding `cases`."""
    return {'session_info': {'uuid': session, 'data_version': data_version,
                             'time_start_unix': started, 'time_end_unix': started + 60},
            'runs': [{'run_index': 0, 'testcases': cases}], 'restored_cases': []}


def sweep(session, started, values=(100.0, 101.0)):
    """A one-node sweep of `session`: nid001, nid002, ... each with one figure."""
    return report(session, started, [testcase(session, i, v, started + 10 + i, f'nid{i + 1:03d}')
                                     for i, v in enumerate(values)])


def new_session():
    return str(uuid.uuid4())


def store(directory, *reports):
    """A results database `directory`/results.db holding `reports`, written by ReFrame; and the
    scratch config that names it (for reframe's own reading of it)."""
    path, config = os.path.join(directory, 'results.db'), os.path.join(directory, 'storage.py')
    with open(config, 'w') as stream:
        stream.write(CONFIG % path)
    with open(os.path.join(directory, 'reports.json'), 'w') as stream:
        json.dump(list(reports), stream)
    subprocess.run([sys.executable, '-c', STORE, config, os.path.join(directory, 'reports.json')],
                   check=True, cwd=REPO, env={**os.environ, 'PYTHONPATH': REPO})
    os.remove(os.path.join(directory, 'reports.json'))
    return path, config
