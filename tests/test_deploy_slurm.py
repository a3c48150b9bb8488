"""deploy/slurm against a real Slurm: one node (munged, slurmctld, slurmd on localhost, started once for the
module, stopped at the end), the shipped prolog as its Prolog, npudoctor replaying a demo scenario.

What is proven: a FAIL drains the node with npudoctor's reason (what ``sinfo -R`` shows) and the job does not
run; a healthy node runs the job; exit 2 (could not tell) never drains; slurmd gives the prolog no PATH, and a
missing npudoctor is said in the prolog's log (or drains, by policy)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Iterator, Tuple

import pytest

from tests.engines import Slurm, slurm_cluster, wait_for

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "slurm"


class Node:
    """The cluster and the knobs a test turns: the scenario npudoctor replays, where npudoctor is."""

    def __init__(self, slurm: Slurm, folder: Path, shim: Path) -> None:
        self.slurm = slurm
        self.folder = folder
        self.shim = shim
        self.jobs = 0

    def set(self, scenario: str = "healthy", npudoctor: str = "", missing: str = "run") -> None:
        (self.folder / "scenario").write_text(scenario)
        (self.folder / "npudoctor-path").write_text(npudoctor or str(self.shim))
        (self.folder / "missing-policy").write_text(missing)

    def submit(self) -> Tuple[str, Path]:
        self.jobs += 1
        marker = self.folder / f"ran-{self.jobs}"
        result = self.slurm.run("sbatch", "-o", "/dev/null", "--wrap", f"touch {shlex.quote(str(marker))}")
        assert result.returncode == 0, result.stderr
        return result.stdout.split()[-1], marker

    def finished(self, job_id: str) -> bool:
        return self.slurm.job_state(job_id) == ""


def test_the_health_check_drains_a_failing_node_as_slurmd_starts(tmp_path):
    """HealthCheckProgram: slurmd runs it as it starts (and every HealthCheckInterval), with no PATH."""
    shim = tmp_path / "npudoctor"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m npudoctor "$@" --demo unbound-device\n')
    shim.chmod(0o755)
    healthcheck = tmp_path / "healthcheck.sh"
    healthcheck.write_text("#!/bin/sh\n"
                           f"SLURM_CONF={shlex.quote(str(tmp_path / 'cluster' / 'slurm.conf'))}\n"
                           f"NPUDOCTOR={shlex.quote(str(shim))}\n"
                           f"NPUDOCTOR_LAST_REPORT={shlex.quote(str(tmp_path / 'state' / 'last-report.json'))}\n"
                           f"NPUDOCTOR_LOG={shlex.quote(str(tmp_path / 'healthcheck.log'))}\n"
                           "export SLURM_CONF NPUDOCTOR NPUDOCTOR_LAST_REPORT NPUDOCTOR_LOG\n"
                           f"exec {shlex.quote(str(DEPLOY / 'healthcheck-npudoctor.sh'))}\n")
    healthcheck.chmod(0o755)
    with slurm_cluster(tmp_path / "cluster", Path("/bin/true"), healthcheck=healthcheck, until="drained") as slurm:
        assert slurm.drain_reason() == "npudoctor: PCI002 0000:41:00.0 910B NPU is not bound to any driver"
    assert json.loads((tmp_path / "state" / "last-report.json").read_text())["tool"]["scope"] == "node"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    folder = tmp_path_factory.mktemp("slurm")
    shim = folder / "npudoctor"  # the real CLI, replaying the scenario the test chose instead of this machine
    python = shlex.quote(sys.executable)
    shim.write_text(f'#!/bin/sh\n[ "$1" = check ] || exec {python} -m npudoctor "$@"\n'
                    f'exec {python} -m npudoctor "$@" --demo "$(cat {shlex.quote(str(folder / "scenario"))})"\n')
    shim.chmod(0o755)
    # What an operator puts in slurm.conf is the shipped prolog; the wrapper only points it at this cluster
    # (SLURM_CONF) and at the npudoctor the test chose, as NPUDOCTOR= in the prolog's environment would.
    prolog = folder / "prolog.sh"
    prolog.write_text("#!/bin/sh\n"
                      f"env > {shlex.quote(str(folder / 'prolog-env'))}\n"
                      f"SLURM_CONF={shlex.quote(str(folder / 'cluster' / 'slurm.conf'))}\n"
                      f"NPUDOCTOR=$(cat {shlex.quote(str(folder / 'npudoctor-path'))})\n"
                      f"NPUDOCTOR_MISSING=$(cat {shlex.quote(str(folder / 'missing-policy'))})\n"
                      f"NPUDOCTOR_LOG={shlex.quote(str(folder / 'prolog.log'))}\n"
                      "export SLURM_CONF NPUDOCTOR NPUDOCTOR_MISSING NPUDOCTOR_LOG\n"
                      f"exec {shlex.quote(str(DEPLOY / 'prolog-npudoctor.sh'))}\n")
    prolog.chmod(0o755)
    with slurm_cluster(folder / "cluster", prolog) as slurm:
        yield Node(slurm, folder, shim)


@pytest.fixture
def fresh(node: Node) -> Iterator[Node]:
    node.set()
    yield node
    if node.slurm.node_state() != "idle":
        node.slurm.run("scancel", "--user=root")
        node.slurm.resume()


def _held(node: Node, job_id: str) -> str:
    """The job's state once slurmctld has put it back to PENDING (the drain reason is set by the prolog before
    the prolog exits, so for a moment the job is still CONFIGURING or COMPLETING); empty until then."""
    state = node.slurm.job_state(job_id)
    return state if state.startswith("PENDING") else ""


def test_a_fail_drains_the_node_with_npudoctors_reason_and_the_job_does_not_run(fresh: Node):
    fresh.set("unbound-device")
    job_id, marker = fresh.submit()
    reason = wait_for("the node to be drained", fresh.slurm.drain_reason, logs=fresh.slurm.logs)
    assert reason.startswith("npudoctor: PCI002 0000:41:00.0"), reason
    assert fresh.slurm.node_state() in ("drained", "draining")
    state = wait_for("the job to be held", lambda: _held(fresh, job_id), logs=fresh.slurm.logs)
    assert state.startswith("PENDING"), state
    assert not marker.exists()
    assert "PATH=" not in (fresh.folder / "prolog-env").read_text()  # why the prolog names npudoctor itself


def test_a_healthy_node_runs_the_job(fresh: Node):
    job_id, marker = fresh.submit()
    wait_for("the job to run", marker.exists, logs=fresh.slurm.logs)
    wait_for("the job to finish", lambda: fresh.finished(job_id), logs=fresh.slurm.logs)
    assert fresh.slurm.node_state() == "idle" and fresh.slurm.drain_reason() == ""


def test_could_not_tell_never_drains(fresh: Node):
    fresh.set("no-such-scenario")  # npudoctor exits 2: a usage error, as for a hung npu-smi
    _job_id, marker = fresh.submit()
    wait_for("the job to run", marker.exists, logs=fresh.slurm.logs)
    assert fresh.slurm.drain_reason() == ""


def test_a_missing_npudoctor_is_loud_and_drains_by_policy(fresh: Node):
    missing = str(fresh.folder / "venv" / "bin" / "npudoctor")
    fresh.set(npudoctor=missing)
    _job, marker = fresh.submit()
    wait_for("the job to run", marker.exists, logs=fresh.slurm.logs)
    log = fresh.folder / "prolog.log"
    wait_for("the prolog's log to say so", lambda: f"{missing} not found" in log.read_text(), logs=[log])
    fresh.set(npudoctor=missing, missing="drain")
    job_id, marker = fresh.submit()
    reason = wait_for("the node to be drained", fresh.slurm.drain_reason, logs=fresh.slurm.logs)
    assert reason == f"npudoctor: not installed at {missing}"
    wait_for("the job to be held", lambda: _held(fresh, job_id), logs=fresh.slurm.logs)
    assert not marker.exists()


def test_the_sweep_runs_one_task_per_idle_node_and_reads_the_fleet(fresh: Node):
    reports = fresh.folder / "sweep"
    env = {**fresh.slurm.env, "NPUDOCTOR": str(fresh.shim)}
    result = subprocess.run(["sh", str(DEPLOY / "sweep-npudoctor.sh"), str(reports), "debug", "2"], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    (report,) = reports.glob("*.json")
    assert report.name == f"{fresh.slurm.node}.json" and json.loads(report.read_text())["tool"]["scope"] == "node"
    assert "1 node" in result.stdout, result.stdout
