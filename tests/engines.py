"""Real engines for the deploy tests: a one-node Slurm (munged + slurmctld + slurmd) and Prometheus with
node_exporter, each started on localhost in a temporary folder, waited for by what it answers (never by a
fixed sleep), and stopped at the end with every process it started (by its pid, nothing by name).

Debian's packages: ``slurm-wlm munge prometheus prometheus-node-exporter`` (``.ci/run`` installs them in CI);
without them the tests skip and say which program is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import pytest


def require(*programs: str) -> Dict[str, str]:
    """Full paths of ``programs`` (PATH and the sbin folders), or skip the test naming the missing ones."""
    search = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])
    found = {name: shutil.which(name, path=search) for name in programs}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (Debian: apt-get install slurm-wlm munge prometheus "
                    f"prometheus-node-exporter)")
    return {name: str(path) for name, path in found.items()}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float = 20.0, logs: Sequence[Path] = ()) -> Any:
    """Poll ``probe`` until it returns something true; fail with ``what`` and the logs' tails otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(Exception):
            value = probe()
            if value:
                return value
        if time.monotonic() > deadline:
            tails = "\n".join(f"--- {log}\n{tail(log)}" for log in logs)
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}\n{tails}")
        time.sleep(0.1)


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


class Processes:
    """The processes one fixture started; :meth:`stop` ends each (TERM, then KILL) by its own pid."""

    def __init__(self) -> None:
        self.started: List[subprocess.Popen] = []

    def start(self, argv: Sequence[str], log: Path, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
        handle = open(log, "ab")  # noqa: SIM115 - the process keeps it; closed in stop()
        process = subprocess.Popen(list(argv), stdout=handle, stderr=subprocess.STDOUT, env=env,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        handle.close()
        self.started.append(process)
        return process

    def stop(self) -> None:
        for process in reversed(self.started):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self.started):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=5)


class Slurm:
    """A one-node Slurm cluster: ``run(cmd)`` runs a Slurm client against it."""

    def __init__(self, folder: Path, node: str, env: Dict[str, str], logs: List[Path]) -> None:
        self.folder = folder
        self.node = node
        self.env = env
        self.logs = logs

    def run(self, *argv: str, timeout_s: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout_s)

    def node_state(self) -> str:
        return self.run("sinfo", "-h", "-N", "-o", "%T").stdout.strip()

    def drain_reason(self) -> str:
        return self.run("sinfo", "-R", "-h", "-o", "%E").stdout.strip()

    def job_state(self, job_id: str) -> str:
        return self.run("squeue", "-h", "-j", job_id, "-o", "%T|%r").stdout.strip()

    def resume(self) -> None:
        self.run("scontrol", "update", f"NodeName={self.node}", "State=RESUME")
        wait_for("the node to be idle again", lambda: self.node_state() == "idle", logs=self.logs)


@contextlib.contextmanager
def slurm_cluster(folder: Path, prolog: Path, healthcheck: Optional[Path] = None,
                  until: str = "idle") -> Iterator[Slurm]:
    """munged, slurmctld and slurmd on localhost ports, ``prolog`` as the Prolog (``healthcheck`` as the
    HealthCheckProgram, which slurmd runs as it starts), no cgroups (proctrack/linuxproc, task/none);
    everything under ``folder``. Ready when the node's state reads ``until``."""
    paths = require("munged", "slurmctld", "slurmd", "scontrol", "sinfo", "sbatch", "squeue")
    if os.geteuid() != 0:  # slurmd starts each job's slurmstepd as the job's user: only root may
        pytest.skip("a real slurmd needs root (run the tests as root, as CI's container does)")
    node = socket.gethostname().split(".")[0]
    for sub in ("state", "spool", "munge"):
        (folder / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = folder / "munge" / "munge.socket"
    conf = folder / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=npudoctortest", f"SlurmctldHost={node}(127.0.0.1)", "SlurmUser=root", "SlurmdUser=root",
        f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}", "AuthType=auth/munge",
        f"AuthInfo=socket={sock}", "CredType=cred/munge", f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}", f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}", f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}", "SlurmdDebug=info", "SlurmctldDebug=info",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "SelectType=select/linear", "MpiDefault=none",
        "SchedulerType=sched/builtin", "ReturnToService=2", "SlurmctldParameters=enable_configless",
        f"Prolog={prolog}", "MessageTimeout=5",
        *([f"HealthCheckProgram={healthcheck}", "HealthCheckInterval=3600"] if healthcheck else []),
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN",
        f"PartitionName=debug Nodes={node} Default=YES MaxTime=5 State=UP", ""]))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_CONF": str(conf), "HOME": str(folder),
           "LANG": "C.UTF-8"}
    logs = [folder / "munged.log", folder / "slurmctld.log", folder / "slurmd.log"]
    processes = Processes()
    try:
        processes.start([paths["munged"], "-F", "--force", f"--socket={sock}", f"--key-file={key}",
                         f"--pid-file={folder / 'munge' / 'munged.pid'}",
                         f"--seed-file={folder / 'munge' / 'seed'}", f"--log-file={folder / 'munged.log'}"],
                        folder / "munged.out", env)
        wait_for("munged's socket", sock.exists, logs=logs)
        processes.start([paths["slurmctld"], "-D", "-i", "-f", str(conf)], folder / "slurmctld.out", env)
        processes.start([paths["slurmd"], "-D", "-N", node, "-f", str(conf)], folder / "slurmd.out", env)
        cluster = Slurm(folder, node, env, logs)
        wait_for(f"the node to register {until}", lambda: cluster.node_state() == until, timeout_s=25, logs=logs)
        yield cluster
    finally:
        processes.stop()


class Prometheus:
    def __init__(self, url: str, logs: List[Path]) -> None:
        self.url = url
        self.logs = logs

    def query(self, expr: str) -> List[Dict[str, Any]]:
        with urllib.request.urlopen(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}),
                                    timeout=5) as response:
            answer = json.load(response)
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])


@contextlib.contextmanager
def prometheus_stack(folder: Path, textfile_dir: Path, rules: Optional[Path] = None) -> Iterator[Prometheus]:
    """node_exporter with only the textfile collector on ``textfile_dir``, and Prometheus scraping it every
    second (and evaluating ``rules``); both on free localhost ports."""
    paths = require("prometheus", "prometheus-node-exporter")
    exporter_port, prometheus_port = free_port(), free_port()
    config = folder / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                      + (f"rule_files: ['{rules}']\n" if rules else "") + "scrape_configs:\n"
                      "  - job_name: node\n    static_configs:\n"
                      f"      - targets: ['127.0.0.1:{exporter_port}']\n")
    logs = [folder / "node_exporter.log", folder / "prometheus.log"]
    processes = Processes()
    try:
        processes.start([paths["prometheus-node-exporter"], "--collector.disable-defaults",
                         "--collector.textfile", f"--collector.textfile.directory={textfile_dir}",
                         f"--web.listen-address=127.0.0.1:{exporter_port}"], logs[0])
        processes.start([paths["prometheus"], f"--config.file={config}",
                         f"--storage.tsdb.path={folder / 'tsdb'}",
                         f"--web.listen-address=127.0.0.1:{prometheus_port}"], logs[1])
        stack = Prometheus(f"http://127.0.0.1:{prometheus_port}", logs)
        wait_for("Prometheus to answer", lambda: stack.query("up"), timeout_s=25, logs=logs)
        yield stack
    finally:
        processes.stop()
