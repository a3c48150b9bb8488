"""What a new user reads (issue 10 points 2, 6, 7): explain, honest fixes, bundles and interpreters named right."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from npudoctor import api
from npudoctor.cli import main
from npudoctor.model.finding import Status
from tests.clirunner import cli_runner
from tests.findings import one_finding
from tests.nodes import healthy_910b_node, target_python

README = Path(__file__).resolve().parent.parent / "README.md"


def invoke(*args):
    return cli_runner().invoke(main, list(args), catch_exceptions=False)


# explain: checks and error codes, several at once, reflowed, markup rendered

def test_explain_finds_checks_and_error_codes_at_once(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    result = invoke("explain", "HCCL004", "EZ9999", "507011", "pci001")
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.startswith("HCCL004: HCCL_SOCKET_IFNAME matches an interface of this host")
    assert "\nEZ9999: AclNN_Inner_Error" in out and "\n507011: ACL_ERROR_RT_MODEL_EXECUTE" in out
    assert "\nPCI001: Ascend NPUs on the PCI bus" in out
    assert "``" not in out and "`lspci" not in out  # the markup is rendered, not shown
    assert max(len(line) for line in out.splitlines()) <= 80


def test_explain_reflows_to_the_terminal_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    narrow = invoke("explain", "HCCL004").stdout
    monkeypatch.setenv("COLUMNS", "140")
    wide = invoke("explain", "HCCL004").stdout
    assert max(len(line) for line in narrow.splitlines()[1:]) <= 60
    assert max(len(line) for line in wide.splitlines()) > 100
    assert " ".join(narrow.split()) == " ".join(wide.split())  # same words, other lines


def test_explain_renders_code_spans_in_colour():
    result = invoke("explain", "--color", "always", "HCCL004")
    assert "\x1b[1;36mHCCL_SOCKET_IFNAME==eth0,enp0\x1b[0m" in result.stdout


def test_explain_family_code_and_unknown_topic():
    result = invoke("explain", "0x05000004", "NOPE42")
    assert "0x05000004: HCCL errNo" in result.stdout and "family" in result.stdout
    assert result.exit_code == 2
    assert result.stderr.strip() == ("npudoctor: error: 'NOPE42': neither a check ID nor a known error code; "
                                     "see `npudoctor list-checks`")


# Honest fixes

def _cpu_box(node):
    node.pci_device("0000:00:01.0", vendor_id="8086", device_id="7010", class_code="0x010100")
    target_python(node, "3.11.7", torch="2.13.0+cpu")


def test_cpu_box_is_never_told_to_install_torch_npu(node):
    _cpu_box(node)
    report = api.run_checks(node.runner(), level=2)
    assert not [f for f in report.findings if "torch_npu" in f.fix and "install" in f.fix], \
        [(f.id, f.fix) for f in report.findings if f.fix]
    assert one_finding(report, "LIB005").status is Status.SKIP
    assert report.exit_code() == 1  # PCI001 alone: no NPU where one was expected


def test_npu_node_without_cann_is_told_to_install_cann_first(node):
    node.npu_node(8)
    target_python(node, "3.10.14", torch="2.1.0+cpu")
    finding = one_finding(api.run_checks(node.runner(), only=("LIB005",), level=2), "LIB005")
    assert finding.fix.startswith("install CANN first")
    assert finding.fix.endswith('pip install "torch_npu==2.1.0.*"')


def test_npu_node_with_cann_is_told_which_torch_npu(node):
    healthy_910b_node(node)
    target_python(node, "3.10.14", torch="2.1.0+cpu")
    finding = one_finding(api.run_checks(node.runner(), only=("LIB005",), level=2), "LIB005")
    assert finding.fix == 'pip install "torch_npu==2.1.0.*"'


def test_hccl_skips_off_an_ascend_node_and_runs_when_chosen(node):
    _cpu_box(node)
    report = api.run_checks(node.runner())
    hccl = [f for f in report.findings if f.stage == "hccl"]
    assert hccl and all(f.status is Status.SKIP and f.cause == "not an Ascend node" for f in hccl)
    # Asked for by name, a check says what it says in the full run (issue 17 point 2): PCI001 still decides.
    for selection in (("HCCL005",), ("HCCL",), ("hccl",)):
        chosen = api.run_checks(node.runner(), only=selection)
        assert [(f.id, f.status, f.detail) for f in chosen.findings] == [
            (f.id, f.status, f.detail) for f in hccl if f.id.startswith(selection[0].upper())]


# Bundles and interpreters

def test_level_2_from_a_level_1_bundle_says_to_recollect(node, tmp_path):
    healthy_910b_node(node)
    bundle = tmp_path / "node.tar.gz"
    api.collect(str(bundle), root=str(node.root), environ=node.env)
    result = invoke("check", "--from", str(bundle), "--level", "2", "--only", "LIB005", "--format", "json")
    import json

    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["status"] == "skip"
    assert "collected without --level 2" in finding["detail"]
    assert "npudoctor collect --level 2" in finding["fix"]


def test_python_option_errors_and_notes(tmp_path, node):
    result = invoke("check", "--python", str(tmp_path / "nonexistent"))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"npudoctor: error: --python {tmp_path / 'nonexistent'}: no such interpreter")
    healthy_910b_node(node)
    bundle = tmp_path / "node.tar.gz"
    api.collect(str(bundle), root=str(node.root), environ=node.env)
    result = invoke("check", "--from", str(bundle), "--python", "/opt/other/python3", "--only", "VER003")
    assert "a bundle replays the interpreter it recorded" in result.stderr
    assert "not-recorded" not in result.stdout
    header = " ".join(result.stdout.split("\n\n")[0].split())
    assert f"source: bundle {bundle} (recorded 20" in header


def test_interpreter_shown_as_found_not_resolved(node, tmp_path):
    """A venv's python3 links to the base interpreter; findings name the venv's path the user knows."""
    target_python(node, "3.11.7", torch="2.13.0+cpu")
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python3").symlink_to(node.bin / "python3")
    report = api.run_checks(node.runner(), only=("VER003",), options={"python": str(venv / "python3")})
    assert one_finding(report, "VER003").detail == f"torch_npu not installed in {venv / 'python3'}"


def test_collect_level_has_help():
    out = " ".join(invoke("collect", "--help").stdout.split())
    assert "--level INTEGER RANGE What to record: 1 the static checks' inputs; 2 also the import" in out


def test_readme_id_ranges_match_list_checks():
    """The README's table of stages names the ID runs of each stage as `list-checks` has them: the first and
    last ID, and where the numbers skip (HCCL007-HCCL009, PROF027-PROF029 are free) each run on its own
    ("PROF001–PROF026, PROF030–PROF035")."""
    cells = re.findall(r"^\| ([a-z-]+) \| ([A-Z]+\d+(?:–[A-Z]+\d+)?(?:, [A-Z]+\d+(?:–[A-Z]+\d+)?)*) \|",
                       README.read_text(encoding="utf-8"), re.M)
    documented = {stage: [tuple(run.split("–")) if "–" in run else (run, run) for run in cell.split(", ")]
                  for stage, cell in cells}
    ids: Dict[str, List[str]] = {}
    for spec in api.rulebook():
        if spec.room == "logs":  # kebab-case rule IDs, listed by `list-checks` under their own heading
            continue
        ids.setdefault(spec.stage, []).append(spec.id)
    actual = {}
    for stage, listed in ids.items():
        runs: List[Tuple[str, str]] = []
        for check_id in listed:
            prefix, number = re.match(r"([A-Z]+)(\d+)$", check_id).groups()  # type: ignore[union-attr]
            last = runs[-1][1] if runs else None
            if last and last.startswith(prefix) and last[len(prefix):].isdigit() \
                    and int(last[len(prefix):]) + 1 == int(number):
                runs[-1] = (runs[-1][0], check_id)
            else:
                runs.append((check_id, check_id))
        actual[stage] = runs
    assert documented == actual


@pytest.mark.parametrize("width", [80, 120])
def test_check_header_names_version_profile_level_source_time(node, width, monkeypatch):
    monkeypatch.setenv("COLUMNS", str(width))
    node.npu_node(8)
    result = invoke("check", "--root", str(node.root), "--only", "pcie", "--profile", "atlas800t-a2-8x910b")
    first, second = result.stdout.splitlines()[:2]
    assert re.match(r"npudoctor \S+ check on \S+, \d{4}-\d\d-\d\d \d\d:\d\d UTC$", first)
    assert second.startswith("profile atlas800t-a2-8x910b (expects 8x 910B), level 1, source: --root")
    assert result.stdout.splitlines()[-1] == "No problems found on 8x Ascend 910B"


def test_collect_says_where_what_and_how_to_replay(node, tmp_path, monkeypatch):
    healthy_910b_node(node)
    monkeypatch.setenv("PATH", f"{node.bin}:/usr/bin:/bin")
    monkeypatch.setenv("COLUMNS", "300")  # the temporary path is long; wrapping is tested elsewhere
    bundle = tmp_path / "node.tar.gz"
    result = invoke("collect", "--root", str(node.root), "-o", str(bundle), "--color", "never")
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and bundle.exists()
    assert lines[0] == f"wrote {bundle} (secrets redacted)"
    assert re.match(r"\d+ findings in \d+ checks: \d+ pass", lines[1])
    assert lines[-1] == f"replay it anywhere: npudoctor check --from {bundle}"
