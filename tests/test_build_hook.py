"""The install-time build of the compiled resolver (hatch_build.py): it builds an importable module stamped
with its source's digest, and a failed compile is a one-line reason (the install then goes on as pure
Python), never an exception."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("hatchling")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import hatch_build  # the hook lives at the top of the repository, next to pyproject.toml

SOURCE = Path(__file__).resolve().parents[1] / "npudoctor" / "elf" / "_resolver.c"


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="needs a C compiler")
def test_builds_the_plog_pass_too(tmp_path):
    source = Path(__file__).resolve().parents[1] / "npudoctor" / "logs" / "_plogscan.c"
    assert source in [Path(hatch_build.__file__).parent / path for path in hatch_build.SOURCES]
    target = tmp_path / "_plogscan.so"
    assert hatch_build.build_extension(source, target) is None
    spec = importlib.util.spec_from_file_location("_plogscan", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert hashlib.sha256(source.read_bytes()).hexdigest() == module.SOURCE_SHA256
    data = b"[ERROR] GE(1,p):2025-01-01-00:00:00.000.000 failed\n"
    assert module.plog_pass(data, 0, len(data), (b"[ERROR]",), 0)[:3] == ({b"ERROR] GE": 1}, 1, 1)


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="needs a C compiler")
def test_builds_an_importable_module_stamped_with_its_source(tmp_path):
    target = tmp_path / "_resolver.so"
    assert hatch_build.build_extension(SOURCE, target) is None
    spec = importlib.util.spec_from_file_location("_resolver", target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert hashlib.sha256(SOURCE.read_bytes()).hexdigest() == module.SOURCE_SHA256
    assert module.largest_word(b"\x01\x00\x00\x00\x07\x00\x00\x00", 0, 2) == 7


def test_a_failed_compile_is_a_reason_not_an_exception(tmp_path):
    source = tmp_path / "broken.c"
    source.write_text("this is not C\n")
    target = tmp_path / "broken.so"
    reason = hatch_build.build_extension(source, target)
    assert reason and "\n" not in reason and not target.exists()


def test_no_compiler_at_all(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    monkeypatch.setattr(hatch_build.sysconfig, "get_config_var", lambda name: None)
    assert hatch_build.build_extension(SOURCE, tmp_path / "x.so") == "no C compiler found"
