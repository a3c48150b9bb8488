"""`npudoctor libs` on small gcc-built load graphs: what is missing deep in the chain, a missing symbol
version, a SysV-hash-only referrer; with the exit code scripts rely on (1 when anything is missing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict

import pytest

from tests.elfcases import gcc_lib, needs_gcc
from tests.test_libs_cli import run

pytestmark = needs_gcc


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Dict[str, Path]:
    """libtop.so -> libmid.so -> libleaf.so, libleaf.so then removed: found, found, not found."""
    base = tmp_path_factory.mktemp("chain")
    leaf = gcc_lib(base / "lib/libleaf.so", "int leaf(void) { return 1; }\n", soname="libleaf.so")
    gcc_lib(base / "lib/libmid.so", "int leaf(void);\nint mid(void) { return leaf(); }\n", f"-L{base / 'lib'}",
            "-lleaf", soname="libmid.so")
    top = gcc_lib(base / "lib/libtop.so", "int mid(void);\nint top(void) { return mid(); }\n", f"-L{base / 'lib'}",
                  "-lmid", soname="libtop.so")
    leaf.unlink()
    # A SysV-hash-only referrer built against a library that defines `wanted`, run beside one that does not.
    gcc_lib(base / "with/libprov.so", "int wanted(void) { return 1; }\n", soname="libprov.so")
    gcc_lib(base / "without/libprov.so", "int other(void) { return 1; }\n", soname="libprov.so")
    sysv = gcc_lib(base / "sysv/libsysvuser.so", "int wanted(void);\nint use(void) { return wanted(); }\n",
                   f"-L{base / 'with'}", "-lprov", "-Wl,--hash-style=sysv")
    return {"base": base, "top": top, "sysv": sysv}


def test_library_missing_two_levels_down_is_reported_with_its_requester(chain):
    lib = chain["base"] / "lib"
    result = run(str(chain["top"]), "--ld-library-path", str(lib))
    assert result.exit_code == 1, result.output
    assert f"NOT FOUND  libleaf.so  (needed by {lib / 'libmid.so'})" in result.output.splitlines()
    # and its symbol, which only the missing library could provide
    lines = result.output.splitlines()
    assert lines[lines.index("UNDEFINED in libmid.so (1):") + 1] == "  leaf"


def test_json_lists_the_deep_missing_library(chain):
    result = run(str(chain["top"]), "--ld-library-path", str(chain["base"] / "lib"), "--format", "json")
    document = json.loads(result.output)
    assert result.exit_code == 1 and document["clean"] is False
    assert [m["name"] for m in document["missing_libraries"]] == ["libleaf.so"]


def test_missing_symbol_version_alone_exits_one(cases):
    """veruser needs foo@VER_2; the old libver.so.1 defines only VER_1: ld.so refuses to load it."""
    result = run(str(cases["veruser"]), "--ld-library-path", str(cases["ver_old"]))
    assert "VERSION    libver.so.1: version `VER_2' not found" in result.output
    assert result.exit_code == 1


@pytest.mark.parametrize("pure", [False, True])
def test_sysv_only_referrer_does_not_define_its_own_references(chain, monkeypatch, pure):
    """In a DT_HASH table the referrer's own undefined entries sit beside its definitions; they provide
    nothing (both resolvers)."""
    from npudoctor.elf.compiled import PURE_PYTHON_VARIABLE

    if pure:
        monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    else:
        monkeypatch.delenv(PURE_PYTHON_VARIABLE, raising=False)
    without = run(str(chain["sysv"]), "--ld-library-path", str(chain["base"] / "without"))
    assert without.exit_code == 1 and "UNDEFINED in libsysvuser.so (1):\n  wanted\n" in without.output
    with_provider = run(str(chain["sysv"]), "--ld-library-path", str(chain["base"] / "with"))
    assert with_provider.exit_code == 0, with_provider.output
