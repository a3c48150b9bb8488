"""The "python" facts: the probe script run by a real interpreter, and the failure modes of asking one."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys

from npudoctor import api
from npudoctor.checks.registry import CheckContext
from npudoctor.probes.runner import LiveRunner
from npudoctor.probes.versions import PYTHON_PACKAGES
from tests.fakenode import env_without


def python_facts(runner, **options):
    return CheckContext(runner, api.load_profile(), options).facts("python")


def _installed(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_real_interpreter_reports_its_version_and_packages_from_metadata():
    facts = python_facts(LiveRunner(), python=sys.executable)
    assert facts.error is None
    assert facts.version == platform.python_version()
    assert facts.executable == os.path.realpath(sys.executable)  # the ELF file the libraries stage reads
    for name in PYTHON_PACKAGES:
        version = _installed(name)
        if version is None:
            assert name in facts.missing
        else:
            assert facts.packages[name].version == version
    torch = facts.package("torch")
    if torch is not None:  # torch wheels carry shared objects; the libraries stage needs their paths
        assert any(path.endswith("libc10.so") for path in torch.so_files)


def test_script_never_imports_torch(tmp_path):
    # A torch package first on sys.path that kills the interpreter on import: the report must still come.
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise SystemExit('torch was imported')\n", encoding="utf-8")
    environ = {**env_without("PYTHONPATH"), "PYTHONPATH": str(tmp_path / "shadow")}
    facts = python_facts(LiveRunner(environ=environ), python=sys.executable)
    assert facts.error is None and facts.version == platform.python_version()


def test_interpreter_printing_garbage_is_an_error_with_its_last_words(node):
    node.command("python3", stdout="", stderr="Fatal Python error: init_fs_encoding\n", rc=1)
    facts = python_facts(node.runner())
    assert (
        facts.error
        == "no JSON report in the output of python3 (exit 1: Fatal Python error: init_fs_encoding)"
    )
    report = api.run_checks(node.runner(), only=("VER003",))
    assert report.findings[0].status.value == "error"


def test_hanging_interpreter_times_out(node, tmp_path):
    node.command("python3", stdout="{}", sleep_s=5)
    profile = tmp_path / "quick.yaml"
    profile.write_text("name: quick\nversions:\n  python_timeout_s: 0.5\n", encoding="utf-8")
    facts = CheckContext(node.runner(), api.load_profile(str(profile))).facts("python")
    assert facts.error == "python3 did not answer within 0.5 s"
