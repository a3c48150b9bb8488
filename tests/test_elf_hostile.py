"""The ELF reader never raises anything but its one-line error and never runs away, on both resolvers.

Hostile files are written byte by byte (tests/elfbuild.py): static objects, a dynamic section without its
symbol table or pointing it outside the file, a DT_NEEDED string at a huge offset, version needs sharing
one long aux chain, SysV hash chains that loop. `npudoctor libs` answers each with the same line on the
compiled and the pure-Python path and exit 2; nothing costs more than the file's size."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from typing import Dict

import pytest

from npudoctor.elf.compiled import PURE_PYTHON_VARIABLE, compiled_resolver
from npudoctor.elf.loader import SearchEnv, analyse
from tests.elfbuild import DT_NEEDED, DT_SYMTAB, build_so

PATHS = ["compiled", "pure"]

# name -> (build_so arguments, the error after "PATH: ")
HOSTILE: Dict[str, tuple] = {
    "static": ({"dynamic": False, "undefined": ["foo"]},
               "not a dynamic object (no PT_DYNAMIC: statically linked, nothing for ld.so to load)"),
    "no-symbol-table": ({"undefined": ["foo"], "drop_tags": [DT_SYMTAB]},
                        "corrupt ELF (dynamic section has no symbol table)"),
    "symbol-table-outside": ({"undefined": ["foo"], "tag_values": {DT_SYMTAB: 0xDEAD0000}},
                             "corrupt ELF (symbol table at address 0xdead0000 is outside every loaded segment)"),
    "huge-needed": ({"undefined": ["foo"], "needed": ["libc.so.6"], "tag_values": {DT_NEEDED: 1 << 63}},
                    "string at offset 0x80000000000000b0 runs past the end of the file"),
}


def _use(path_kind: str, monkeypatch) -> None:
    if path_kind == "pure":
        monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    else:
        monkeypatch.delenv(PURE_PYTHON_VARIABLE, raising=False)
        if compiled_resolver() is None:
            pytest.skip("the compiled resolver is not built")


def _libs(*args: str, env_extra: Dict[str, str], limit_s: float = 30) -> subprocess.CompletedProcess:
    """`npudoctor libs ARGS` in a child with 1 GiB of address space: a runaway fails, it does not swap."""
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30)); "
            "from npudoctor.cli import main; sys.argv = ['npudoctor', *sys.argv[1:]]; main()")
    env = {key: value for key, value in os.environ.items() if key != PURE_PYTHON_VARIABLE}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code, "libs", *args], capture_output=True, text=True,
                          timeout=limit_s, env=env)


@pytest.mark.parametrize("path_kind", PATHS)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_root_is_one_line_exit_2_on_both_paths(tmp_path, monkeypatch, case, path_kind):
    from tests.test_libs_cli import run

    _use(path_kind, monkeypatch)
    arguments, message = HOSTILE[case]
    target = tmp_path / "libhostile.so"
    target.write_bytes(build_so(**arguments))
    result = run(str(target), "--ld-library-path", str(tmp_path))
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"npudoctor: error: {target}: {message}"]


def test_well_formed_built_object_resolves_on_both_paths(tmp_path, monkeypatch):
    """The builder's ordinary output is a file both resolvers read: the hostile cases differ only by their flaw."""
    (tmp_path / "libdep.so").write_bytes(build_so(defined=["foo"], soname="libdep.so"))
    root = tmp_path / "libroot.so"
    root.write_bytes(build_so(undefined=["foo", "absent"], needed=["libdep.so"]))
    for kind in PATHS:
        _use(kind, monkeypatch)
        analysis = analyse(str(root), SearchEnv(str(tmp_path), None))
        try:
            assert ([m.name for m in analysis.missing_symbols], analysis.errors) == (["absent"], [])
        finally:
            analysis.close()


@pytest.mark.parametrize("path_kind", PATHS)
def test_looping_sysv_hash_chain_costs_little_and_binds_nothing(tmp_path, monkeypatch, path_kind):
    """A dependency whose DT_HASH chains loop: every lookup there fails at once (it cost 0.65 s per reference
    in Python, 10 ms compiled), the same way on both paths."""
    _use(path_kind, monkeypatch)
    (tmp_path / "libloop.so").write_bytes(build_so(defined=["foo", "bar"], soname="libloop.so", sysv_loop=True))
    root = tmp_path / "libroot.so"
    wanted = [f"sym{i}" for i in range(300)] + ["foo"]
    root.write_bytes(build_so(undefined=wanted, needed=["libloop.so"]))
    started = time.monotonic()
    analysis = analyse(str(root), SearchEnv(str(tmp_path), None))
    try:
        assert sorted(m.name for m in analysis.missing_symbols) == sorted(wanted)
    finally:
        analysis.close()
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("path_kind", PATHS)
def test_version_needs_sharing_one_long_aux_chain_are_corrupt_not_a_gigabyte(tmp_path, path_kind):
    """150 verneed entries pointing at one 65,535-entry aux chain took 1 GB and 11 s: now one line, exit 2."""
    if path_kind == "compiled" and compiled_resolver() is None:
        pytest.skip("the compiled resolver is not built")
    target = tmp_path / "libverneed.so"
    target.write_bytes(build_so(undefined=["foo"], shared_verneed=(150, 65535)))
    started = time.monotonic()
    proc = _libs(str(target), "--ld-library-path", str(tmp_path),
                 env_extra={PURE_PYTHON_VARIABLE: "1"} if path_kind == "pure" else {})
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        f"npudoctor: error: {target}: corrupt ELF (version needs: entries share or loop)"]
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link", "directory"])
def test_libs_on_a_special_file_is_one_line_exit_2_without_blocking(tmp_path, kind):
    """`libs FIFO` blocked forever in open(); /dev/zero is never an ELF file. The type is looked at first."""
    target = tmp_path / "libx.so"
    expected = {"fifo": "not a regular file (a FIFO)", "dev-zero-link": "not a regular file (a character device)",
                "directory": "is a directory"}[kind]
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-zero-link":
        target.symlink_to("/dev/zero")
    else:
        target.mkdir()
    proc = _libs(str(target), env_extra={}, limit_s=20)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"npudoctor: error: {target}: {expected}"]


def test_special_files_on_the_search_path_and_as_ld_so_cache_are_skipped(tmp_path):
    """Under --root, a FIFO as /etc/ld.so.cache and as a needed library: skipped as unreadable, no hang."""
    root = tmp_path / "node"
    lib = root / "opt/lib"
    lib.mkdir(parents=True)
    (root / "etc").mkdir()
    os.mkfifo(root / "etc/ld.so.cache")
    os.mkfifo(lib / "libdep.so")
    (lib / "libroot.so").write_bytes(build_so(undefined=["foo"], needed=["libdep.so"]))
    proc = _libs("/opt/lib/libroot.so", "--root", str(root), "--ld-library-path", "/opt/lib", env_extra={},
                 limit_s=20)
    assert proc.returncode == 1, proc.stderr
    assert "NOT FOUND  libdep.so" in proc.stdout
    assert stat.S_ISFIFO((root / "etc/ld.so.cache").stat().st_mode)  # looked at, never opened for writing



def _set_dynamic_entry(data: bytes, tag: int, value: int) -> bytes:
    """``data`` (a 64-bit little-endian ELF file) with the value of its dynamic entry ``tag`` replaced."""
    import struct

    out = bytearray(data)
    phoff, (phentsize, phnum) = struct.unpack_from("<Q", out, 32)[0], struct.unpack_from("<HH", out, 54)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", out, phoff + i * phentsize)
        if p_type == 2:
            for at in range(p_offset, p_offset + p_filesz, 16):
                if struct.unpack_from("<q", out, at)[0] == tag:
                    struct.pack_into("<Q", out, at + 8, value)
                    return bytes(out)
    raise AssertionError(f"no dynamic entry {tag}")


@pytest.mark.parametrize("path_kind", PATHS)
def test_gnu_hashed_library_with_its_symbol_table_outside_the_file(cases, tmp_path, monkeypatch, path_kind):
    """A gcc-built library (GNU hash table, viewed in place) whose DT_SYMTAB points nowhere: the views taken
    before the error are released, so the one-line error comes out (it was BufferError: cannot close
    exported pointers exist)."""
    from tests.test_libs_cli import run

    _use(path_kind, monkeypatch)
    target = tmp_path / "libuser.so"
    target.write_bytes(_set_dynamic_entry(cases["user"].read_bytes(), DT_SYMTAB, 0x7FFF0000))
    result = run(str(target), "--ld-library-path", str(cases["new"]))
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"npudoctor: error: {target}: corrupt ELF (symbol table at address 0x7fff0000 is outside every loaded "
        "segment)"]
