"""Issue 28: answers a user can act on: the verdict names the most severe thing found, every command takes
one ``--fail-on`` vocabulary, and the smaller points, each in a test that failed before the fix."""

from __future__ import annotations

from pathlib import Path

from npudoctor.cli import main
from tests import profdirs
from tests.clirunner import cli_runner


def _verdict(output: str) -> str:
    """The verdict sentence, unwrapped: the lines after the summary line ("N findings in M checks")."""
    lines = output.rstrip("\n").splitlines()
    summary = max(i for i, line in enumerate(lines) if " findings in " in line or " finding in " in line)
    return " ".join(lines[summary + 1:])


def test_check_verdict_names_the_warning_instead_of_no_problems_found():
    result = cli_runner().invoke(main, ["check", "--demo", "chip-warning"])
    verdict = _verdict(result.stdout)
    assert result.exit_code == 0
    assert verdict.startswith("1 warning on 8x Ascend 910B3: SMI002 npu:3/chip:0 910B3: health Warning"), verdict
    assert "No problems found" not in verdict


def test_npd_does_not_say_ok_beside_a_chip_in_warning():
    result = cli_runner().invoke(main, ["check", "--demo", "chip-warning", "--format", "npd"])
    assert result.exit_code == 0 and "OK" not in result.output and "SMI002" in result.output


def test_github_error_annotation_says_what_failed_the_run():
    result = cli_runner().invoke(main, ["check", "--demo", "chip-warning", "--format", "github", "--fail-on", "warn"])
    last = result.stdout.splitlines()[-1]
    assert result.exit_code == 1 and last.startswith("::error ")
    assert "No problems found" not in last and "SMI002" in last and last.endswith("exit 1")


def test_prof_verdict_names_a_warning_for_a_step_half_communication(tmp_path: Path):
    profdirs.torch_npu_rank(tmp_path, rank=0)  # the step: 50% non-overlapped communication, 24% idle
    result = cli_runner().invoke(main, ["prof", "analyze", str(tmp_path)])
    verdict = _verdict(result.stdout)
    assert "No problems found" not in verdict and verdict.startswith("5 warnings in 1 rank: PROF"), verdict
