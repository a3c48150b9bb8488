"""ld.so.cache in all three formats glibc's ldconfig writes (old, compat, new), checked against
``ldconfig -p`` on the same file."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from npudoctor.elf.ldcache import LdCache, parse_ld_cache
from npudoctor.elf.reader import ElfError

needs_ldconfig = pytest.mark.skipif(shutil.which("ldconfig") is None, reason="needs ldconfig")


def ldconfig_print(cache) -> set:
    text = subprocess.run(
        ["ldconfig", "-p", "-C", str(cache)], capture_output=True, text=True, timeout=30
    ).stdout
    return {(m.group(1), m.group(3)) for m in re.finditer(r"^\s+(\S+) \(([^)]*)\) => (\S+)$", text, re.M)}


@needs_ldconfig
@pytest.mark.parametrize("fmt", ["old", "compat", "new"])
def test_cache_formats_agree_with_ldconfig(tmp_path, fmt):
    lib = tmp_path / "lib"
    lib.mkdir()
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    source = next(
        (p for p in (libc, "/lib64/libc.so.6", "/usr/lib64/libc.so.6") if shutil.os.path.exists(p)), None
    )
    if source is None:
        pytest.skip("no libc.so.6 to place in the cache")
    shutil.copy(source, lib / "libc.so.6")
    conf = tmp_path / "ld.so.conf"
    conf.write_text(f"{lib}\n")
    cache = tmp_path / f"{fmt}.cache"
    subprocess.run(
        ["ldconfig", "-c", fmt, "-C", str(cache), "-f", str(conf), "-X"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    entries = parse_ld_cache(cache.read_bytes())
    assert {(e.name, e.path) for e in entries} == ldconfig_print(cache)
    # Our copy is listed first for its name (ldconfig puts configured dirs before the trusted ones).
    assert LdCache(entries).lookup("libc.so.6", 62, True) in (str(lib / "libc.so.6"), source)


@needs_ldconfig
def test_flags_keep_other_abis_out(tmp_path):
    cache = tmp_path / "new.cache"
    conf = tmp_path / "ld.so.conf"
    conf.write_text("")
    subprocess.run(
        ["ldconfig", "-c", "new", "-C", str(cache), "-f", str(conf), "-X"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    index = LdCache(parse_ld_cache(cache.read_bytes()))
    name = next(e.name for e in index.entries if e.flags == 0x0303)
    assert index.lookup(name, 62, True) is not None  # x86-64
    assert index.lookup(name, 183, True) is None  # an aarch64 process never gets an x86-64 entry


def test_corrupt_cache_is_a_clear_error():
    with pytest.raises(ElfError, match="unknown format"):
        parse_ld_cache(b"\x00" * 64)
    with pytest.raises(ElfError, match="truncated"):
        parse_ld_cache(b"glibc-ld.so.cache1.1" + b"\x05\x00\x00\x00" + b"\x00" * 4)
