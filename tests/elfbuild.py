"""Tiny ELF shared objects written byte by byte, for hostile cases no compiler emits (a hash chain that loops,
version needs that share one aux chain, a symbol table the dynamic section forgets). Constructed, not real:
64-bit little-endian x86-64, one PT_LOAD mapping the whole file at address 0, so an address is its offset.
"""

from __future__ import annotations

import struct
from typing import Dict, List, Optional, Sequence, Tuple

DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB = 1, 4, 5, 6
DT_VERSYM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFF0, 0x6FFFFFFE, 0x6FFFFFFF
PT_LOAD, PT_DYNAMIC = 1, 2
STB_GLOBAL, STT_FUNC = 1, 2


def sysv_hash(name: bytes) -> int:
    h = 0
    for c in name:
        h = (h << 4) + c
        g = h & 0xF0000000
        if g:
            h ^= g >> 24
        h &= ~g & 0xFFFFFFFF
    return h


class Strings:
    def __init__(self) -> None:
        self.data = bytearray(b"\0")
        self.offsets: Dict[bytes, int] = {}

    def add(self, text: bytes) -> int:
        if text not in self.offsets:
            self.offsets[text] = len(self.data)
            self.data += text + b"\0"
        return self.offsets[text]


def build_so(
    defined: Sequence[str] = (),
    undefined: Sequence[str] = (),
    needed: Sequence[str] = (),
    soname: Optional[str] = None,
    dynamic: bool = True,
    drop_tags: Sequence[int] = (),
    tag_values: Optional[Dict[int, int]] = None,
    sysv_loop: bool = False,
    shared_verneed: Tuple[int, int] = (0, 0),
) -> bytes:
    """A shared object defining ``defined`` and referencing ``undefined`` (all GLOBAL FUNC), with a SysV hash
    table. Hostile options:

    - ``dynamic=False``: no PT_DYNAMIC (what a static binary looks like to ld.so);
    - ``drop_tags`` / ``tag_values``: dynamic entries left out, or given other values;
    - ``sysv_loop``: every hash chain ends in a symbol whose chain entry points at itself;
    - ``shared_verneed=(entries, aux)``: a version table and ``entries`` verneed entries that all point at one
      chain of ``aux`` aux entries (each reference asks for that chain's first version).
    """
    strings = Strings()
    needed_offsets = [strings.add(n.encode()) for n in needed]
    soname_offset = strings.add(soname.encode()) if soname else None
    symbols: List[Tuple[int, bool]] = [(strings.add(n.encode()), True) for n in defined]
    symbols += [(strings.add(n.encode()), False) for n in undefined]
    names = [*defined, *undefined]
    entries, aux_count = shared_verneed
    version_file = strings.add(b"libversioned.so") if entries else 0
    version_name = strings.add(b"VERS_1") if entries else 0

    header_size, phdr_size = 64, 56 * 2
    blob = bytearray(header_size + phdr_size)

    def place(data: bytes, align: int = 8) -> int:
        while len(blob) % align:
            blob.append(0)
        at = len(blob)
        blob.extend(data)
        return at

    strtab = place(bytes(strings.data), 1)
    # Symbol 0 is the null symbol; defined ones get a value inside the file (a value of 0 never binds).
    table = bytearray(24)
    for name_off, is_defined in symbols:
        info = STB_GLOBAL << 4 | STT_FUNC
        table += struct.pack("<IBBHQQ", name_off, info, 0, 1 if is_defined else 0, 0x40 if is_defined else 0, 0)
    symtab = place(bytes(table))
    count = len(symbols) + 1
    nbucket = 3
    buckets, chains = [0] * nbucket, [0] * count
    for index in range(count - 1, 0, -1):  # chains in index order, as a linker writes them
        bucket = sysv_hash(names[index - 1].encode()) % nbucket
        chains[index], buckets[bucket] = buckets[bucket], index
    if sysv_loop:
        for index in range(1, count):
            if chains[index] == 0:
                chains[index] = index
    hash_at = place(struct.pack(f"<II{nbucket}I{count}I", nbucket, count, *buckets, *chains))
    dyn: List[Tuple[int, int]] = [(DT_NEEDED, off) for off in needed_offsets]
    if soname_offset is not None:
        dyn.append((14, soname_offset))
    dyn += [(DT_HASH, hash_at), (DT_STRTAB, strtab), (DT_SYMTAB, symtab), (10, len(strings.data)), (11, 24)]
    if entries:
        versym = place(struct.pack(f"<{count}H", 0, *([1] * len(defined)), *([2] * len(undefined))))
        # The verneed entries first (vn_aux is an unsigned offset forward), then the one aux chain they share:
        # aux_count entries of 16 bytes, each pointing at the next.
        verneed_at = len(blob) + (-len(blob)) % 8
        aux_at = verneed_at + 16 * entries
        table = bytearray()
        for i in range(entries):
            at = verneed_at + 16 * i
            table += struct.pack("<HHIII", 1, aux_count, version_file, aux_at - at, 16 if i + 1 < entries else 0)
        place(bytes(table))
        aux = bytearray()
        for i in range(aux_count):
            nxt = 16 if i + 1 < aux_count else 0
            aux += struct.pack("<IHHII", sysv_hash(b"VERS_1"), 0, (2 + i) & 0x7FFF, version_name, nxt)
        place(bytes(aux))
        dyn += [(DT_VERSYM, versym), (DT_VERNEED, verneed_at), (DT_VERNEEDNUM, entries)]
    dyn = [(tag, (tag_values or {}).get(tag, value)) for tag, value in dyn if tag not in drop_tags]
    dyn_data = b"".join(struct.pack("<qQ", tag, value) for tag, value in [*dyn, (0, 0)])
    dyn_at = place(dyn_data)
    size = len(blob)
    struct.pack_into("<4sBBBB8xHHIQQQIHHHHHH", blob, 0, b"\x7fELF", 2, 1, 1, 0, 3, 62, 1, 0, header_size, 0, 0,
                     header_size, 56, 2, 64, 0, 0)
    struct.pack_into("<IIQQQQQQ", blob, header_size, PT_LOAD, 5, 0, 0, 0, size, size, 0x1000)
    # PT_NULL in place of PT_DYNAMIC for a "static" file: nothing for ld.so to read.
    struct.pack_into("<IIQQQQQQ", blob, header_size + 56, PT_DYNAMIC if dynamic else 0, 6, dyn_at, dyn_at, dyn_at,
                     len(dyn_data), len(dyn_data), 8)
    return bytes(blob)
