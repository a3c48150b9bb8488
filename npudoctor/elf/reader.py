"""A small, read-only ELF reader for what the dynamic loader looks at: never executes the file.

It reads the ELF header, the program headers (``PT_DYNAMIC`` and ``PT_LOAD`` to map addresses to file
offsets), the dynamic section (``DT_NEEDED``, ``DT_SONAME``, ``DT_RPATH``, ``DT_RUNPATH``, ``DT_FLAGS_1``),
the dynamic symbol table, the GNU and SysV hash tables, and the symbol-version sections (versym, verneed,
verdef). Files are mapped with :mod:`mmap`; symbol lookups go through the hash tables, like ld.so does, so a
library with 75k symbols is never walked just to find one name.
"""

from __future__ import annotations

import array
import mmap
import os
import signal
import stat
import struct
import sys
from itertools import repeat
from operator import add, and_, mul
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

from npudoctor.elf.compiled import compiled_resolver
from npudoctor.errors import InputError

if TYPE_CHECKING:
    from typing import Literal

    # A column of the symbol table: a view in this machine's byte order, or a byte-swapped copy.
    Column = Union[memoryview[int], array.array[int]]

# e_machine values ld.so compares (the names are for messages).
MACHINES = {
    3: "i386",
    8: "mips",
    20: "ppc",
    21: "ppc64",
    40: "arm",
    43: "sparcv9",
    62: "x86-64",
    183: "aarch64",
    243: "riscv",
    258: "loongarch",
}

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ, DT_SONAME, DT_RPATH = 0, 1, 4, 5, 6, 10, 14, 15
DT_RUNPATH, DT_FLAGS_1 = 29, 0x6FFFFFFB
DT_GNU_HASH, DT_VERSYM, DT_VERDEF, DT_VERDEFNUM = 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFC, 0x6FFFFFFD
DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF
DF_1_NODEFLIB = 0x800
SHN_UNDEF = 0
STB_LOCAL, STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 0, 1, 2, 10
# Symbol types ld.so accepts as a definition: NOTYPE, OBJECT, FUNC, COMMON, TLS, GNU_IFUNC.
DEFINABLE_TYPES = frozenset((0, 1, 2, 5, 6, 10))
STT_TLS = 6
BINDABLE = frozenset((STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE))  # bindings a reference can bind to
VERSYM_HIDDEN = 0x8000
VER_FLG_WEAK = 0x2
# For messages about a table a file lacks or holds corrupt.
TABLE_NAMES = {DT_STRTAB: "string table", DT_SYMTAB: "symbol table", DT_VERSYM: "version table"}


class ElfError(InputError):
    """The file is not a readable ELF shared object (truncated, corrupt, not ELF)."""


def string_past_end(path: str, offset: int) -> ElfError:
    """The error for a string whose terminating NUL is not in the file (both resolvers report it so)."""
    return ElfError(f"{path}: string at offset {offset:#x} runs past the end of the file")


def c_string(data: Union[bytes, mmap.mmap], offset: int) -> Optional[str]:
    """The NUL-terminated string at ``offset`` (undecodable bytes kept as surrogates), or None when it does
    not end inside ``data``."""
    if offset < 0 or offset >= len(data):
        return None
    end = data.find(b"\0", offset)
    if end < 0:
        return None
    return data[offset:end].decode("utf-8", errors="surrogateescape")


class VersionNeed(NamedTuple):
    """One ``verneed`` entry: ``name`` (e.g. ``GLIBC_2.34``) required from ``filename``."""

    filename: str
    name: str
    hash: int
    weak: bool
    version_index: int  # vna_other: the value the versym entries of references to it hold


class UndefinedColumns(NamedTuple):
    """The undefined dynamic symbols of one file, a list per field (row i of each is symbol i)."""

    names: List[bytes]
    weak: List[bool]
    versions: List[Optional[str]]  # the version each reference asks for (e.g. GLIBC_2.14), or None
    files: List[Optional[str]]  # the file the link editor found that version in
    hidden: List[bool]


# What the compiled resolver reads of one file (see ElfFile.resolver_layout and _resolver.c).
ResolverLayout = Tuple[
    str,  # path, for messages
    Union[mmap.mmap, bytes],  # the file's data
    bool,  # 64-bit
    int,  # file offset of the dynamic symbol table
    int,  # symbol count
    int,  # file offset of the dynamic string table
    int,  # file offset of the version table, -1 without one
    Optional[Tuple[int, int, int, int, int, int, int]],  # DT_GNU_HASH: see ElfFile._gnu_at
    Optional[Tuple[int, int, int, int]],  # DT_HASH: nbucket, longest chain, file offsets of buckets and chains
    Dict[int, bytes],  # version definitions: index -> name
    Dict[int, Tuple[bytes, str, str]],  # version needs: index -> (name, name, file) (with references only)
]


class UndefinedSymbol(NamedTuple):  # not a frozen dataclass: start-up time (see loader)
    name: str
    weak: bool
    # The version the reference asks for (e.g. GLIBC_2.14) and the file the link editor found it in.
    version: Optional[str] = None
    version_file: Optional[str] = None
    version_hidden: bool = False


# gnu_hash as arithmetic on base-33 numbers: h = 5381 * 33**n + sum(c[i] * 33**(n-1-i)) mod 2**32. Each
# byte c is 33 * high + low with both digits below 33, so the sum is the base-33 number written with the
# low digits plus 33 times the one written with the high digits, and int() parses both in C: about five
# times faster than a Python loop over the characters (names are long mangled C++ names).
_BASE33 = b"0123456789abcdefghijklmnopqrstuvw"
_LOW_DIGITS = bytes(_BASE33[c % 33] for c in range(256))
_HIGH_DIGITS = bytes(_BASE33[c // 33] for c in range(256))
_SEED_POWERS = [5381]  # 5381 * 33**n mod 2**32, grown on demand
# int() refuses longer non-power-of-two-base strings on Python >= 3.11 (sys.int_max_str_digits).
_MAX_PARSED = 4000


def gnu_hash(name: bytes) -> int:
    """The DT_GNU_HASH hash of ``name`` (glibc ``dl_new_hash``: h = h * 33 + c from 5381, 32 bits).

    >>> euro = "\u20ac".encode() * 30  # bytes above 127 too (33 * 7 + 24 = 255)
    >>> gnu_hash(b""), hex(gnu_hash(b"printf")), gnu_hash(euro) == _gnu_hash_loop(euro)
    (5381, '0x156b2bb8', True)
    """
    size = len(name)
    if not size or size > _MAX_PARSED:
        return _gnu_hash_loop(name)
    powers = _SEED_POWERS
    while len(powers) <= size:
        powers.append(powers[-1] * 33 & 0xFFFFFFFF)
    low = int(name.translate(_LOW_DIGITS), 33)
    high = int(name.translate(_HIGH_DIGITS), 33)
    return (powers[size] + low + 33 * high) & 0xFFFFFFFF


def gnu_hashes(names: Sequence[bytes]) -> List[int]:
    """:func:`gnu_hash` of each name, the arithmetic mapped over the whole batch (C loops, no Python frame
    per name): what the loader does for thousands of undefined symbols.

    >>> gnu_hashes([b"printf", b"", b"x" * 5000]) == [gnu_hash(b"printf"), 5381, _gnu_hash_loop(b"x" * 5000)]
    True
    """
    powers = _SEED_POWERS
    longest = max(map(len, names), default=0)
    while len(powers) <= min(longest, _MAX_PARSED):
        powers.append(powers[-1] * 33 & 0xFFFFFFFF)
    if not names or longest > _MAX_PARSED or b"" in names:
        return [gnu_hash(name) for name in names]
    translate, base, mask = bytes.translate, repeat(33), repeat(0xFFFFFFFF)
    lows = map(int, map(translate, names, repeat(_LOW_DIGITS)), base)
    highs = map(int, map(translate, names, repeat(_HIGH_DIGITS)), base)
    seeds = map(powers.__getitem__, map(len, names))
    return list(map(and_, map(add, map(add, seeds, lows), map(mul, highs, base)), mask))


def _gnu_hash_loop(name: bytes) -> int:
    h = 5381
    for c in name:
        h = h * 33 + c  # masked once at the end: faster than masking every step, same result
    return h & 0xFFFFFFFF


def sysv_hash(name: bytes) -> int:
    h = 0
    for c in name:
        h = (h << 4) + c
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


class ElfFile:
    """One ELF file, mapped read-only. Use :func:`open_elf`; call :meth:`close` (or use ``with``).

    A plain class (a handle, never compared or copied): a dataclass of this many fields costs a millisecond
    of start-up."""

    def __init__(
        self,
        path: str,
        data: mmap.mmap | bytes,
        elf_class: int,  # 1 = 32-bit, 2 = 64-bit
        little_endian: bool,
        machine: int,
    ) -> None:
        self.path, self.data = path, data
        self.elf_class, self.little_endian, self.machine = elf_class, little_endian, machine
        self.needed: List[str] = []
        self.soname: Optional[str] = None
        self.rpath: Optional[str] = None
        self.runpath: Optional[str] = None
        self.flags_1 = 0
        self._dyn: Dict[int, int] = {}
        self._loads: List[Tuple[int, int, int]] = []  # (vaddr, offset, filesz)
        self._versions: Optional[Dict[int, Tuple[str, int]]] = None  # verdef index -> (name, hash)
        self._needs: Optional[List[VersionNeed]] = None
        self._version_names: Optional[Set[str]] = None
        # (nbuckets, symoffset, bloom words, shift, buckets, chains), tables as arrays in native byte order.
        self._gnu: Optional[Tuple[int, int, array.array[int], int, array.array[int], Sequence[int]]] = None
        # DT_HASH: (nbucket, longest possible chain, file offsets of the buckets and chains)
        self._sysv: Optional[Tuple[int, int, int, int]] = None
        # (nbuckets, symoffset, bloom words, shift, and the file offsets of the bloom filter, buckets, chains)
        self._gnu_at: Optional[Tuple[int, int, int, int, int, int, int]] = None
        self._views: List[memoryview] = []
        self._table_offsets: Dict[int, int] = {}  # dynamic tag -> file offset of its table
        self._sym_struct: Optional[struct.Struct] = None
        self._symbol_count: Optional[int] = None
        self._columns: Optional[_SymbolColumns] = None

    # -- structure ---------------------------------------------------------------------------------------
    @property
    def is64(self) -> bool:
        return self.elf_class == 2

    def defined_hashes(self) -> Optional[Sequence[int]]:
        """The GNU hash of every defined symbol, as stored in the hash chains (low bit: end of chain), for a
        C-speed "which of these names could this object define" set intersection; None without a GNU hash
        table. A view of the file when its byte order is this machine's (no list of 75k ints built)."""
        if self._gnu is None or not self._gnu[0]:
            return None
        symoffset, chains = self._gnu[1], self._gnu[5]
        count = self.symbol_count() - symoffset
        if count <= 0:
            return []
        if isinstance(chains, memoryview):
            view = chains[:count]
            self._views.append(view)  # released by close(), before the file is unmapped
            return view
        return [chains[i] for i in range(min(count, len(chains)))]

    @property
    def has_versions(self) -> bool:
        return DT_VERDEF in self._dyn

    @property
    def endian(self) -> str:
        return "<" if self.little_endian else ">"

    @property
    def machine_name(self) -> str:
        return MACHINES.get(self.machine, f"machine {self.machine}")

    @property
    def describe_kind(self) -> str:
        return f"ELF{64 if self.is64 else 32} {self.machine_name}"

    @property
    def ident(self) -> Tuple[int, bool, int]:
        """(ELF class, little-endian, machine): what must match for ld.so to load two files together."""
        return self.elf_class, self.little_endian, self.machine

    def compatible_with(self, other: ElfFile) -> bool:
        """Whether ld.so would load this file next to ``other`` (same class, byte order and machine)."""
        return self.ident == other.ident

    def close(self) -> None:
        self._columns = None
        for view in reversed(self._views):  # views made from other views first
            view.release()
        self._views.clear()
        if isinstance(self.data, mmap.mmap):
            self.data.close()

    def __enter__(self) -> ElfFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _offset(self, vaddr: int) -> int:
        for start, offset, size in self._loads:
            if start <= vaddr < start + size:
                at = offset + (vaddr - start)
                if at > len(self.data):  # a segment said to lie past the end of the file
                    break
                return at
        raise ElfError(f"{self.path}: address {vaddr:#x} is outside every loaded segment (corrupt ELF)")

    def _unpack(self, fmt: str, offset: int) -> Tuple[int, ...]:
        try:
            return struct.unpack_from(self.endian + fmt, self.data, offset)
        except (struct.error, OverflowError):
            raise ElfError(f"{self.path}: truncated ELF (needs data at offset {offset:#x})") from None

    def _array(self, code: str, offset: int, count: int) -> array.array[int]:
        """``count`` integers at ``offset`` as an array in native byte order (fast indexing)."""
        values = array.array(code)
        end = offset + count * values.itemsize
        if offset < 0 or end > len(self.data):
            raise ElfError(f"{self.path}: truncated ELF (table at offset {offset:#x} runs past the end)")
        values.frombytes(self.data[offset:end])
        if not self.native_order:
            values.byteswap()
        return values

    def _words(self, offset: int) -> Sequence[int]:
        """32-bit words from ``offset`` to the end of the file, viewed in place (no copy when the file's
        byte order is this machine's)."""
        if offset > len(self.data):
            raise ElfError(f"{self.path}: truncated ELF (table at offset {offset:#x} is past the end)")
        count = (len(self.data) - offset) // 4
        if self.native_order:
            view = memoryview(self.data)[offset : offset + 4 * count].cast("I")
            self._views.append(view)
            return view
        return _SwappedWords(self.data, offset, count)

    def _cstr(self, offset: int) -> str:
        text = c_string(self.data, offset)
        if text is None:
            raise string_past_end(self.path, offset)
        return text

    def _dynstr(self, index: int) -> str:
        return self._cstr(self._strtab + index)

    # -- symbols -----------------------------------------------------------------------------------------
    def _table_at(self, tag: int) -> int:
        """File offset of the table the dynamic entry ``tag`` points at (kept: looked up per symbol)."""
        at = self._table_offsets.get(tag)
        if at is None:
            name = TABLE_NAMES.get(tag, f"table {tag:#x}")
            if tag not in self._dyn:
                raise ElfError(f"{self.path}: corrupt ELF (dynamic section has no {name})")
            try:
                at = self._offset(self._dyn[tag])
            except ElfError:
                raise ElfError(f"{self.path}: corrupt ELF ({name} at address {self._dyn[tag]:#x} is outside every "
                               "loaded segment)") from None
            self._table_offsets[tag] = at
        return at

    @property
    def _strtab(self) -> int:
        return self._table_at(DT_STRTAB)

    @property
    def _symtab(self) -> int:
        return self._table_at(DT_SYMTAB)

    @property
    def _versym(self) -> int:
        """File offset of the version table (DT_VERSYM must be present)."""
        return self._table_at(DT_VERSYM)

    @property
    def _syment(self) -> int:
        return 24 if self.is64 else 16

    def symbol_count(self) -> int:
        """Number of dynamic symbols: from DT_HASH's nchain, else from the GNU hash chains' last entry."""
        if self._symbol_count is None:
            self._symbol_count = self._count_symbols()
        return self._symbol_count

    def _table_symbol_count(self) -> int:
        """:meth:`symbol_count`, or 0 for a file without a dynamic symbol table."""
        return self.symbol_count() if DT_SYMTAB in self._dyn else 0

    def _count_symbols(self) -> int:
        if DT_HASH in self._dyn:
            return self._unpack("I", self._offset(self._dyn[DT_HASH]) + 4)[0]
        if self._gnu is None:
            return 0
        nbuckets, symoffset, _, _, buckets, chains = self._gnu
        compiled = compiled_resolver()
        if not nbuckets:
            top = 0
        elif compiled is not None:  # buckets is an array in this machine's byte order
            top = compiled.largest_word(buckets, 0, len(buckets))
        else:
            top = max(buckets)
        if top < symoffset:
            return symoffset
        while top - symoffset < len(chains):
            if chains[top - symoffset] & 1:
                return top + 1
            top += 1
        raise ElfError(f"{self.path}: corrupt GNU hash table (chain runs past the end)")

    def _symbols(self) -> _SymbolColumns:
        """The first ``symbol_count()`` symbols (as many as the file holds) and their versym entries."""
        if self._columns is None:
            count = self._table_symbol_count()
            entry = self._syment
            start = self._symtab if count else 0
            held = max(0, min(count, (len(self.data) - start) // entry))
            # Views of the mapped file, not copies: a copy costs a page fault per 4 KiB of fresh memory,
            # the mapping one per 16 pages of the file (the kernel maps file pages around a fault).
            table = self._view(start, start + held * entry)
            swap = not self.native_order
            versyms: Column | Tuple[()] = ()
            if DT_VERSYM in self._dyn and count:
                at = self._versym
                held_versyms = max(0, min(count, (len(self.data) - at) // 2))
                versyms = _column(self._view(at, at + 2 * held_versyms), "H", swap)
            self._columns = _SymbolColumns(table, self.is64, swap, versyms)
            self._views += self._columns.views()
        return self._columns

    def _view(self, start: int, end: int) -> memoryview:
        """Bytes ``start:end`` of the file without a copy; released by :meth:`close`."""
        view = memoryview(self.data)[start:end]
        self._views.append(view)
        return view

    def _sym(self, index: int) -> Tuple[int, int, int, int, int]:
        """(st_name, st_info, st_other, st_shndx, st_value) of symbol ``index``, read from the file (for an
        index beyond ``symbol_count()``, which only a corrupt hash table yields)."""
        at = self._symtab + index * self._syment
        if self._sym_struct is None:
            self._sym_struct = struct.Struct(self.endian + ("IBBHQQ" if self.is64 else "IIIBBH"))
        try:
            fields = self._sym_struct.unpack_from(self.data, at)
        except struct.error:
            raise ElfError(
                f"{self.path}: truncated ELF (symbol {index} is past the end of the file)"
            ) from None
        if self.is64:
            return fields[0], fields[1], fields[2], fields[3], fields[4]
        return fields[0], fields[3], fields[4], fields[5], fields[1]

    def _versym_entry(self, index: int) -> Optional[int]:
        """The versym entry of symbol ``index``, read from the file (see :meth:`_sym`)."""
        if DT_VERSYM not in self._dyn:
            return None
        return self._unpack("H", self._versym + 2 * index)[0]

    def version_needs(self) -> List[VersionNeed]:
        """The verneed entries: which version of which file this object was linked against."""
        if self._needs is None:
            self._needs = self._read_version_needs()
        return self._needs

    def _version_needs_by_index(self) -> Dict[int, VersionNeed]:
        """The verneed entries by the index the versym entries of references to them hold."""
        return {need.version_index: need for need in self.version_needs()}

    def _read_version_needs(self) -> List[VersionNeed]:
        if DT_VERNEED not in self._dyn:
            return []
        needs = []
        at = self._offset(self._dyn[DT_VERNEED])
        # Each entry and each aux entry is read once: entries that share or loop are corrupt (work and
        # memory stay bounded by the file's size).
        seen: Set[int] = set()
        for _ in range(self._dyn.get(DT_VERNEEDNUM, 0)):
            _, count, file_off, aux, nxt = self._unpack("HHIII", at)
            filename = self._dynstr(file_off)
            aux_at = at + aux
            for _ in range(count):
                if aux_at in seen:
                    raise ElfError(f"{self.path}: corrupt ELF (version needs: entries share or loop)")
                seen.add(aux_at)
                vhash, flags, other, name_off, aux_next = self._unpack("IHHII", aux_at)
                needs.append(
                    VersionNeed(
                        filename, self._dynstr(name_off), vhash, bool(flags & VER_FLG_WEAK), other & 0x7FFF
                    )
                )
                if not aux_next:
                    break
                aux_at += aux_next
            if not nxt:
                break
            at += nxt
            if at in seen:
                raise ElfError(f"{self.path}: corrupt ELF (version needs: entries share or loop)")
            seen.add(at)
        return needs

    def version_definitions(self) -> Dict[int, Tuple[str, int]]:
        """verdef index -> (version name, hash); index 1 is the file's base version."""
        if self._versions is None:
            self._versions = {}
            if DT_VERDEF in self._dyn:
                at = self._offset(self._dyn[DT_VERDEF])
                # vd_next only moves forward, and a read past the end stops the walk: bounded by the file.
                for _ in range(self._dyn.get(DT_VERDEFNUM, 0)):
                    _, _, ndx, cnt, vhash, aux, nxt = self._unpack("HHHHIII", at)
                    if cnt:
                        name_off = self._unpack("I", at + aux)[0]
                        self._versions[ndx & 0x7FFF] = (self._dynstr(name_off), vhash)
                    if not nxt:
                        break
                    at += nxt
        return self._versions

    def undefined_references(self) -> UndefinedColumns:
        """Every undefined dynamic symbol (what ld.so must resolve) as columns: name (bytes, to be hashed
        next), weak, the version asked for and its file, hidden. :meth:`undefined_symbols` gives records."""
        count = self._reference_count()
        if not count:
            return UndefinedColumns([], [], [], [], [])
        columns = self._symbols()
        versyms = columns.versyms
        needs = self._version_needs_by_index() if versyms else {}
        # Python only visits the undefined entries: the two bytes of every st_shndx are two strided copies
        # of the table, and bytes.find (C) jumps from one zero byte to the next.
        table, entry = columns.table, self._syment
        at = 6 if self.is64 else 14
        first, second = bytes(table[at::entry]), bytes(table[at + 1 :: entry])
        find_zero = first.find
        names, infos = columns.names, columns.infos
        undefined = []
        index = find_zero(0, 1)  # symbol 0 is the reserved null symbol
        while index >= 0:
            if not second[index] and names[index] and infos[index] >> 4 != STB_LOCAL:
                undefined.append(index)
            index = find_zero(0, index + 1)
        # The rest is mapped over the whole batch (C loops): string ends, slices, version lookups.
        data = self.data
        starts = [self._strtab + offset for offset in map(names.__getitem__, undefined)]
        ends = list(map(data.find, repeat(b"\0"), starts))
        if -1 in ends:
            raise string_past_end(self.path, starts[ends.index(-1)])
        strings = list(map(data.__getitem__, map(slice, starts, ends)))
        weak = [info >> 4 == STB_WEAK for info in map(infos.__getitem__, undefined)]
        if not versyms:
            none: List[Optional[str]] = [None] * len(undefined)
            return UndefinedColumns(strings, weak, none, none, [False] * len(undefined))
        raw = list(map(versyms.__getitem__, undefined))
        version_names = {index: need.name for index, need in needs.items()}
        version_files = {index: need.filename for index, need in needs.items()}
        indexes = [value & 0x7FFF for value in raw]
        return UndefinedColumns(
            strings,
            weak,
            list(map(version_names.get, indexes)),
            list(map(version_files.get, indexes)),
            [value >= VERSYM_HIDDEN for value in raw],
        )

    def _reference_count(self) -> int:
        """The number of symbols, once the tables the references are read from are known to be whole."""
        count = self.symbol_count()
        if not count:
            return 0
        if self._symtab + count * self._syment > len(self.data):
            raise ElfError(f"{self.path}: truncated ELF (symbol table runs past the end of the file)")
        if DT_VERSYM in self._dyn and (len(self.data) - self._versym) // 2 < count:
            raise ElfError(f"{self.path}: truncated ELF (version table runs past the end of the file)")
        return count

    @property
    def native_order(self) -> bool:
        """Whether the file's byte order is this machine's (the compiled resolver reads only those)."""
        return self.little_endian == (sys.byteorder == "little")

    def resolver_layout(self, references: bool) -> ResolverLayout:
        """This file as the compiled resolver (``_resolver.c``) reads it: the mapped data and the offsets of
        its tables. With ``references`` (the file's own references are resolved), raises :class:`ElfError`
        where :meth:`undefined_references` would; otherwise a file whose tables cannot be read is laid out as
        defining nothing, which is what :meth:`defines_each` answers for it."""
        verneeds: Dict[int, Tuple[bytes, str, str]] = {}
        if references:
            count = self._reference_count()
            # Read when undefined_references() reads them (with a version table), so errors come alike.
            needs = self._version_needs_by_index() if count and DT_VERSYM in self._dyn else {}
            for index, need in needs.items():
                verneeds[index] = (need.name.encode("utf-8", errors="surrogateescape"), need.name, need.filename)
        try:
            if not references:
                count = self._table_symbol_count()
            symtab = self._symtab if count else 0
            versym = self._versym if DT_VERSYM in self._dyn else -1
            strtab = self._strtab
        except ElfError:
            if references:
                raise
            return (self.path, self.data, self.is64, 0, 0, 0, -1, None, None, {}, {})
        try:
            definitions = self.version_definitions()
        except ElfError:  # no versioned reference can bind here (defines_each fails those lookups)
            definitions = {}
        verdefs = {index: name.encode("utf-8", errors="surrogateescape") for index, (name, _) in definitions.items()}
        tables = (symtab, count, strtab, versym, self._gnu_at, self._sysv)
        return (self.path, self.data, self.is64, *tables, verdefs, verneeds)

    def undefined_symbols(self) -> List[UndefinedSymbol]:
        """Every undefined dynamic symbol with the version it asks for (what ld.so must resolve)."""
        refs = self.undefined_references()
        return [
            UndefinedSymbol(name.decode("utf-8", errors="surrogateescape"), weak, version, version_file, hidden)
            for name, weak, version, version_file, hidden in zip(
                refs.names, refs.weak, refs.versions, refs.files, refs.hidden
            )
        ]

    def _sysv_candidates(self, encoded: bytes, sysv_hashes: Optional[Dict[bytes, int]]) -> List[int]:
        """Symbol indexes on ``encoded``'s DT_HASH chain (for files without DT_GNU_HASH); ``sysv_hashes``
        keeps each name's hash for the next such file."""
        if self._sysv is None:
            return []
        nbucket, longest, buckets_at, chains_at = self._sysv
        if not nbucket:
            return []
        hashed = sysv_hashes.get(encoded) if sysv_hashes is not None else None
        if hashed is None:
            hashed = sysv_hash(encoded)
            if sysv_hashes is not None:
                sysv_hashes[encoded] = hashed
        found: List[int] = []
        visited: Set[int] = set()
        index = self._unpack("I", buckets_at + 4 * (hashed % nbucket))[0]
        while index:
            # A chain visits each symbol at most once (the compiled resolver counts to `longest` instead:
            # the same verdict, as every index is below nchain and readable).
            if index in visited or index >= longest or len(found) >= longest:
                raise ElfError(f"{self.path}: corrupt ELF (SysV hash table: a chain loops or leaves the table)")
            visited.add(index)
            found.append(index)
            index = self._unpack("I", chains_at + 4 * index)[0]
        return found

    def lookup(
        self,
        name: str,
        version: Optional[str] = None,
        version_hidden: bool = False,
    ) -> bool:
        """Whether this file exports ``name`` in a way ld.so would bind a reference to (see
        :meth:`defines_each`)."""
        encoded = name.encode("utf-8", errors="surrogateescape")
        return self.defines_each([(encoded, gnu_hash(encoded), version, version_hidden)])[0]

    def defines_each(
        self,
        queries: Sequence[Tuple[bytes, int, Optional[str], bool]],
        sysv_hashes: Optional[Dict[bytes, int]] = None,
    ) -> List[bool]:
        """For each (encoded name, its :func:`gnu_hash`, version or None, hidden) reference, whether this file
        exports the name in a way ld.so would bind it: rules of glibc's ``check_match`` (a versioned reference
        takes the same version, or an unversioned definition; an unversioned reference takes the base, the
        first or the default version). Candidates come from DT_GNU_HASH (bloom filter, bucket, chain), else
        DT_HASH, never from a walk of the table. A reference whose lookup hits a corrupt part of the file is
        not defined here (ld.so could not bind to it either), and the others are still answered."""
        results = [False] * len(queries)
        gnu, dyn = self._gnu, self._dyn
        if gnu is None and self._sysv is None:
            return results
        try:
            columns = self._symbols()
            strtab = self._strtab
        except ElfError:
            return results
        names, infos, sections, values = columns.names, columns.infos, columns.sections, columns.values
        versyms = columns.versyms if DT_VERSYM in dyn else None
        data = self.data
        if gnu is not None:
            nbuckets, symoffset, bloom, shift, buckets, chains = gnu
            bits, words = 64 if self.is64 else 32, len(bloom)
        definitions: Optional[Dict[int, Tuple[str, int]]] = None
        for position, (encoded, hashed, version, version_hidden) in enumerate(queries):
            try:
                if gnu is None:
                    candidates = self._sysv_candidates(encoded, sysv_hashes)
                else:
                    if not nbuckets:
                        continue
                    word = bloom[(hashed // bits) % words]
                    if not (word >> (hashed % bits)) & (word >> ((hashed >> shift) % bits)) & 1:
                        continue
                    index = buckets[hashed % nbuckets]
                    if index < symoffset:
                        continue
                    candidates = []
                    want = hashed | 1
                    try:
                        while True:
                            chain = chains[index - symoffset]
                            if (chain | 1) == want:
                                candidates.append(index)
                            if chain & 1:
                                break
                            index += 1
                    except IndexError:
                        raise ElfError(f"{self.path}: corrupt GNU hash table (chain runs past the end)") from None
                wanted = encoded + b"\0"
                for index in candidates:
                    try:
                        name_off, info, shndx, value = names[index], infos[index], sections[index], values[index]
                    except IndexError:  # beyond symbol_count(): only a corrupt hash table points there
                        name_off, info, _, shndx, value = self._sym(index)
                    if shndx == SHN_UNDEF or (info & 0xF) not in DEFINABLE_TYPES:
                        continue
                    if value == 0 and (info & 0xF) != STT_TLS:
                        continue
                    if info >> 4 not in BINDABLE:
                        continue
                    at = strtab + name_off
                    if data[at : at + len(wanted)] != wanted:
                        continue
                    if versyms is None:
                        results[position] = True
                        break
                    try:
                        raw = versyms[index]
                    except IndexError:  # beyond symbol_count(), as above
                        raw = self._versym_entry(index) or 0
                    ndx = raw & 0x7FFF
                    if version is not None:
                        if definitions is None:
                            definitions = self.version_definitions()
                        defined = definitions.get(ndx)
                        if (defined is not None and ndx > 1 and defined[0] == version) or (
                            # An unversioned (base/global) definition satisfies a versioned reference.
                            ndx <= 1 and not version_hidden and not raw & VERSYM_HIDDEN
                        ):
                            results[position] = True
                            break
                        continue
                    # glibc accepts the base versions and the first defined version (index 2) even when
                    # hidden, for old binaries; a later version only as the default (non-hidden) one.
                    if ndx <= 2 or not raw & VERSYM_HIDDEN:
                        results[position] = True
                        break
            except ElfError:
                continue
        return results

    def defines_version(self, name: str) -> bool:
        """Whether a verdef entry names ``name`` (what dl-version.c checks for each verneed entry)."""
        if self._version_names is None:
            self._version_names = {defined for defined, _ in self.version_definitions().values()}
        return name in self._version_names


def _column(raw: bytes | memoryview, code: Literal["H", "I", "Q"], swap: bool) -> Column:
    """``raw`` as integers of type ``code``: a view in place, or a byte-swapped copy for the other order."""
    if swap:
        values = array.array(code)
        values.frombytes(raw)
        values.byteswap()
        return values
    return memoryview(raw).cast(code)


class _SymbolColumns:
    """The dynamic symbol table as columns: ``names[i]`` is st_name of symbol i, and so on. Each column is
    a strided view of one copy of the table, so reading a field is plain indexing (no struct unpack)."""

    __slots__ = ("infos", "names", "sections", "table", "values", "versyms")

    def __init__(self, table: bytes | memoryview, is64: bool, swap: bool, versyms: Column | Tuple[()]) -> None:
        self.table = table
        words, halves = _column(table, "I", swap), _column(table, "H", swap)
        if is64:  # Elf64_Sym: st_name u32, st_info u8, st_other u8, st_shndx u16, st_value u64, st_size
            self.names, self.infos, self.sections = words[0::6], table[4::24], halves[3::12]
            self.values = _column(table, "Q", swap)[1::3]
        else:  # Elf32_Sym: st_name, st_value, st_size (u32), st_info u8, st_other u8, st_shndx u16
            self.names, self.values = words[0::4], words[1::4]
            self.infos, self.sections = table[12::16], halves[7::8]
        self.versyms = versyms

    def views(self) -> List[memoryview]:
        """The columns that are views of ``table`` (to release before the file is unmapped)."""
        columns = (self.names, self.infos, self.sections, self.values, self.versyms)
        return [column for column in columns if isinstance(column, memoryview)]


class _SwappedWords(Sequence[int]):
    """Big-endian words on a little-endian machine (or the reverse), read one at a time."""

    def __init__(self, data: mmap.mmap | bytes, offset: int, count: int) -> None:
        self.data, self.offset, self.size = data, offset, count

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:  # type: ignore[override]
        if not 0 <= index < self.size:
            raise IndexError(index)
        return int.from_bytes(
            self.data[self.offset + 4 * index : self.offset + 4 * index + 4],
            "little" if sys.byteorder == "big" else "big",
        )


_FILE_KINDS = ((stat.S_ISDIR, "is a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def open_regular(path: str) -> int:
    """A descriptor to read ``path`` from, for regular files only. Never blocks: a FIFO's open would wait for a
    writer, and /dev/zero never ends. Raises :class:`ElfError` ("is a directory", "not a regular file (a FIFO)")
    or OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return fd
    os.close(fd)
    kind = next((name for test, name in _FILE_KINDS if test(mode)), "a special file")
    raise ElfError(f"{path}: {kind}" if kind == "is a directory" else f"{path}: not a regular file ({kind})")


SIGBUS_MESSAGE = (b"npudoctor: error: a library shrank while npudoctor read it (replaced or truncated during the "
                  b"run); run it again\n")
_sigbus_handler: Any = None


def _exit_on_sigbus() -> None:
    """Reading a mapped page of a file that was truncated after it was mapped raises SIGBUS, which would kill
    the process with a core dump (Python cannot catch it: the faulting read would only run again). Once per
    process, SIGBUS is made a one-line error and exit 2 instead. (The alternative, reading instead of mapping,
    costs copies of every library's tables: NOTES.md.)"""
    global _sigbus_handler
    if _sigbus_handler is not None or not hasattr(signal, "SIGBUS"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        handler_type = ctypes.CFUNCTYPE(None, ctypes.c_int)

        def on_sigbus(_signum: int) -> None:
            os.write(2, SIGBUS_MESSAGE)
            os._exit(2)

        _sigbus_handler = handler_type(on_sigbus)  # kept alive for the life of the process
        libc.signal.restype = ctypes.c_void_p
        libc.signal.argtypes = [ctypes.c_int, handler_type]
        libc.signal(signal.SIGBUS, _sigbus_handler)
    except (OSError, AttributeError):
        _sigbus_handler = False


def open_elf(path: str) -> ElfFile:
    """Map ``path`` read-only and parse what ld.so reads. Raises :class:`ElfError` with a one-line reason."""
    _exit_on_sigbus()
    try:
        fd = open_regular(path)
        with open(fd, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < 16:
                raise ElfError(f"{path}: not an ELF file ({size} bytes)")
            data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except IsADirectoryError:
        raise ElfError(f"{path}: is a directory") from None
    except OSError as exc:
        raise ElfError(f"{path}: {exc.strerror or exc}") from None
    if data[:4] != b"\x7fELF":
        data.close()
        raise ElfError(f"{path}: not an ELF file")
    elf_class, encoding = data[4], data[5]
    if elf_class not in (1, 2) or encoding not in (1, 2):
        data.close()
        raise ElfError(f"{path}: corrupt ELF header (class {elf_class}, data encoding {encoding})")
    elf = ElfFile(path, data, elf_class, encoding == 1, 0)
    try:
        _parse(elf)
    except ElfError:
        elf.close()  # the views taken so far first, then the mapping
        raise
    return elf


def _parse(elf: ElfFile) -> None:
    """Read what ld.so reads into ``elf``: program headers, dynamic section, hash tables."""
    path, data = elf.path, elf.data
    if elf.is64:
        _, elf.machine, _, _, phoff, _, _, _, phentsize, phnum = elf._unpack("HHIQQQIHHH", 16)
    else:
        _, elf.machine, _, _, phoff, _, _, _, phentsize, phnum = elf._unpack("HHIIIIIHHH", 16)
    if phoff + phnum * phentsize > len(data):
        raise ElfError(f"{path}: truncated ELF (program headers run past the end of the file)")
    dynamic = None
    for i in range(phnum):
        at = phoff + i * phentsize
        if elf.is64:
            p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = elf._unpack("IIQQQQQQ", at)
        else:
            p_type, p_offset, p_vaddr, _, p_filesz, _, _, _ = elf._unpack("IIIIIIII", at)
        if p_type == PT_LOAD:
            elf._loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        raise ElfError(f"{path}: not a dynamic object (no PT_DYNAMIC: statically linked, nothing for ld.so to load)")
    offset, size = dynamic
    if offset + size > len(data):
        raise ElfError(f"{path}: truncated ELF (dynamic section runs past the end of the file)")
    entry = 16 if elf.is64 else 8
    needed_offsets: List[int] = []
    strings: Dict[int, int] = {}
    layout = elf.endian + ("qQ" if elf.is64 else "iI")
    for tag, value in struct.iter_unpack(layout, data[offset : offset + size - size % entry]):
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            needed_offsets.append(value)
        elif tag in (DT_SONAME, DT_RPATH, DT_RUNPATH):
            strings[tag] = value
        else:
            elf._dyn[tag] = value
    if DT_STRTAB not in elf._dyn:
        raise ElfError(f"{path}: corrupt ELF (dynamic section has no string table)")
    elf.needed = [elf._dynstr(v) for v in needed_offsets]
    elf.soname = elf._dynstr(strings[DT_SONAME]) if DT_SONAME in strings else None
    elf.rpath = elf._dynstr(strings[DT_RPATH]) if DT_RPATH in strings else None
    elf.runpath = elf._dynstr(strings[DT_RUNPATH]) if DT_RUNPATH in strings else None
    elf.flags_1 = elf._dyn.get(DT_FLAGS_1, 0)
    if DT_GNU_HASH in elf._dyn:
        at = elf._offset(elf._dyn[DT_GNU_HASH])
        nbuckets, symoffset, bloom_size, shift = elf._unpack("IIII", at)
        word = 8 if elf.is64 else 4
        bloom = (
            elf._array("Q" if elf.is64 else "I", at + 16, bloom_size) if bloom_size else array.array("I", [0])
        )
        buckets_at = at + 16 + bloom_size * word
        buckets = elf._array("I", buckets_at, nbuckets)
        chains_at = buckets_at + 4 * nbuckets
        # The chain array has no stored length (it ends with the last bucket's chain): view it in place.
        chains = elf._words(chains_at)
        elf._gnu = (nbuckets, symoffset, bloom, shift, buckets, chains)
        elf._gnu_at = (nbuckets, symoffset, bloom_size, shift, at + 16, buckets_at, chains_at)
    elif DT_HASH in elf._dyn:
        at = elf._offset(elf._dyn[DT_HASH])
        nbucket, nchain = elf._unpack("II", at)
        chains_at = at + 8 + 4 * nbucket
        # A chain holds distinct symbol indexes below nchain whose entries lie in the file: no longer than this.
        longest = max(0, min(nchain, (len(data) - chains_at) // 4))
        elf._sysv = (nbucket, longest, at + 8, chains_at)
    if DT_SYMTAB in elf._dyn:
        elf._symtab  # noqa: B018  (validates the address now, so a corrupt file fails here, not later)
