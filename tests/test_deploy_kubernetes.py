"""deploy/kubernetes, deploy/volcano and deploy/npd: every manifest validated against the Kubernetes API
schemas (kubernetes-validate, strict: an unknown field fails), the gate's and NPD's commands run against a
report kept by the one poller, and the Dockerfile's install steps run in a fresh venv (without docker)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import yaml

from npudoctor.cli import main
from tests.clirunner import cli_runner

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
KUBERNETES_VERSION = "1.29.0"  # the oldest release still supported upstream when this was written
MANIFESTS = sorted([*DEPLOY.glob("kubernetes/*.yaml"), *DEPLOY.glob("volcano/*.yaml"),
                    *DEPLOY.glob("mindcluster/*.yaml")])


def documents() -> Iterator[Dict[str, Any]]:
    for path in MANIFESTS:
        yield from (d for d in yaml.safe_load_all(path.read_text()) if d)


def as_kubernetes_objects(document: Dict[str, Any]) -> List[Dict[str, Any]]:
    """``document`` itself, or for a Volcano Job (a CRD the API schemas do not hold) each task's pod."""
    if document["apiVersion"].startswith("batch.volcano.sh/"):
        return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": task["name"]},
                 "spec": task["template"]["spec"]} for task in document["spec"]["tasks"]]
    return [document]


@pytest.mark.parametrize("document", list(documents()), ids=lambda d: f"{d['kind']}-{d['metadata']['name']}")
def test_manifests_validate_against_the_kubernetes_schemas(document):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    for obj in as_kubernetes_objects(document):
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)  # raises on any schema error


def test_a_broken_manifest_is_refused():
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    (daemonset,) = yaml.safe_load_all((DEPLOY / "kubernetes/npudoctor-daemonset.yaml").read_text())
    daemonset["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []  # a typo for volumeMounts
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, KUBERNETES_VERSION, strict=True)


def gate_scripts() -> List[str]:
    scripts = []
    for document in documents():
        for obj in as_kubernetes_objects(document):
            scripts += [c["args"][0] for c in obj.get("spec", {}).get("initContainers", [])
                        if c["name"] == "npudoctor-node-gate"]
    return scripts


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Path]:
    folder = tmp_path_factory.mktemp("kept")
    reports = {}
    for scenario in ("healthy", "unbound-device", "version-mismatch"):
        reports[scenario] = folder / f"{scenario}.json"
        result = cli_runner().invoke(main, ["check", "--demo", scenario, "--format", "npd",
                                            "--save-report", str(reports[scenario])])
        assert result.exit_code in (0, 1)
    return reports


@pytest.mark.parametrize(("scenario", "age_s", "passes", "says"), [
    ("healthy", 0, True, "NPU node OK"), ("unbound-device", 0, False, "NPU node problem: PCI002"),
    ("version-mismatch", 0, True, "NPU node OK"),  # the job's torch_npu: the job gate's, not the node's
    ("unbound-device", 3600, True, "could not tell: last report 36")])  # stale: the pod runs
def test_the_node_gate_fails_the_pod_with_the_problem_as_its_message(tmp_path, kept, scenario, age_s, passes,
                                                                     says):
    report = tmp_path / "last-report.json"
    report.write_bytes(kept[scenario].read_bytes())
    os.utime(report, (os.path.getmtime(report) - age_s,) * 2)
    npudoctor = tmp_path / "npudoctor"
    npudoctor.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m npudoctor "$@"\n')
    npudoctor.chmod(0o755)
    for script in gate_scripts():
        local = script.replace("/npudoctor/last-report.json", str(report)).replace(
            "/dev/termination-log", str(tmp_path / "termination-log"))
        result = subprocess.run(["sh", "-c", local], env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
                                capture_output=True, text=True, timeout=60)
        assert (result.returncode == 0) is passes, result.stdout + result.stderr
        assert says in (tmp_path / "termination-log").read_text()


def test_npd_conditions_split_by_what_the_operator_acts_on(kept):
    config = json.loads((DEPLOY / "npd/npudoctor-monitor.json").read_text())
    conditions = {c["type"] for c in config["conditions"]}
    assert conditions == {"NPUHardwareProblem", "NPUDriverProblem", "NPUNetworkProblem"}
    codes = {}
    for rule in config["rules"]:
        assert rule["type"] == "temporary" or rule["condition"] in conditions
        args = [str(kept["unbound-device"]) if a.endswith("last-report.json") else a for a in rule["args"]]
        args[args.index("--max-age") + 1] = "100000000"
        result = cli_runner().invoke(main, args)
        assert len(result.stdout.rstrip("\n")) <= config["pluginConfig"]["max_output_length"]
        codes[rule.get("condition") or rule["reason"]] = result.exit_code
    # the unbound NPU is the hardware's; the driver is fine; no RoCE tool in the demo: could not tell
    assert codes == {"NPUHardwareProblem": 1, "NPUDriverProblem": 0, "NPUNetworkProblem": 2, "NPUWarning": 1}


def dockerfile_runs() -> List[str]:
    text = (DEPLOY / "kubernetes/Dockerfile").read_text().replace("\\\n", " ")
    return [line[4:].strip() for line in text.splitlines() if line.startswith("RUN ")]


def test_the_dockerfile_installs_a_wheel_of_the_checkout_into_a_venv(tmp_path):
    """The Dockerfile's two RUN steps, as written, in a fresh venv: only the paths differ (/src is the
    checkout, /wheels and /opt/npudoctor are under tmp_path), hatchling is already here, and the wheel's
    dependencies come from this environment instead of the index (tests run without a network)."""
    build, install = dockerfile_runs()
    assert "pip wheel" in build and "--no-deps" in build and "npudoctor-*.whl" in install
    wheels, venv = tmp_path / "wheels", tmp_path / "opt-npudoctor"
    build_step = build.split("&&", 1)[1].replace("/wheels", str(wheels)).replace("python -m pip",
                                                                                 f"{sys.executable} -m pip")
    built = subprocess.run(["sh", "-c", build_step], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    steps = [step.strip().replace("/opt/npudoctor", str(venv)).replace("/wheels", str(wheels))
             for step in install.split("&&")]
    assert steps[0] == f"python -m venv {venv}" and "bin/python -m pip install" in steps[1]

    def run(step: str) -> None:
        done = subprocess.run(["sh", "-c", step], cwd=tmp_path, capture_output=True, text=True, timeout=240,
                              env={**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                                   "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
        assert done.returncode == 0, f"{step}: {done.stdout[-1500:]}{done.stderr[-1500:]}"

    run(steps[0].replace("python -m venv", f"{sys.executable} -m venv"))
    install_step, *rest = steps[1:]
    run(install_step.replace("pip install", "pip install --no-deps --no-index"))
    # Only now, the dependencies: a pip that saw this environment's npudoctor would uninstall it first.
    site = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)}))
    (site / "_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    for step in rest:
        run(step)
    assert not wheels.exists()
    npudoctor = venv / "bin" / "npudoctor"
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import npudoctor; print(npudoctor.__file__)"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr  # the wheel's copy, not the checkout
    version = subprocess.run([str(npudoctor), "--version"], capture_output=True, timeout=60, cwd=tmp_path)
    assert version.returncode == 0
    demo = subprocess.run([str(npudoctor), "check", "--demo", "unbound-device", "--scope", "node", "--format",
                           "npd"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert demo.returncode == 1 and demo.stdout.startswith("NPU node problem: PCI002"), demo.stderr


def host_path_of(pod: Dict[str, Any], container: Dict[str, Any], path: str) -> str:
    """The node's path behind ``path`` inside ``container`` (through its volume mounts and hostPath volumes)."""
    volumes = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    for mount in container.get("volumeMounts", []):
        if path == mount["mountPath"] or path.startswith(mount["mountPath"].rstrip("/") + "/"):
            return volumes[mount["name"]].rstrip("/") + "/" + path[len(mount["mountPath"]):].lstrip("/")
    return path


def test_the_poller_writes_the_report_where_every_reader_reads_it():
    (daemonset,) = yaml.safe_load_all((DEPLOY / "kubernetes/npudoctor-daemonset.yaml").read_text())
    pod = daemonset["spec"]["template"]["spec"]
    (poller,) = pod["containers"]
    written = re.search(r"--save-report (\S+)", poller["args"][0])
    assert written, poller["args"][0]
    kept = host_path_of(pod, poller, written.group(1))
    readers = []
    for document in documents():
        for obj in as_kubernetes_objects(document):
            spec = obj.get("spec", {}).get("template", {}).get("spec") or obj.get("spec") or {}
            for container in [*spec.get("initContainers", []), *spec.get("containers", [])]:
                read = re.search(r"--last-report (\S+)", " ".join(container.get("args", [])))
                if read:
                    readers.append(host_path_of(spec, container, read.group(1)))
    npd = json.loads((DEPLOY / "npd/npudoctor-monitor.json").read_text())
    readers += [rule["args"][rule["args"].index("--last-report") + 1] for rule in npd["rules"]]
    healthcheck = (DEPLOY / "slurm/healthcheck-npudoctor.sh").read_text()
    readers.append(re.search(r'LAST_REPORT="\$\{NPUDOCTOR_LAST_REPORT:-(\S+)\}"', healthcheck).group(1))
    assert len(readers) >= 8 and set(readers) == {kept} == {"/var/lib/npudoctor/last-report.json"}


@pytest.mark.parametrize(("scenario", "age_s", "published"), [("unbound-device", 0, True),
                                                              ("unbound-device", 3600, False)])
def test_the_clusterd_publisher_renders_only_a_fresh_report(tmp_path, kept, scenario, age_s, published):
    from npudoctor.report import clusterd

    (publisher,) = [d for d in documents() if d["metadata"]["name"] == "npudoctor-clusterd-publisher"
                    and d["kind"] == "DaemonSet"]
    render = next(c for c in publisher["spec"]["template"]["spec"]["containers"] if c["name"] == "render")
    once = re.search(r"^\s*(if .*?fi)$", render["args"][0], re.S | re.M)
    assert once, render["args"][0]  # one round of the loop: render, keep only a fresh answer
    report = tmp_path / "last-report.json"
    report.write_bytes(kept[scenario].read_bytes())
    os.utime(report, (os.path.getmtime(report) - age_s,) * 2)
    (tmp_path / "out").mkdir()
    npudoctor = tmp_path / "npudoctor"
    npudoctor.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m npudoctor "$@"\n')
    npudoctor.chmod(0o755)
    script = once.group(1).replace("/npudoctor/last-report.json", str(report)).replace("/out/", f"{tmp_path}/out/")
    subprocess.run(["sh", "-c", script], env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, timeout=60, check=True)
    written = tmp_path / "out" / "PublicFault"
    assert written.exists() is published
    if published:
        doc = json.loads(written.read_text())
        assert clusterd.validate(doc) == [] and doc["faults"][0]["faultCode"] == "830100201"
