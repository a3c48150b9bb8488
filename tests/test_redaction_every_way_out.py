"""Issue 33 point 1: redaction is a property of every way out, not of the JSON writer alone. Secrets are planted
in every input these commands quote (the node's CANN registry and install.info, an audited script's error and
its wheel's version, memlog/2 fallback names, a report's inventory) and every format is read back
(tests/test_untrusted_outputs.py's SECRETS and checks)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import List

import pytest

from npudoctor.ops import oplist
from tests.test_untrusted_outputs import ESCAPES, HOSTILE, SECRETS, assert_clean, invoke

TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
# Every secret kind once, with no quote (it goes into a JSON string as it is).
PLANTED = " ".join(text for text, _secret in SECRETS.values())


def _hostile_registry(node) -> None:
    """(constructed: error_code.json's layout, each text carrying every kind of secret and escapes)"""
    entry = {"errClass": "GE Errors", "errTitle": f"Inner {PLANTED}", "ErrCode": "EZ9999",
             "ErrMessage": f"failed {HOSTILE}", "Arglist": "message",
             "suggestion": {"Possible Cause": f"cause {HOSTILE}", "Solution": f"run {PLANTED} then retry"}}
    node.file(f"{TOOLKIT}/aarch64-linux/conf/error_manager/error_code.json",
              json.dumps({"error_info_list": [entry]}))
    node.file(f"{TOOLKIT}/aarch64-linux/ascend_toolkit_install.info",
              f"package_name=Ascend-cann-toolkit\nversion=8.5.0 {PLANTED}\n")


def test_explain_and_logs_explain_show_the_registry_redacted(node) -> None:
    _hostile_registry(node)
    for args in (["explain", "EZ9999", "--root", node.root], ["logs", "explain", "EZ9999", "--root", node.root]):
        result = invoke(args)
        assert result.exit_code == 0, result.stderr
        assert "<redacted>" in result.stdout and "8.5.0" in result.stdout  # the node's text is shown, redacted
        assert_clean(result.stdout, "text", " ".join(map(str, args[:2])))


def test_explain_from_a_bundle_shows_the_registry_redacted(node, tmp_path: Path) -> None:
    from npudoctor import api

    _hostile_registry(node)
    bundle = tmp_path / "node.tar.gz"
    api.collect(str(bundle), root=str(node.root), environ=node.env)
    result = invoke(["explain", "EZ9999", "--from", bundle])
    assert result.exit_code == 0, result.stderr
    assert_clean(result.stdout, "text", "explain --from")


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_logs_scan_reads_the_node_registry_redacted_in_every_format(node, tmp_path: Path, fmt: str) -> None:
    _hostile_registry(node)
    log = tmp_path / "plog-1_20250101000000000.log"
    log.write_text("[ERROR] GE(1,python):2025-01-01-00:00:00.000.001 [error_manager.cc:1]1 EZ9999: Inner Error!\n")
    result = invoke(["logs", "scan", log, "--root", node.root, "--format", fmt, "-v"])
    assert result.exit_code in (0, 1), result.stderr
    assert_clean(result.stdout, "json" if fmt == "json" else fmt, f"logs scan --format {fmt}")


def test_the_console_redacts_whatever_a_renderer_prints() -> None:
    """The one way out of every text renderer (report.console.make_console): a renderer that forgot to clean
    a string still shows no secret, also when the text was wrapped first (terminal.wrap redacts before it cuts)."""
    import io

    from rich.text import Text

    from npudoctor.report.console import make_console, wrap

    out = io.StringIO()
    console = make_console(out, color=True, width=80)
    console.print(f"plain {PLANTED}")
    console.print(Text(f"styled {PLANTED}", style="bold red"))
    for line in wrap("x" * 70 + " " + SECRETS["url-password"][0] + "/" + "y" * 90, 40):
        console.print(line)
    assert_clean(out.getvalue().replace("\x1b[", "").replace("\x1b", ""), "text", "console")


def test_dashboard_fallback_names_are_redacted_before_they_are_cut() -> None:
    from npudoctor.tui import views

    for width in (40, 60, 80, 200):
        fallbacks = [{"op": f"aten::{text}", "first_step": 3, "count": 1} for text, _secret in SECRETS.values()]
        for line, _style in views.fallback_lines(fallbacks, width):
            assert_clean(line, "text", f"fallback_lines width {width}")
            for _text, secret in SECRETS.values():
                assert secret[:12] not in line  # not even a cut part of one


def _wheel(tmp_path: Path, version: str) -> Path:
    path = tmp_path / f"torch_npu-{version}-cp311-cp311-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(oplist.CODEGEN_MEMBER, "backend: NPU\nsupported:\n  - add.Tensor\n  - sum\n")
    return path


def test_ops_audit_text_and_json_redact_the_wheel_version_and_the_script(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    version = "2.1.0." + SECRETS["hf-token"][0]
    wheel = _wheel(tmp_path, version)
    assert oplist.read_path(str(wheel)).release == version  # the version really carries the token
    script = tmp_path / "model.py"
    script.write_text(f"import torch\ntorch.ones(2).sum()\nprint({PLANTED!r})\n", encoding="utf-8")
    for fmt in ("text", "json"):
        result = invoke(["ops", "audit", "--torch-npu", wheel, "--format", fmt, "-v", "--", script,
                         f"--hf_token={SECRETS['hf-token'][0]}"])
        assert result.exit_code == 0, result.stderr
        assert_clean(result.stdout, fmt, f"ops audit --format {fmt}")


def test_ops_audit_a_failing_script_error_line_is_redacted(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "model.py"
    script.write_text(f"import torch\ntorch.ones(2).sum()\nraise RuntimeError({PLANTED + ESCAPES!r})\n")
    result = invoke(["ops", "audit", "--torch-npu", "2.14.0", "--", script])
    assert result.exit_code == 2 and "RuntimeError" in result.stderr
    assert_clean(result.stderr, "text", "ops audit error line")


def test_profile_derive_pins_no_secret(tmp_path: Path) -> None:
    from npudoctor import knowledge

    report = tmp_path / "report.json"
    inventory = {"hostname": f"node1-{SECRETS['hf-token'][0]}", "chips": {"count": 8, "family": "910B",
                                                                         "name": f"910B3 {PLANTED}"},
                 "cann": f"8.0.RC2 {PLANTED}", "driver": SECRETS["url-password"][0],
                 "firmware": f"7.1 {SECRETS['aws-key'][0]}", "torch_npu": f"2.1.0 {SECRETS['bearer'][0]}"}
    report.write_text(json.dumps({"schema": "npudoctor.report/1", "tool": {"name": "npudoctor", "version": "0.1"},
                                  "summary": {}, "inventory": inventory, "findings": []}), encoding="utf-8")
    out = tmp_path / "site.yaml"
    result = invoke(["profile", "derive", report, "-o", out])
    assert result.exit_code == 0, result.stderr
    written: List[str] = [out.read_text(encoding="utf-8"), result.stdout, result.stderr]
    for text in written:
        assert_clean(text, "text", "profile derive")
    assert isinstance(knowledge.load_yaml_text(written[0], "site.yaml"), dict)
