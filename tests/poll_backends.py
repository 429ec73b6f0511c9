"""Poll Slurm jobs with both of ReFrame's Slurm backends, as a session would: prints
{backend: {job id: [state, exit code]}} as JSON. A script, not a test helper imported by pytest,
because ReFrame's runtime is one per process.

    python tests/poll_backends.py config/simulated.py JOBID...
"""

import json
import sys
import time

import reframe.core.config as config
import reframe.core.runtime as rt
from reframe.core.backends import getscheduler


def poll(backend, job_ids):
    scheduler = getscheduler(backend)()
    jobs = []
    for jobid in job_ids:
        job = scheduler.make_job(name=f'poll-{jobid}')
        job._jobid, job._submit_time = jobid, time.time() - 3600     # as after sbatch
        jobs.append(job)
    scheduler.poll(*jobs)
    return {job.jobid: [job.state, job.exitcode] for job in jobs}


if __name__ == '__main__':
    site = config.load_config(sys.argv[1])
    site.select_subconfig('sim:cluster')
    rt.init_runtime(site)
    print(json.dumps({backend: poll(backend, sys.argv[2:]) for backend in ('slurm', 'squeue')}))
