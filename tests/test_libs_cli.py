"""``npudoctor libs PATH.so``: text and JSON output, exit codes, bad input."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from npudoctor.cli import main
from tests.elfcases import needs_gcc


def run(*args: str, columns: int = 1000):
    """``npudoctor libs ARGS``; wide by default: these tests read what is said (tests/test_libs_layout.py
    checks how it wraps)."""
    return CliRunner().invoke(main, ["libs", *args], env={"COLUMNS": str(columns)})


@needs_gcc
def test_text_names_the_missing_symbol_its_provider_and_the_shadowing(cases):
    result = run(str(cases["user"]), "--ld-library-path", f"{cases['old']}:{cases['new']}")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    group = lines.index("UNDEFINED in libuser.so; should come from libascendcl.so (1):")
    assert lines[group + 1] == (
        f"  aclrtGetRecentContext  (exported by the shadowed {cases['new'] / 'libascendcl.so'})"
    )
    assert (
        f"SHADOWED   libascendcl.so: {cases['old'] / 'libascendcl.so'} wins (via LD_LIBRARY_PATH"
        in result.output
    )
    # A summary per expected provider comes before the symbol list: the old CANN is loaded but lacks it.
    assert "1 undefined symbol, by the library that should provide them:" in result.output
    assert "libascendcl.so  (loaded, but does not export them: a build for another version?)" in result.output


@needs_gcc
def test_json_clean_exit_0(cases):
    result = run(str(cases["user"]), "--format", "json", "--ld-library-path", str(cases["new"]))
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["clean"] is True and data["missing_symbols"] == [] and data["missing_libraries"] == []
    [need] = [n for n in data["needed"] if n["name"] == "libascendcl.so"]
    assert need == {
        "requester": str(cases["user"]),
        "name": "libascendcl.so",
        "path": str(cases["new"] / "libascendcl.so"),
        "via": "LD_LIBRARY_PATH",
        "entry": str(cases["new"]),
    }


@needs_gcc
def test_root_maps_system_paths(cases, tmp_path):
    import shutil

    root = tmp_path / "img"
    (root / "opt/ext").mkdir(parents=True)
    (root / "opt/cann/lib64").mkdir(parents=True)
    shutil.copy(cases["user"], root / "opt/ext/libuser.so")
    shutil.copy(cases["new"] / "libascendcl.so", root / "opt/cann/lib64/libascendcl.so")
    result = run(
        "/opt/ext/libuser.so",
        "--root",
        str(root),
        "--ld-library-path",
        "/opt/cann/lib64",
        "-v",
        "--format",
        "text",
    )
    assert result.exit_code == 0, result.output
    assert (
        "libascendcl.so => /opt/cann/lib64/libascendcl.so  [LD_LIBRARY_PATH: /opt/cann/lib64]"
        in result.output
    )


@pytest.mark.parametrize(
    "content,message",
    [
        (b"", "not an ELF file (0 bytes)"),
        (
            b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"\x03\x00\x3e\x00",
            "truncated ELF (needs data at offset 0x10)",
        ),
        (b"#!/bin/sh\necho hi\n", "not an ELF file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, content, message):
    bad = tmp_path / "bad.so"
    bad.write_bytes(content)
    result = run(str(bad))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"npudoctor: error: {bad}: {message}"]


def test_missing_file_exit_2(tmp_path):
    result = run(str(tmp_path / "nope.so"))
    assert result.exit_code == 2 and "No such file or directory" in result.output


def test_root_that_is_not_a_directory_exit_2(tmp_path):
    missing = tmp_path / "nope"
    result = run(str(tmp_path / "lib.so"), "--root", str(missing))
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"npudoctor: error: --root {missing}: not a directory"]
