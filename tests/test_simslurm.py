"""Tests for bin/simslurm, the simulated Slurm cluster used in CI.

They bring the cluster up (as root, with slurm-wlm and munge installed) and
leave it running: other tests and the ReFrame end-to-end runs use it.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlcheck.simulated import cluster as simcluster

REPO = Path(__file__).resolve().parents[1]
SIMSLURM = REPO / "bin" / "simslurm"

pytestmark = [
    pytest.mark.skipif(
        not hasattr(os, "geteuid") or os.geteuid() != 0,
        reason="bin/simslurm needs root (it starts slurmctld/slurmd and writes /etc/slurm)",
    ),
    pytest.mark.skipif(
        shutil.which("slurmctld", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") is None,
        reason="slurmctld not installed (apt-get install slurm-wlm munge, or run bin/setup)",
    ),
]


def clean_env(**overrides):
    """The caller's environment without SLURM_* variables (an enclosing job's
    SLURM_JOB_ID, or another SLURM_CONF, would redirect srun/sbatch)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(overrides)
    return env


def run(args, timeout=60, env=None, **kwargs):
    return subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else clean_env(),
        **kwargs,
    )


def simslurm(*args, timeout=120, env=None):
    return run([SIMSLURM, *args], timeout=timeout, env=env)


def explain(proc):
    return f"exit code {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"


def daemon_lines(status_stdout):
    """The per-daemon lines of `simslurm status` (they contain the pids)."""
    return [line for line in status_stdout.splitlines() if "running" in line]


def test_status_is_healthy(cluster):
    proc = simslurm("status", timeout=60)
    assert proc.returncode == 0, explain(proc)
    assert "slurmctld" in proc.stdout and "slurmd nid001" in proc.stdout
    assert "mariadbd" in proc.stdout and "slurmdbd" in proc.stdout
    assert "NOT running" not in proc.stdout
    assert "idle" in proc.stdout or "mix" in proc.stdout or "alloc" in proc.stdout


def test_accounting_database_is_private(cluster):
    """The cluster's MariaDB listens on no TCP port (only its socket under SIMSLURM_DIR), and
    slurmdbd.conf, which holds its password, is readable by root (the SlurmUser) alone."""
    status = simslurm("status", timeout=60).stdout
    [pid] = [line.split("pid ")[1].split(",")[0] for line in status.splitlines() if line.startswith("mariadbd ")]
    listening = run(["ss", "-ltnpH"], timeout=10).stdout
    assert f"pid={pid}," not in listening, listening
    conf = os.stat("/etc/slurm/slurmdbd.conf")
    assert (conf.st_uid, conf.st_mode & 0o777) == (0, 0o600)


def test_up_brings_back_a_dead_slurmdbd(cluster):
    """Without slurmdbd the cluster is not healthy (sacct, and so ReFrame's slurm backend, would
    fail): status says so, and up starts it again without touching the rest."""
    before = simslurm("status", timeout=60).stdout
    [pid] = [int(line.split("pid ")[1].split(",")[0]) for line in before.splitlines()
             if line.startswith("slurmdbd ")]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    status = simslurm("status", timeout=60)
    assert status.returncode != 0 and "slurmdbd         NOT running" in status.stdout, explain(status)
    up = simslurm("up")
    assert up.returncode == 0 and "started slurmdbd" in up.stdout, explain(up)
    after = simslurm("status", timeout=60)
    assert after.returncode == 0, explain(after)
    unchanged = [line for line in daemon_lines(before) if not line.startswith("slurmdbd ")]
    assert [line for line in daemon_lines(after.stdout) if not line.startswith("slurmdbd ")] == unchanged
    assert run(["sacct", "-X", "-n"], timeout=30).returncode == 0


def test_node_names_resolve_to_localhost(cluster):
    proc = run(["getent", "hosts", "nid001", "nid002"], timeout=10)
    assert proc.returncode == 0, explain(proc)
    addrs = {line.split()[1]: line.split()[0] for line in proc.stdout.splitlines()}
    assert addrs == {"nid001": "127.0.0.1", "nid002": "127.0.0.1"}


CLUSTER_PROGRAMS = ("slurmctld", "slurmd", "slurmdbd", "slurmstepd", "srun", "mariadbd")


def cluster_listeners():
    """{(program, address)} of every TCP port a program of the cluster listens on."""
    found = set()
    for line in run(["ss", "-ltnpH"], timeout=10).stdout.splitlines():
        fields = line.split()
        for program in CLUSTER_PROGRAMS:
            if f'(("{program}",' in line or f'),("{program}",' in line:
                found.add((program, fields[3].rsplit(":", 1)[0]))
    return found


def test_nothing_of_the_cluster_listens_beyond_loopback(cluster):
    """slurmctld, slurmdbd and the slurmd's, and srun and slurmstepd while a step runs, listen
    on loopback addresses only, not on every address of the machine (0.0.0.0, *)."""
    name = "simslurm-listen-test"
    step = subprocess.Popen(["srun", "-J", name, "-N", "2", "-w", "nid[001-002]", "sleep", "5"],
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while "srun" not in {p for p, _ in cluster_listeners()} and time.monotonic() < deadline:
            time.sleep(0.2)
        listeners = cluster_listeners()
        step.communicate(timeout=120)
    finally:
        # a killed srun leaves its job allocated (InactiveLimit=0): end it too
        if step.poll() is None:
            step.kill()
            step.communicate()
            run(["scancel", "--name", name], timeout=30)
    # every daemon, and srun, was seen listening: the test looked at them all
    assert {"slurmctld", "slurmd", "slurmdbd", "srun"} <= {p for p, _ in listeners}, listeners
    beyond = {(p, a) for p, a in listeners if not (a.startswith("127.") or a == "[::1]")}
    assert not beyond, f"listening beyond loopback: {sorted(beyond)}"


def test_up_records_the_node_count_for_the_config(cluster):
    """config/simulated.py reads SIMSLURM_DIR/nodes (max_nodes): the running cluster's count."""
    nodes = Path(os.environ.get("SIMSLURM_DIR", simcluster.DEFAULT_DIR)) / simcluster.NODES_FILE
    assert nodes.read_text() == os.environ.get("SIMSLURM_NODES", str(simcluster.DEFAULT_NODES)) + "\n"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs at least 2 CPUs")
def test_srun_mask_cpu_binding_on_two_nodes(cluster):
    # Each task reports its node, local id and the CPUs it may run on.
    probe = (
        "import os; print(os.environ['SLURMD_NODENAME'], os.environ['SLURM_LOCALID'], "
        "','.join(map(str, sorted(os.sched_getaffinity(0)))))"
    )
    proc = run(
        ["srun", "-N", "2", "-w", "nid[001-002]", "--ntasks-per-node=2", "--cpu-bind=mask_cpu:0x1,0x2",
         sys.executable, "-c", probe],
        timeout=60,
    )
    assert proc.returncode == 0, explain(proc)
    tasks = sorted(tuple(line.split()) for line in proc.stdout.splitlines() if line.strip())
    assert tasks == [
        ("nid001", "0", "0"),
        ("nid001", "1", "1"),
        ("nid002", "0", "0"),
        ("nid002", "1", "1"),
    ], explain(proc)


def submit(tmp_path, name, *body, nodes=1):
    """sbatch a job script of `body` lines; its id."""
    script = tmp_path / f"{name}.sh"
    script.write_text("\n".join(["#!/bin/bash", f"#SBATCH -N {nodes}", "#SBATCH --time=2", *body, ""]))
    proc = run(["sbatch", "--parsable", "-o", tmp_path / f"{name}.out", script], timeout=30, cwd=tmp_path)
    assert proc.returncode == 0, explain(proc)
    return proc.stdout.strip().split(";")[0]


def accounted(job_ids, timeout=60):
    """{job id: (state, exit code)} once the accounting (sacct) has every job finished, and says
    the same a second later: a job of a few milliseconds was once FAILED with exit code 0:0 for a
    moment, and 3:0 after (its record came before its completion was stored)."""
    finished = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")
    deadline = time.monotonic() + timeout
    before = None
    while True:
        proc = run(["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids), "-o", "JobID,State,ExitCode"],
                   timeout=30)
        assert proc.returncode == 0, explain(proc)
        jobs = {jobid: (state.split()[0], code) for jobid, state, code in
                (line.split("|") for line in proc.stdout.splitlines())}
        done = all(jobs.get(j, ("",))[0] in finished for j in job_ids)
        if (done and jobs == before) or time.monotonic() > deadline:
            return jobs
        before = jobs if done else None
        time.sleep(1.0 if done else 0.5)


def test_sbatch_two_node_job(cluster, tmp_path):
    job_id = submit(tmp_path, "job", "#SBATCH -w nid[001-002]", "#SBATCH --ntasks-per-node=1",
                    "srun bash -c 'echo task $SLURM_PROCID on $SLURMD_NODENAME'", nodes=2)
    out = tmp_path / "job.out"
    state = accounted([job_id]).get(job_id)
    assert state == ("COMPLETED", "0:0"), f"job {job_id}: {state}; output: {out.read_text() if out.exists() else '(none)'}"
    lines = sorted(out.read_text().splitlines())
    assert lines == ["task 0 on nid001", "task 1 on nid002"], out.read_text()


def test_sacct_reports_state_and_exit_code_of_finished_jobs(cluster, tmp_path):
    """The job accounting (slurmdbd and its MariaDB) has a passing and a failing job with their
    exit codes. ReFrame's slurm backend, which the simulated partition uses as the real sites do,
    reads them from there; its squeue backend cannot: squeue lists no finished job, so it takes
    every job it no longer sees, the failed one too, for COMPLETED, with no exit code."""
    passing = submit(tmp_path, "passing", "srun true")
    failing = submit(tmp_path, "failing", "srun true", "exit 3")
    assert accounted([passing, failing]) == {passing: ("COMPLETED", "0:0"), failing: ("FAILED", "3:0")}

    proc = run([sys.executable, Path(__file__).with_name("poll_backends.py"), REPO / "config" / "simulated.py",
                passing, failing], timeout=60, env=clean_env(PYTHONPATH=str(REPO)))
    assert proc.returncode == 0, explain(proc)
    assert json.loads(proc.stdout) == {
        "slurm": {passing: ["COMPLETED", 0], failing: ["FAILED", 3]},
        "squeue": {passing: ["COMPLETED", None], failing: ["COMPLETED", None]},
    }


def test_up_is_idempotent(cluster):
    before = simslurm("status", timeout=60)
    proc = simslurm("up")
    assert proc.returncode == 0, explain(proc)
    assert "already up" in proc.stdout, explain(proc)
    after = simslurm("status", timeout=60)
    assert after.returncode == 0, explain(after)
    # Same pids: nothing was restarted.
    assert daemon_lines(after.stdout) == daemon_lines(before.stdout)


def _listening_socket():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("role", ["slurmctld", "slurmd"])
def test_port_in_use_is_reported(cluster, tmp_path, role):
    """A second cluster (own SIMSLURM_DIR and ports) whose port is taken by
    this test process must fail with a clear message, before it touches
    /etc/slurm/slurm.conf, and leave the main cluster running."""
    conf = Path("/etc/slurm/slurm.conf").read_text()
    with _listening_socket() as busy:
        busy_port = busy.getsockname()[1]
        if role == "slurmctld":
            ctld_port = busy_port
            slurmd_base = busy_port + 1 if busy_port < 65535 else busy_port - 1
            var = "SIMSLURM_CTLD_PORT"
        else:
            ctld_port = _free_port()
            while ctld_port == busy_port:
                ctld_port = _free_port()
            slurmd_base = busy_port
            var = "SIMSLURM_SLURMD_PORT_BASE"
        env = clean_env(
            SIMSLURM_DIR=str(tmp_path / "simslurm"),
            SIMSLURM_NODES="1",
            SIMSLURM_CTLD_PORT=str(ctld_port),
            SIMSLURM_SLURMD_PORT_BASE=str(slurmd_base),
        )
        proc = simslurm("up", timeout=60, env=env)
    assert proc.returncode != 0, explain(proc)
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith("simslurm: error: "), explain(proc)
    assert f"port {busy_port}" in error and role in error, explain(proc)
    assert f"pid {os.getpid()}" in error, explain(proc)
    assert var in error, explain(proc)
    # The main cluster is untouched.
    assert Path("/etc/slurm/slurm.conf").read_text() == conf
    status = simslurm("status", timeout=60)
    assert status.returncode == 0, explain(status)


def test_jobs_run_in_the_cluster_s_cgroup_weighted_above_other_work(cluster):
    """Every job step runs in the cluster's cgroup (processes.PARTITION_CGROUP), which weighs 100
    times a process outside it: another process on the machine leaves the jobs their cores."""
    from mlcheck.simulated import processes
    proc = run(["srun", "-N1", "-w", "nid002", "cat", "/proc/self/cgroup"], timeout=60)
    assert proc.returncode == 0, explain(proc)
    group = processes.partition_cgroup()
    v1 = os.path.exists(os.path.join(group, "cpu.shares"))
    # cgroup v1: the `cpu` controller's line; v2: the unified line, "0::"
    [where] = [line.split(":", 2)[2] for line in proc.stdout.splitlines()
               if (("cpu" in line.split(":")[1].split(",")) if v1 else line.startswith("0::"))]
    assert where == "/" + processes.PARTITION_CGROUP, proc.stdout
    weight, default = ("cpu.shares", 1024) if v1 else ("cpu.weight", 100)
    assert int(open(os.path.join(group, weight)).read()) == 100 * default
