"""The loader emulation against real ELF files built with gcc, and against ``ldd -r`` on each case.

Only tests run ldd (it executes the loader); npudoctor itself never does.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from npudoctor.elf.loader import Analysis
from npudoctor.elf.reader import ElfError, open_elf
from tests.elfcases import (
    EXTENSIONS,
    SYSTEM_LIBS,
    analyse_like_ldd,
    gcc_lib,
    needs_gcc,
    ours,
    run_ldd,
)


def assert_agrees_with_ldd(path: Path, ld_library_path: str) -> Analysis:
    analysis = analyse_like_ldd(path, ld_library_path)
    assert ours(analysis) == run_ldd(path, ld_library_path)
    return analysis


@needs_gcc
def test_older_cann_first_on_path_misses_symbol_and_shadows(cases):
    path = f"{cases['old']}:{cases['new']}"
    analysis = assert_agrees_with_ldd(cases["user"], path)
    assert [(m.name, m.object) for m in analysis.missing_symbols] == [
        ("aclrtGetRecentContext", str(cases["user"]))
    ]
    [shadow] = analysis.shadowed
    assert shadow.name == "libascendcl.so"
    assert shadow.path == str(cases["old"] / "libascendcl.so")
    assert [c.path for c in shadow.candidates] == [
        str(cases["old"] / "libascendcl.so"),
        str(cases["new"] / "libascendcl.so"),
    ]
    assert shadow.via == "LD_LIBRARY_PATH" and shadow.entry == str(cases["old"])


@needs_gcc
def test_newer_cann_first_resolves_everything_weak_refs_ignored(cases):
    analysis = assert_agrees_with_ldd(cases["user"], f"{cases['new']}:{cases['old']}")
    assert analysis.missing_symbols == [] and analysis.missing_libraries == []


@needs_gcc
def test_missing_library_and_its_symbols(cases):
    analysis = assert_agrees_with_ldd(cases["user"], "")
    assert [n.name for n in analysis.missing_libraries] == ["libascendcl.so"]
    assert {m.name for m in analysis.missing_symbols} == {"aclInit", "aclrtGetRecentContext"}


@needs_gcc
@pytest.mark.parametrize(
    "name,via", [("librunpath.so", "RUNPATH of librunpath.so"), ("librpath.so", "RPATH of librpath.so")]
)
def test_origin_rpath_and_runpath(cases, name, via):
    lib = cases["base"] / "pkg/ext" / name
    # RPATH beats LD_LIBRARY_PATH; RUNPATH comes after it.
    analysis = assert_agrees_with_ldd(lib, str(cases["old"]))
    [need] = [n for n in analysis.needed if n.name == "libascendcl.so"]
    if via.startswith("RPATH"):
        assert need.path == str(cases["base"] / "pkg/ext/../lib/libascendcl.so") or os.path.realpath(
            need.path
        ) == str(cases["bundled"] / "libascendcl.so")
        assert need.via == via and need.entry == "$ORIGIN/../lib"
        assert analysis.missing_symbols == []
    else:
        assert need.via == "LD_LIBRARY_PATH"
        assert [m.name for m in analysis.missing_symbols] == ["aclrtGetRecentContext"]
    analysis = assert_agrees_with_ldd(lib, "")
    [need] = [n for n in analysis.needed if n.name == "libascendcl.so"]
    assert need.via == via


@needs_gcc
def test_versioned_symbols(cases):
    user = cases["veruser"]
    assert assert_agrees_with_ldd(user, str(cases["ver_new"])).missing_versions == []
    old = assert_agrees_with_ldd(user, str(cases["ver_old"]))
    assert [(v.version, v.file) for v in old.missing_versions] == [("VER_2", "libver.so.1")]
    plain = assert_agrees_with_ldd(user, str(cases["ver_plain"]))
    assert plain.missing_symbols == [] and plain.missing_versions == []


@needs_gcc
def test_reference_version_read_from_verneed(cases):
    with open_elf(str(cases["veruser"])) as elf:
        refs = {
            s.name: (s.version, s.version_file) for s in elf.undefined_symbols() if s.name in ("foo", "bar")
        }
    assert refs == {"foo": ("VER_2", "libver.so.1"), "bar": ("VER_1", "libver.so.1")}
    with open_elf(str(cases["ver_new"] / "libver.so.1")) as lib:
        assert lib.lookup("foo", "VER_2") and lib.lookup("bar", "VER_1") and lib.lookup("foo")
        assert not lib.lookup("bar", "VER_2")
        assert not lib.lookup("foo", "VER_3") and not lib.lookup("nothere")


@needs_gcc
def test_library_for_another_machine_is_skipped(cases, tmp_path):
    foreign = tmp_path / "aarch64"
    foreign.mkdir()
    data = bytearray((cases["new"] / "libascendcl.so").read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64
    (foreign / "libascendcl.so").write_bytes(bytes(data))
    analysis = assert_agrees_with_ldd(cases["user"], f"{foreign}:{cases['new']}")
    [need] = analysis.needed[:1]
    assert need.path == str(cases["new"] / "libascendcl.so")
    assert need.skipped == [(str(foreign / "libascendcl.so"), "wrong ELF class or machine")]


@needs_gcc
def test_corrupt_and_truncated_files_give_clear_errors(cases, tmp_path):
    data = (cases["user"]).read_bytes()
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(data[:200])
    with pytest.raises(ElfError, match="truncated"):
        analyse_like_ldd(truncated, "")
    text = tmp_path / "notelf.so"
    text.write_text("INPUT(-lfoo)\n")
    with pytest.raises(ElfError, match="not an ELF file"):
        analyse_like_ldd(text, "")
    garbage = tmp_path / "garbage.so"
    garbage.write_bytes(b"\x7fELF" + b"\x09" * 60)
    with pytest.raises(ElfError, match="corrupt ELF header"):
        analyse_like_ldd(garbage, "")


@needs_gcc
def test_analysis_never_runs_the_library(tmp_path):
    """A constructor that would leave a marker file if the library were loaded or run."""
    from click.testing import CliRunner

    from npudoctor.cli import main

    marker = tmp_path / "ran"
    lib = gcc_lib(
        tmp_path / "libtrap.so",
        f"#include <stdio.h>\n__attribute__((constructor)) static void trap(void) "
        f'{{ fclose(fopen("{marker}", "w")); }}\nint f(void) {{ return 0; }}\n',
    )
    analyse_like_ldd(lib, "")
    assert CliRunner().invoke(main, ["libs", str(lib)]).exit_code == 0
    assert not marker.exists()


@needs_gcc
@pytest.mark.parametrize("style", ["sysv", "both"])
def test_sysv_hash_tables(cases, acl_by_hash_style, style):
    """Libraries with only DT_HASH (old toolchains) or both tables resolve the same way ld.so does."""
    libs = acl_by_hash_style(style)
    new = libs / "new/libascendcl.so"
    with open_elf(str(new)) as elf:
        assert elf.lookup("aclrtGetRecentContext") and not elf.lookup("aclrtNothing")
        assert elf.symbol_count() > 3
    assert assert_agrees_with_ldd(cases["user"], str(new.parent)).missing_symbols == []
    missing = assert_agrees_with_ldd(cases["user"], str(libs / "old")).missing_symbols
    assert [m.name for m in missing] == ["aclrtGetRecentContext"]


@pytest.mark.skipif(shutil.which("ldd") is None, reason="needs ldd")
@pytest.mark.parametrize("path", SYSTEM_LIBS + EXTENSIONS)
def test_system_libraries_and_extensions_agree_with_ldd(path):
    """Whatever this machine has installed (glibc, libstdc++, Python's own extension modules, which leave
    Py* symbols undefined): same missing libraries, symbols and versions as ``ldd -r``."""
    try:
        analysis = analyse_like_ldd(Path(path), "")
    except ElfError:
        pytest.skip(f"{path} is not an ELF shared object")
    assert ours(analysis) == run_ldd(Path(path), "")
