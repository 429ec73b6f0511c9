"""ReFrame configuration pieces shared by every site file in config/.

A site file describes its systems and partitions (site knowledge) and takes the rest from here,
so every site writes the same perf log format.
"""

import os

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'config')

# One perf log line per performance value (perflog_multiline), with what identifies it:
# where, which check and image, how many nodes and tasks, which job on which nodes.
PERFLOG_FIELDS = (
    '%(check_job_completion_time)s|reframe %(version)s|%(check_system)s:%(check_partition)s|'
    '%(check_name)s|%(check_image)s|%(check_num_nodes)s|%(check_num_tasks)s|'
    '%(check_jobid)s|%(check_job_nodelist)s|'
)
PERFVAR_FIELDS = ('%(check_perf_var)s|%(check_perf_value)s|%(check_perf_unit)s|%(check_perf_ref)s|'
                  '%(check_perf_lower_thres)s|%(check_perf_upper_thres)s|%(check_perf_result)s')


def logging_config():
    return [{
        'handlers': [
            {'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s'},
            {'type': 'file', 'name': 'reframe.log', 'level': 'debug', 'append': False,
             'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s'},
        ],
        'handlers_perflog': [{
            'type': 'filelog',
            'prefix': '%(check_system)s/%(check_partition)s',
            'level': 'info',
            'format': PERFLOG_FIELDS + PERFVAR_FIELDS,
            'append': True,
        }],
        'perflog_multiline': True,
    }]


def references_file(system):
    """Performance references of a system: ReFrame's external YAML, indexed by
    partition, image and node count (see config/references/)."""
    return os.path.join(CONFIG_DIR, 'references', f'{system}.yaml')


def builtin_environment(target_systems):
    # the checks run in the image's (or host's) own Python; no compiler environment is needed
    return {'name': 'builtin', 'cc': 'cc', 'cxx': '', 'ftn': '', 'target_systems': target_systems}
