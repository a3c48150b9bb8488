"""The reader's fast paths (column views of the symbol table, base-33 gnu_hash, batched lookups) against
plain reference implementations: a per-character hash loop and a struct walk of the whole table."""

from __future__ import annotations

import glob
import os
import random
import struct
from typing import Dict, List, Optional, Tuple

import pytest

from npudoctor.elf.loader import SearchEnv, analyse
from npudoctor.elf.reader import (
    DT_VERSYM,
    VERSYM_HIDDEN,
    ElfFile,
    _SymbolColumns,
    gnu_hash,
    open_elf,
)
from npudoctor.elf.summary import LinkReport, NeededInfo, link_report


def reference_gnu_hash(name: bytes) -> int:
    h = 5381
    for c in name:
        h = (h * 33 + c) & 0xFFFFFFFF
    return h


def test_gnu_hash_matches_the_per_character_definition():
    rng = random.Random(7)
    names = [b"", b"printf", b"_ZN2at6native4normERKNS_6TensorE", "\u20ac".encode() * 40]
    names += [bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 300))) for _ in range(300)]
    # Longer than int() parses in a non-power-of-two base on Python >= 3.11: the loop takes over.
    names += [b"_Z" + b"N5torch" * 700, b"x" * 4000, b"y" * 4001]
    assert gnu_hash(b"printf") == 0x156B2BB8  # the value every GNU hash write-up quotes
    assert [gnu_hash(n) for n in names] == [reference_gnu_hash(n) for n in names]


SYMBOLS = [  # (st_name, st_info, st_other, st_shndx, st_value, st_size)
    (0, 0, 0, 0, 0, 0),
    (17, 0x12, 0, 0, 0, 0),  # GLOBAL FUNC, undefined
    (0x1234, 0x22, 0, 0xFFF1, 0x1000, 8),  # WEAK FUNC, absolute
    (0xABCDEF, 0x11, 3, 0x0100, 0xFFFFFFFF, 4),  # st_shndx 256: low byte zero, defined
    (5, 0x16, 0, 12, 0x20, 16),  # TLS
]


@pytest.mark.parametrize("is64", [True, False])
@pytest.mark.parametrize("order", ["<", ">"])
def test_symbol_columns_read_each_field_in_either_byte_order(is64, order):
    if is64:
        table = b"".join(struct.pack(order + "IBBHQQ", n, i, o, s, v, z) for n, i, o, s, v, z in SYMBOLS)
    else:
        table = b"".join(struct.pack(order + "IIIBBH", n, v, z, i, o, s) for n, i, o, s, v, z in SYMBOLS)
    swap = (order == "<") != (struct.pack("=H", 1) == b"\x01\x00")
    columns = _SymbolColumns(table, is64, swap, ())
    read = [
        (columns.names[i], columns.infos[i], columns.sections[i], columns.values[i]) for i in range(len(SYMBOLS))
    ]
    assert read == [(n, i, s, v) for n, i, _, s, v, _ in SYMBOLS]


def _shared_objects() -> List[str]:
    found = []
    for pattern in (
        "/lib/x86_64-linux-gnu/libc.so.6",
        "/lib/x86_64-linux-gnu/libstdc++.so.6",
        "/lib/aarch64-linux-gnu/libc.so.6",
        os.path.join(os.path.dirname(os.__file__), "lib-dynload", "_ssl*.so"),
        os.path.join(os.path.dirname(os.__file__), "lib-dynload", "_decimal*.so"),
    ):
        found += sorted(glob.glob(pattern))[:1]
    return found


def _walk(elf: ElfFile) -> List[Tuple[int, str, int, int, int, Optional[int]]]:
    """(index, name, st_info, st_shndx, st_value, versym) of every dynamic symbol, one struct unpack each."""
    entry = struct.Struct(elf.endian + ("IBBHQQ" if elf.is64 else "IIIBBH"))
    rows = []
    for index in range(elf.symbol_count()):
        fields = entry.unpack_from(elf.data, elf._symtab + index * entry.size)
        name_off, info, shndx, value = (
            (fields[0], fields[1], fields[3], fields[4]) if elf.is64 else (fields[0], fields[3], fields[5], fields[1])
        )
        versym = None
        if DT_VERSYM in elf._dyn:
            versym = struct.unpack_from(elf.endian + "H", elf.data, elf._offset(elf._dyn[DT_VERSYM]) + 2 * index)[0]
        rows.append((index, elf._dynstr(name_off), info, shndx, value, versym))
    return rows


@pytest.mark.parametrize("path", _shared_objects() or [pytest.param("", marks=pytest.mark.skip("no libc"))])
def test_undefined_symbols_match_a_walk_of_the_whole_table(path):
    with open_elf(path) as elf:
        needs = {n.version_index: n for n in elf.version_needs()}
        expected = []
        for index, name, info, shndx, _, versym in _walk(elf):
            if index == 0 or shndx != 0 or not name or info >> 4 == 0:
                continue
            need = needs.get(versym & 0x7FFF) if versym is not None else None
            hidden = bool(versym & VERSYM_HIDDEN) if versym is not None else False
            expected.append((name, info >> 4 == 2, need.name if need else None, hidden))
        got = [(s.name, s.weak, s.version, s.version_hidden) for s in elf.undefined_symbols()]
        assert got == expected and got


@pytest.mark.parametrize("path", _shared_objects() or [pytest.param("", marks=pytest.mark.skip("no libc"))])
def test_every_exported_symbol_is_found_through_the_hash_tables(path):
    """Each defined global symbol is found in its own version; a name the file does not have is not."""
    with open_elf(path) as elf:
        versions = elf.version_definitions()
        exported: Dict[str, List[Optional[str]]] = {}
        for _, name, info, shndx, value, versym in _walk(elf):
            if shndx == 0 or info >> 4 not in (1, 2, 10) or (value == 0 and info & 0xF != 6) or not name:
                continue
            ndx = (versym or 0) & 0x7FFF
            exported.setdefault(name, []).append(versions[ndx][0] if ndx > 1 else None)
        assert exported
        for name, names_versions in exported.items():
            for version in names_versions:
                assert elf.lookup(name, version), (name, version)
            assert not elf.lookup(name + "_npudoctor_absent")
        missing = [n for n in exported if not elf.lookup(n)]
        # Unversioned references bind to the default version; only names with hidden versions alone fail.
        assert all(
            all(v is not None for v in exported[n]) for n in missing
        ), missing


def test_link_report_to_dict_names_every_field(cases):
    """The dict behind ``npudoctor libs --format json`` has every field of the report and of each record,
    on a report with a missing symbol, a shadowed library and a shadowed copy that exports the symbol."""
    env = SearchEnv(f"{cases['old']}:{cases['new']}", None)
    analysis = analyse(str(cases["user"]), env)
    try:
        report = link_report(analysis, lambda p: p, {"x": "y"})
    finally:
        analysis.close()
    assert report.missing_symbols and report.shadowed and report.missing_symbols[0].provided_by
    plain = report.to_dict()
    assert list(plain) == list(LinkReport._fields)
    assert plain["missing_symbols"][0] == {
        "name": "aclrtGetRecentContext",
        "object": str(cases["user"]),
        "demangled": "",
        "version": None,
        "provider": "libascendcl.so",
        "provided_by": str(cases["new"] / "libascendcl.so"),
    }
    assert plain["shadowed"][0]["others"] == (str(cases["new"] / "libascendcl.so"),)
    assert plain["needed"][0] == dict(zip(NeededInfo._fields, report.needed[0]))
