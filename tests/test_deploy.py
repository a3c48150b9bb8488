"""deploy/: every manifest parses (PyYAML / json), every npudoctor command line in it is accepted by the CLI
itself (click's make_context: unknown options, bad choices and missing values fail), and the NPD plugin and the
Slurm prolog follow their protocols when run against the demo scenarios."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, List

import click
import pytest
import yaml

from npudoctor.cli import main
from tests.clirunner import cli_runner
from tests.samples import sample_path

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
SHELL_STOP = {";", "&&", "||", "|", ">", ">>", "2>&1", "<", "2>/dev/null"}


NPUDOCTOR_NAMES = {"npudoctor", "$NPUDOCTOR", "${NPUDOCTOR}"}  # scripts name it by path: slurmd gives no PATH
SHELL_VARIABLE = re.compile(r"\$\{?\w+(?::-([^}]*))?\}?")
COMMAND_KEYS = {"command", "args", "run", "script"}  # Kubernetes containers, GitHub steps, GitLab jobs


def strings(document: Any, in_command: bool = False) -> Iterator[str]:
    """The shell text of a manifest: strings under the keys that hold commands."""
    if isinstance(document, str) and in_command:
        yield document
    elif isinstance(document, dict):
        for key, value in document.items():
            yield from strings(value, in_command or key in COMMAND_KEYS)
    elif isinstance(document, list):
        for value in document:
            yield from strings(value, in_command)


def at_command_position(tokens: List[str], index: int) -> bool:
    """``npudoctor`` is the program run here, not an argument (``pip install npudoctor``) or prose."""
    before = tokens[:index]
    return not before or before[-1] in SHELL_STOP | {"then", "do", "exec", "-m", "if", "while", "!"} or (
        len(before) >= 2 and before[-2].endswith("timeout"))


def npudoctor_commands(script: str) -> List[List[str]]:
    """The argument lists of every `npudoctor ...` command in shell text (continuations joined)."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:
            continue
        tokens = [re.sub(r"^\w+=\$\(", "", token) for token in tokens]  # message=$(npudoctor ...)
        for index, token in enumerate(tokens):
            if token.rsplit("/", 1)[-1] in NPUDOCTOR_NAMES and at_command_position(tokens, index):
                args = []
                for arg in tokens[index + 1:]:
                    if arg.rstrip(")") in SHELL_STOP or arg.startswith(">"):
                        break
                    variable = SHELL_VARIABLE.fullmatch(arg)  # "${X:-900}": its default; "$X": a stand-in
                    args.append(variable.group(1) or "1" if variable else arg.rstrip(")"))
                if args:  # a bare "npudoctor" is a label value or a name, not a command
                    found.append(args)
    return found


def parse_with_cli(args: List[str]) -> click.Context:
    """Let the CLI parse ``args`` as `npudoctor ARGS` would, down to the subcommand (raises on bad usage)."""
    command: click.Command = main
    ctx = None
    name = "npudoctor"
    while isinstance(command, click.Group):
        ctx = click.Context(command, info_name=name, parent=ctx)
        name, args = args[0], args[1:]
        sub = command.get_command(ctx, name)
        assert sub is not None, f"no command {name!r}"
        command = sub
    return command.make_context(name, list(args), parent=ctx)


def commands_in(path: Path) -> List[List[str]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yml", ".yaml", ".json"):
        documents = list(yaml.safe_load_all(text))  # JSON is YAML too: one parser for every manifest
        assert documents and all(d is not None for d in documents)
        commands = [c for d in documents for s in strings(d) for c in npudoctor_commands(s)]
        for document in documents:
            for rule in document.get("rules", []) if isinstance(document, dict) else []:
                if rule.get("path", "").endswith("/npudoctor"):
                    commands.append(list(rule["args"]))
        return commands
    return npudoctor_commands(text)


# Files that run npudoctor (the alert rules and the dashboard only read its series: test_deploy_prometheus.py).
MANIFESTS = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yml", ".yaml", ".json", ".sh")
                   and p.parent.name not in ("prometheus", "grafana")
                   and p.name != "publicCustomization-npudoctor.json")


def test_every_deploy_file_is_covered():
    assert {p.relative_to(DEPLOY).as_posix() for p in MANIFESTS} >= {
        "npd/npudoctor-monitor.json", "kubernetes/npudoctor-daemonset.yaml", "slurm/prolog-npudoctor.sh",
        "kubernetes/npudoctor-gate-pod.yaml", "volcano/npudoctor-vcjob.yaml",
        "mindcluster/npudoctor-clusterd-publisher.yaml",
        "ci/github-model-conversion.yml", "ci/gitlab-model-conversion.yml"}


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_commands_parse_with_the_cli(path):
    commands = commands_in(path)
    assert commands, f"{path.name}: no npudoctor command found"
    for args in commands:
        ctx = parse_with_cli(args)
        assert ctx.command.name in ("check", "scan", "fleet")


def test_daemonset_writes_the_textfile_into_the_hostpath_node_exporter_reads():
    (daemonset,) = yaml.safe_load_all((DEPLOY / "kubernetes/npudoctor-daemonset.yaml").read_text())
    assert daemonset["kind"] == "DaemonSet"
    pod = daemonset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    (args,) = npudoctor_commands(container["args"][0])
    params = parse_with_cli(args).params
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    folder = os.path.dirname(params["textfile"])
    assert volumes[mounts[folder]] == "/var/lib/node_exporter/textfile_collector"
    assert params["root"] == "/host" and volumes[mounts["/host"]] == "/" and params["fmt"] == "npd"


@pytest.mark.parametrize(("scenario", "code", "drain"), [
    ("healthy", 0, ""), ("unbound-device", 1, "Reason=npudoctor: PCI002 0000:41:00.0"),
    ("version-mismatch", 0, ""),  # the job's torch_npu: checked in the job, never a reason to drain
    ("nonexistent", 0, "")])
def test_slurm_prolog_drains_only_on_the_nodes_problem(tmp_path, scenario, code, drain):
    """Without Slurm (tests/test_deploy_slurm.py runs the real one): scontrol is a recorder."""
    shim = tmp_path / "npudoctor"  # the real CLI, replaying a demo scenario instead of this machine
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m npudoctor "$@" --demo {scenario}\n')
    shim.chmod(0o755)
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {shlex.quote(str(tmp_path / "drained"))}\n')
    scontrol.chmod(0o755)
    env = {"NPUDOCTOR": str(shim), "NPUDOCTOR_SCONTROL": str(scontrol), "SLURMD_NODENAME": "node07",
           "NPUDOCTOR_LOG": str(tmp_path / "prolog.log")}
    result = subprocess.run(["sh", str(DEPLOY / "slurm/prolog-npudoctor.sh")], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == code, result.stderr
    drained = (tmp_path / "drained").read_text() if (tmp_path / "drained").exists() else ""
    assert (drain in drained) if drain else drained == ""
    if drain:
        assert "NodeName=node07" in drained and "State=DRAIN" in drained
    if scenario == "nonexistent":
        assert "could not check node node07 (exit 2)" in (tmp_path / "prolog.log").read_text()


def test_ci_gate_fails_on_a_real_atc_failure_log(tmp_path):
    workflow = yaml.safe_load((DEPLOY / "ci/github-model-conversion.yml").read_text())
    steps = workflow["jobs"]["convert"]["steps"]
    (args,) = [c for step in steps for c in npudoctor_commands(step.get("run", "")) if c[:2] == ["logs", "scan"]]
    log = tmp_path / "atc.log"
    log.write_bytes(sample_path("atc_EZ3002_optype_unsupported.txt").read_bytes())
    result = cli_runner().invoke(main, [str(log) if a == "atc.log" else a for a in args])
    assert result.exit_code == 1 and "::error" in result.output and "EZ3002" in result.output


def run_hook(tmp_path: Path, hook: str, scenario: str, **env: str) -> subprocess.CompletedProcess[str]:
    """A Slurm hook script run as slurmd runs it (no PATH of slurmd's own), npudoctor replaying ``scenario``
    and scontrol a recorder (tests/test_deploy_slurm.py runs the prolog and the sweep on a real Slurm)."""
    shim = tmp_path / "npudoctor"
    python = shlex.quote(sys.executable)
    shim.write_text(f'#!/bin/sh\n[ "$1" = check ] || exec {python} -m npudoctor "$@"\n'
                    f'case " $* " in *" --last-report "*) exec {python} -m npudoctor "$@" ;; esac\n'
                    f'exec {python} -m npudoctor "$@" --demo {scenario}\n')
    shim.chmod(0o755)
    scontrol = tmp_path / "scontrol"
    record = shlex.quote(str(tmp_path / "scontrol.calls"))
    scontrol.write_text(f'#!/bin/sh\necho "$*" >> {record}\n'
                        '[ "$1" = show ] && echo "NodeName=node07 State=IDLE+DRAIN Reason=npudoctor: PCI002"\n'
                        'exit 0\n')
    scontrol.chmod(0o755)
    base = {"NPUDOCTOR": str(shim), "NPUDOCTOR_SCONTROL": str(scontrol), "SLURMD_NODENAME": "node07",
            "NPUDOCTOR_LOG": str(tmp_path / "hook.log"), "SLURM_JOB_ID": "4242"}
    return subprocess.run(["sh", str(DEPLOY / "slurm" / hook)], env={**base, **env}, capture_output=True,
                          text=True, timeout=90)


def calls(tmp_path: Path) -> str:
    path = tmp_path / "scontrol.calls"
    return path.read_text() if path.exists() else ""


def test_healthcheck_drains_on_the_nodes_fail_and_keeps_the_report_and_textfile(tmp_path):
    (tmp_path / "state").mkdir()
    (tmp_path / "textfiles").mkdir()
    kept = tmp_path / "state" / "last-report.json"
    textfile = tmp_path / "textfiles" / "npudoctor.prom"
    result = run_hook(tmp_path, "healthcheck-npudoctor.sh", "unbound-device", NPUDOCTOR_LAST_REPORT=str(kept),
                      NPUDOCTOR_TEXTFILE=str(textfile))
    assert result.returncode == 0
    assert "update NodeName=node07 State=DRAIN Reason=npudoctor: PCI002 0000:41:00.0" in calls(tmp_path)
    assert json.loads(kept.read_text())["tool"]["scope"] == "node" and "npudoctor_chip_ok" in textfile.read_text()
    # the node's one poller on Slurm: the prolog reads its report instead of running npu-smi again
    (tmp_path / "scontrol.calls").unlink()
    prolog = run_hook(tmp_path, "prolog-npudoctor.sh", "healthy", NPUDOCTOR_LAST_REPORT=str(kept))
    assert prolog.returncode == 1 and "Reason=npudoctor: PCI002" in calls(tmp_path)  # the kept FAIL, not the demo
    old = os.path.getmtime(kept) - 3600
    os.utime(kept, (old, old))
    (tmp_path / "scontrol.calls").unlink()
    stale = run_hook(tmp_path, "prolog-npudoctor.sh", "healthy", NPUDOCTOR_LAST_REPORT=str(kept))
    assert stale.returncode == 0 and calls(tmp_path) == "" and re.search(r"last report 36\d\d s old", stale.stderr)


@pytest.mark.parametrize(("scenario", "resume", "expected"), [
    ("version-mismatch", "0", ""),  # the job's problem: never a drain
    ("healthy", "1", "update NodeName=node07 State=RESUME"),  # drained by npudoctor, OK again: resumed
    ("nonexistent", "1", "")])  # could not tell: nothing changes
def test_healthcheck_leaves_a_healthy_node_alone_and_resumes_only_on_request(tmp_path, scenario, resume,
                                                                             expected):
    result = run_hook(tmp_path, "healthcheck-npudoctor.sh", scenario, NPUDOCTOR_RESUME=resume,
                      NPUDOCTOR_LAST_REPORT=str(tmp_path / "none" / "r.json"))
    assert result.returncode == 0
    assert expected in calls(tmp_path) and "DRAIN" not in calls(tmp_path)


def test_epilog_scans_the_jobs_plogs_and_drains_on_the_nodes_fail(tmp_path):
    plogs = tmp_path / "home" / "ascend" / "log" / "run" / "plog"
    plogs.mkdir(parents=True)
    (plogs / "plog-10043_20210331185941176.log").write_bytes(
        sample_path("plog_2021_model_execute_aicore_error.log").read_bytes())
    result = run_hook(tmp_path, "epilog-npudoctor.sh", "unbound-device",
                      NPUDOCTOR_PLOGS=str(tmp_path / "home" / "ascend" / "log"),
                      NPUDOCTOR_JOBS_DIR=str(tmp_path / "jobs"))
    assert result.returncode == 0, result.stderr
    scan = json.loads((tmp_path / "jobs" / "job-4242.json").read_text())
    assert scan["exit_code"] == 1 and "aicore-kernel-failed" in {f["rule"] for f in scan["findings"]}
    assert "job 4242's logs have errors" in (tmp_path / "hook.log").read_text()
    assert "State=DRAIN Reason=npudoctor: PCI002" in calls(tmp_path)
