"""ELF test cases shared by the loader, reader, resolver and ``libs`` tests: libraries built with gcc, a sample
of this machine's own libraries, and ``ldd -r``'s verdict on a file beside ours.

``cases`` and ``acl_by_hash_style`` are session fixtures registered once in tests/conftest.py, so the libraries
are compiled once per test run (a fixture imported into several test modules is built once per module).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, Tuple

import pytest

from npudoctor.elf.loader import Analysis, SearchEnv, analyse, load_cache

needs_gcc = pytest.mark.skipif(
    shutil.which("gcc") is None or shutil.which("ldd") is None, reason="needs gcc and ldd"
)


def gcc_lib(out: Path, source: str, *flags: str, soname: Optional[str] = None) -> Path:
    """Compile ``source`` (C) into the shared library ``out``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".c")
    src.write_text(source)
    argv = ["gcc", "-shared", "-fPIC", "-o", str(out), str(src), *flags]
    if soname:
        argv.append(f"-Wl,-soname,{soname}")
    subprocess.run(argv, check=True, capture_output=True, timeout=60)
    src.unlink()
    return out


# (missing library names, (symbol, object) undefined, (version, object) missing)
LddVerdict = Tuple[Set[str], Set[Tuple[str, str]], Set[Tuple[str, str]]]


def run_ldd(path: Path, ld_library_path: str) -> LddVerdict:
    """(missing library names, (symbol, object) undefined, (version, object) missing) from ``ldd -r``."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_LIBRARY_PATH": ld_library_path}
    proc = subprocess.run(["ldd", "-r", str(path)], capture_output=True, text=True, env=env, timeout=60)
    text = proc.stdout + proc.stderr
    missing = set(re.findall(r"^\s*(\S+) => not found", text, re.M))
    undefined = {
        (m.group(1), os.path.realpath(m.group(2)))
        for m in re.finditer(r"undefined symbol: ([^\s,]+)(?:, version \S+)?\s+\((.+)\)", text)
    }
    undefined |= {
        (m.group(1), os.path.realpath(m.group(3)))
        for m in re.finditer(
            r"symbol (\S+) version (\S+) not defined in file \S+ with link time "
            r"reference\s+\((.+)\)",
            text,
        )
    }
    versions = {
        (m.group(1), os.path.realpath(m.group(2)))
        for m in re.finditer(r"version `([^']+)' not found \(required by (.+)\)", text)
    }
    return missing, undefined, versions


def ours(analysis: Analysis) -> LddVerdict:
    """The same three sets from our analysis, to compare with :func:`run_ldd`."""
    return (
        {n.name for n in analysis.missing_libraries},
        {(m.name, os.path.realpath(m.object)) for m in analysis.missing_symbols},
        {(v.version, os.path.realpath(v.object)) for v in analysis.missing_versions},
    )


def analyse_like_ldd(path: Path, ld_library_path: str) -> Analysis:
    return analyse(str(path), SearchEnv(ld_library_path, load_cache(lambda p: p)))


def _sample_of(pattern: str, count: int) -> List[str]:
    """Up to ``count`` regular files matching ``pattern``, spread evenly over the sorted list."""
    files = sorted(
        f for f in glob.glob(pattern, recursive=True) if os.path.isfile(f) and not os.path.islink(f)
    )
    step = max(1, len(files) // count)
    return files[::step][:count]


# This machine's own libraries and Python's extension modules: whatever happens to be installed.
SYSTEM_LIBS = _sample_of("/usr/lib/x86_64-linux-gnu/*.so*", 20)
EXTENSIONS = _sample_of(os.path.join(os.path.dirname(os.__file__), "lib-dynload", "*.so"), 10)


ACL_OLD = "int aclInit(const char *c) { return 0; }\nint aclrtSetDevice(int d) { return 0; }\n"
ACL_NEW = ACL_OLD + "int aclrtGetRecentContext(void **ctx) { return 0; }\n"
USER = (
    "int aclInit(const char *);\nint aclrtGetRecentContext(void **);\n"
    "__attribute__((weak)) int aclOptionalHook(void);\n"
    "int npu_init(void) { void *c; aclInit(0); if (aclOptionalHook) aclOptionalHook();"
    " return aclrtGetRecentContext(&c); }\n"
)


@pytest.fixture(scope="session")
def cases(tmp_path_factory) -> Dict[str, Path]:
    """Two "CANN installs" (old libascendcl.so without aclrtGetRecentContext, new one with it), a user
    extension linked against the new one, $ORIGIN rpaths, and versioned symbols."""
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    base = tmp_path_factory.mktemp("elfcases")
    old = base / "Ascend/cann-7.0.0/lib64"
    new = base / "Ascend/cann-8.0.0/lib64"
    gcc_lib(old / "libascendcl.so", ACL_OLD)
    gcc_lib(new / "libascendcl.so", ACL_NEW)
    user = gcc_lib(base / "ext/libuser.so", USER, f"-L{new}", "-lascendcl")
    # $ORIGIN: the extension finds its bundled copy through ../lib relative to itself.
    bundled = base / "pkg/lib"
    shutil.copy(new / "libascendcl.so", bundled.mkdir(parents=True) or bundled / "libascendcl.so")
    # The same $ORIGIN path as DT_RUNPATH (new dtags) and as DT_RPATH (old dtags).
    for name, dtags in (("librunpath.so", "--enable-new-dtags"), ("librpath.so", "--disable-new-dtags")):
        gcc_lib(base / "pkg/ext" / name, USER, f"-L{new}", "-lascendcl", f"-Wl,{dtags}", "-Wl,-rpath,$ORIGIN/../lib")
    # Versioned symbols: libver.so.1 defines VER_1 and VER_2; the user needs foo@VER_2 and bar@VER_1.
    ver_new = base / "ver_new"
    ver_old = base / "ver_old"
    ver_new.mkdir()
    ver_old.mkdir()
    (ver_new / "v.map").write_text("VER_1 { global: bar; local: *; };\nVER_2 { } VER_1;\n")
    gcc_lib(
        ver_new / "libver.so.1",
        '__asm__(".symver foo_1, foo@VER_1");\n'
        '__asm__(".symver foo_2, foo@@VER_2");\n'
        "int foo_1(void) { return 1; }\nint foo_2(void) { return 2; }\nint bar(void) { return 3; }\n",
        f"-Wl,--version-script={ver_new / 'v.map'}",
        soname="libver.so.1",
    )
    (ver_old / "v.map").write_text("VER_1 { global: foo; bar; local: *; };\n")
    gcc_lib(
        ver_old / "libver.so.1",
        "int foo(void) { return 1; }\nint bar(void) { return 3; }\n",
        f"-Wl,--version-script={ver_old / 'v.map'}",
        soname="libver.so.1",
    )
    (ver_new / "libver.so").symlink_to("libver.so.1")
    gcc_lib(
        base / "ext/libveruser.so",
        "int foo(void); int bar(void);\nint f(void) { return foo() + bar(); }\n",
        f"-L{ver_new}",
        "-lver",
    )
    # Unversioned definition of a versioned reference: ld.so accepts it.
    ver_plain = base / "ver_plain"
    gcc_lib(
        ver_plain / "libver.so.1",
        "int foo(void) { return 1; }\nint bar(void) { return 3; }\n",
        soname="libver.so.1",
    )
    return {
        "old": old,
        "new": new,
        "user": user,
        "base": base,
        "bundled": bundled,
        "ver_new": ver_new,
        "ver_old": ver_old,
        "ver_plain": ver_plain,
        "veruser": base / "ext/libveruser.so",
    }


@pytest.fixture(scope="session")
def acl_by_hash_style(tmp_path_factory) -> Callable[[str], Path]:
    """``build(style)``: a folder holding new/libascendcl.so and old/libascendcl.so linked with
    ``--hash-style=style`` (sysv, gnu or both), compiled once per style and test run."""
    built: Dict[str, Path] = {}

    def build(style: str) -> Path:
        if style not in built:
            base = tmp_path_factory.mktemp(f"acl-hash-{style}")
            gcc_lib(base / "new/libascendcl.so", ACL_NEW, f"-Wl,--hash-style={style}")
            gcc_lib(base / "old/libascendcl.so", ACL_OLD, f"-Wl,--hash-style={style}")
            built[style] = base
        return built[style]

    return build
