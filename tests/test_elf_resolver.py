"""The compiled resolver (``npudoctor/elf/_resolver.c``) against the pure-Python one it speeds up: the same
unresolved references and the same errors on libraries built here with gcc, this machine's own libraries,
the real torch-npu wheel beside CPU torch, and a thousand corrupted files (where C could also crash).
And the module in use is built from the C file in the tree, not a stale copy."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import struct
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import pytest

from npudoctor.elf.compiled import PURE_PYTHON_VARIABLE, compiled_resolver
from npudoctor.elf.loader import SearchEnv, analyse, load_cache
from npudoctor.elf.reader import ElfError, open_elf
from tests.elfcases import EXTENSIONS, SYSTEM_LIBS, gcc_lib, needs_gcc
from tests.wheels import torch_lib_dir, torch_npu_wheel_dir

SOURCE = Path(__file__).resolve().parents[1] / "npudoctor" / "elf" / "_resolver.c"
# .ci/run sets this: there a missing compiled resolver is a broken build, not a reason to skip.
REQUIRE_VARIABLE = "NPUDOCTOR_REQUIRE_COMPILED"

Outcome = Tuple[List[Tuple[str, str, object, object]], List[str]]


@pytest.fixture(autouse=True)
def compiled():
    module = compiled_resolver()
    if module is None:
        if os.environ.get(REQUIRE_VARIABLE):
            pytest.fail(f"{REQUIRE_VARIABLE} is set but npudoctor.elf._resolver is not built")
        pytest.skip("the compiled resolver is not built (no C compiler at install)")
    return module


def test_compiled_resolver_is_built_from_this_source(compiled):
    assert hashlib.sha256(SOURCE.read_bytes()).hexdigest() == compiled.SOURCE_SHA256, (
        "npudoctor/elf/_resolver.c changed since the module was built: run `pip install -e .` again"
    )


def resolve(root: str, ld_library_path: str, preload: Sequence[str] = (), pure: bool = False) -> Outcome:
    previous = os.environ.pop(PURE_PYTHON_VARIABLE, None)
    if pure:
        os.environ[PURE_PYTHON_VARIABLE] = "1"
    try:
        analysis = analyse(root, SearchEnv(ld_library_path, load_cache(lambda p: p)), preload)
    finally:
        os.environ.pop(PURE_PYTHON_VARIABLE, None)
        if previous is not None:
            os.environ[PURE_PYTHON_VARIABLE] = previous
    try:
        missing = [(m.name, m.object, m.version, m.version_file) for m in analysis.missing_symbols]
        return missing, analysis.errors
    finally:
        analysis.close()


def assert_same(root: str, ld_library_path: str = "", preload: Sequence[str] = ()) -> Outcome:
    compiled = resolve(root, ld_library_path, preload)
    assert compiled == resolve(root, ld_library_path, preload, pure=True)
    return compiled


@needs_gcc
def test_gcc_cases_missing_symbols_versions_and_rpaths(cases):
    user = str(cases["user"])
    assert assert_same(user, str(cases["old"]))[0] == [("aclrtGetRecentContext", user, None, None)]
    assert assert_same(user, str(cases["new"]))[0] == []
    assert assert_same(user, f"{cases['old']}:{cases['new']}")[0]  # the old one shadows the new
    assert assert_same(user, "")[0]  # libascendcl.so not found at all: both its symbols missing
    for name in ("librunpath.so", "librpath.so"):
        assert assert_same(str(cases["base"] / "pkg/ext" / name))[0] == []
    veruser = str(cases["veruser"])
    assert assert_same(veruser, str(cases["ver_new"]))[0] == []
    assert assert_same(veruser, str(cases["ver_old"]))[0] == [("foo", veruser, "VER_2", "libver.so.1")]
    assert assert_same(veruser, str(cases["ver_plain"]))[0] == []


@needs_gcc
@pytest.mark.parametrize("style", ["sysv", "gnu", "both"])
def test_hash_table_styles(cases, acl_by_hash_style, tmp_path, style):
    libs = acl_by_hash_style(style)
    new = libs / "new/libascendcl.so"
    user = gcc_lib(tmp_path / "libuser.so", "int aclInit(const char *); int f(void) { return aclInit(0); }\n"
                   "int aclrtGetRecentContext(void **); int g(void) { return aclrtGetRecentContext(0); }\n",
                   f"-L{new.parent}", "-lascendcl", f"-Wl,--hash-style={style}")
    assert assert_same(str(user), str(new.parent))[0] == []
    assert [m[0] for m in assert_same(str(user), str(libs / "old"))[0]] == ["aclrtGetRecentContext"]


@pytest.mark.parametrize("path", SYSTEM_LIBS + EXTENSIONS)
def test_this_machines_libraries(path):
    try:
        open_elf(path).close()
    except ElfError:
        pytest.skip(f"{path} is not an ELF file")
    assert_same(path)


def test_extension_modules_with_the_interpreter_preloaded():
    """Python's own extensions leave Py* undefined: missing alone, found with the interpreter preloaded."""
    extension = EXTENSIONS[0] if EXTENSIONS else pytest.skip("no extension modules here")
    python = os.path.realpath(shutil.which("python3") or "/usr/bin/python3")
    alone = assert_same(extension)[0]
    assert assert_same(extension, preload=[python])[0] == [m for m in alone if not m[0].startswith(("Py", "_Py"))]


def test_torch_npu_wheel_beside_cpu_torch():
    lib = torch_npu_wheel_dir() / "lib" / "libtorch_npu.so"
    missing, errors = assert_same(str(lib), str(torch_lib_dir()))
    assert len(missing) > 100 and not errors  # CANN is not installed: its symbols are all missing


def mutation_regions(path: Path) -> List[Tuple[int, int]]:
    """(start, end) of what ld.so and both resolvers read: the ELF header, the program headers, the dynamic
    section and the tables it points at (hash tables, strings, symbols, versions)."""
    with open_elf(str(path)) as elf:
        phoff, phnum = (32, 56) if elf.is64 else (28, 32)
        start = elf._unpack("Q" if elf.is64 else "I", phoff)[0]
        count = elf._unpack("H", phoff + (24 if elf.is64 else 16))[0]
        regions = [(0, 64), (start, start + count * phnum)]
        regions += [(at, at + 256) for at in sorted(elf._table_offsets.values())]
        tags = (4, 5, 6, 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFE)
        regions += [(elf._offset(elf._dyn[tag]), elf._offset(elf._dyn[tag]) + 256) for tag in tags if tag in elf._dyn]
    dynamic = _dynamic_section(path)
    if dynamic is not None:
        regions.append(dynamic)
    return regions


def _dynamic_section(path: Path) -> Optional[Tuple[int, int]]:
    """(start, end) of the PT_DYNAMIC segment of a 64-bit little-endian file (the gcc cases)."""
    data = path.read_bytes()
    phoff, phentsize, phnum = struct.unpack_from("<Q", data, 32)[0], *struct.unpack_from("<HH", data, 54)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 2:
            return p_offset, p_offset + p_filesz
    return None


# Values a flipped byte rarely makes: zero, one, the largest, the sign bit, a page, a huge offset.
EXTREME_WORDS = (0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x1000, 0xFFFF)


@needs_gcc
def test_corrupted_files_give_the_same_answers(cases, tmp_path):
    """Bytes and words changed at random (seeded) in everything both resolvers read (ELF and program headers,
    dynamic section, symbols, strings, hash tables, versions): the same missing symbols and errors, or the
    same ElfError, never another exception, never a crash, never more than a moment per file."""
    rng = random.Random(int(os.environ.get("NPUDOCTOR_FUZZ_SEED", "1234")))
    trials = int(os.environ.get("NPUDOCTOR_FUZZ_TRIALS", "100"))
    # (the file corrupted, the file analysed): a referrer itself, or a library it loads.
    victims = [
        (cases["user"], None),
        (cases["new"] / "libascendcl.so", cases["user"]),
        (cases["veruser"], None),
        (cases["ver_new"] / "libver.so.1", cases["veruser"]),
    ]
    for victim, analysed in victims:
        data = victim.read_bytes()
        regions = mutation_regions(victim)
        for trial in range(trials):
            mutated = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                start, end = rng.choice(regions)
                at = rng.randrange(start, end)
                if rng.random() < 0.7:
                    if at < len(mutated):
                        mutated[at] = rng.randrange(256)
                else:  # a whole word: sizes, counts and offsets become extreme
                    at -= at % 4
                    word = rng.choice([*EXTREME_WORDS, rng.randrange(1 << 32)]).to_bytes(4, "little")
                    mutated[at : at + 4] = word[: max(0, len(mutated) - at)]
            if trial % 10 == 9:  # and some cut short in the middle of the tables
                mutated = mutated[: rng.choice(regions)[0] + rng.randrange(0, 256)]
            folder = tmp_path / f"{victim.name}-{trial}"
            folder.mkdir()
            copy = folder / victim.name
            copy.write_bytes(bytes(mutated))
            root = str(analysed or copy)
            started = time.monotonic()
            assert outcome(root, str(folder)) == outcome(root, str(folder), pure=True), (victim.name, trial)
            assert time.monotonic() - started < 2, (victim.name, trial)


def outcome(root: str, ld_library_path: str, pure: bool = False) -> object:
    try:
        return resolve(root, ld_library_path, pure=pure)
    except ElfError as exc:
        return str(exc)


def test_largest_word_is_max_and_checks_bounds(compiled):
    import array

    rng = random.Random(5)
    words = array.array("I", [rng.randrange(2**32) for _ in range(1000)])
    assert compiled.largest_word(words, 0, len(words)) == max(words)
    assert compiled.largest_word(words.tobytes(), 4 * 10, 5) == max(words[10:15])
    assert compiled.largest_word(b"", 0, 0) == 0
    with pytest.raises(ValueError):
        compiled.largest_word(words, 4, len(words))


@pytest.mark.parametrize("path", SYSTEM_LIBS[:8] + EXTENSIONS[:4])
def test_symbol_counts_agree(path, monkeypatch):
    """The symbol count of files with only a GNU hash table comes from their highest bucket, by C or by max()."""
    try:
        with open_elf(path) as elf:
            counted = elf.symbol_count()
    except ElfError:
        pytest.skip(f"{path} is not an ELF file")
    monkeypatch.setenv(PURE_PYTHON_VARIABLE, "1")
    with open_elf(path) as elf:
        assert elf.symbol_count() == counted


# Real names torch_npu 2.14 leaves undefined beside CPU torch 2.13 (from test_torch_npu_wheel_beside_cpu_torch).
MANGLED = {
    "_ZN5torch10ValueErrorC1EPKcz": "torch::ValueError::ValueError(char const*, ...)",
    "_ZN3c1013GeneratorImpl12philox_stateEmRN2at6TensorES3_S3_":
        "c10::GeneratorImpl::philox_state(unsigned long, at::Tensor&, at::Tensor&, at::Tensor&)",
    "_ZNK2at10TensorBase14const_data_ptrIN3c107complexINS2_8BFloat16EEEEEPKT_v":
        "c10::complex<c10::BFloat16> const* at::TensorBase::const_data_ptr<c10::complex<c10::BFloat16> >() const",
    "_ZNK4c10d4Work10getTimeoutEv": "c10d::Work::getTimeout() const",
}


def test_demangles_in_process_like_cxxfilt(compiled):
    """libstdc++'s demangler (what c++filt is built from), loaded by the compiled module: no binutils needed,
    no process started. A name that is not mangled C++ comes back as None (left as it is)."""
    names = [*MANGLED, "_Znot_a_mangled_name", "aclInit"]
    assert compiled.demangle(names) == [*MANGLED.values(), None, None]
    if shutil.which("c++filt"):
        from npudoctor.probes.linkage import demangle
        from npudoctor.probes.runner import LiveRunner

        os.environ[PURE_PYTHON_VARIABLE] = "1"  # the c++filt path
        try:
            assert demangle(LiveRunner(), names) == MANGLED
        finally:
            del os.environ[PURE_PYTHON_VARIABLE]
