"""Read ``/etc/ld.so.cache``: the new ``glibc-ld.so.cache1.1`` format and the old ``ld.so-1.7.0`` one.

The cache maps a library name (``libc.so.6``) to a path, with flags saying which ABI the entry is for, so
that an aarch64 library is never handed to an x86-64 process. ld.so consults it after LD_LIBRARY_PATH and
DT_RUNPATH, before the default directories.
"""

from __future__ import annotations

import struct
from typing import Dict, List, NamedTuple, Optional

from npudoctor.elf.reader import ElfError, c_string

OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
FLAG_ELF_LIBC6 = 0x0003
FLAG_TYPE_MASK = 0x00FF
# The "required" flags ld.so expects for a 64-bit process of each machine (glibc sysdeps dl-cache.h).
REQUIRED_FLAGS = {62: 0x0300, 183: 0x0A00, 21: 0x0500, 43: 0x0100, 243: 0x1000, 258: 0x1200}


class CacheEntry(NamedTuple):  # not a frozen dataclass: start-up time (see loader)
    name: str
    path: str
    flags: int
    hwcap: int = 0


def _cstr(data: bytes, offset: int) -> str:
    text = c_string(data, offset)
    if text is None:
        raise ElfError(f"ld.so.cache: string offset {offset:#x} is outside the file (corrupt cache)")
    return text


def parse_ld_cache(data: bytes) -> List[CacheEntry]:
    """Entries of an ld.so.cache image, in file order (ld.so takes the first that fits).

    >>> parse_ld_cache(b"not a cache")
    Traceback (most recent call last):
    ...
    npudoctor.elf.reader.ElfError: ld.so.cache: unknown format (magic b'not a cache')
    """
    try:
        if data.startswith(NEW_MAGIC):
            return _parse_new(data, 0)
        if data.startswith(OLD_MAGIC):
            (count,) = struct.unpack_from("<I", data, 12)
            entries_end = 16 + count * 12
            # A "compat" cache carries the new format after the old entries (aligned to 8 bytes).
            new_at = (entries_end + 7) & ~7
            if data[new_at : new_at + len(NEW_MAGIC)] == NEW_MAGIC:
                return _parse_new(data, new_at)
            entries = []
            for i in range(count):
                flags, key, value = struct.unpack_from("<iII", data, 16 + i * 12)
                entries.append(
                    CacheEntry(_cstr(data, entries_end + key), _cstr(data, entries_end + value), flags)
                )
            return entries
    except (struct.error, IndexError):
        raise ElfError("ld.so.cache: truncated file") from None
    raise ElfError(f"ld.so.cache: unknown format (magic {bytes(data[:11])!r})")


def _parse_new(data: bytes, base: int) -> List[CacheEntry]:
    # glibc writes the cache in host byte order; the header flags byte says which (2 little, 3 big).
    endian = ">" if data[base + 28] & 3 == 3 else "<"
    count, _ = struct.unpack_from(endian + "II", data, base + 20)
    entries = []
    for i in range(count):
        flags, key, value, _, hwcap = struct.unpack_from(endian + "iIIIQ", data, base + 48 + i * 24)
        # String offsets are relative to the start of the new header.
        entries.append(CacheEntry(_cstr(data, base + key), _cstr(data, base + value), flags, hwcap))
    return entries


class LdCache:
    """Name -> path lookups for one ABI; the first matching entry wins (glibc ``_dl_load_cache_lookup``)."""

    def __init__(self, entries: List[CacheEntry]) -> None:
        self.entries = entries
        self._by_name: Dict[str, List[CacheEntry]] = {}
        for entry in entries:
            self._by_name.setdefault(entry.name, []).append(entry)

    def lookup(self, name: str, machine: int, is64: bool) -> Optional[str]:
        required = REQUIRED_FLAGS.get(machine, 0) if is64 else 0
        for entry in self._by_name.get(name, []):
            if entry.flags & FLAG_TYPE_MASK != FLAG_ELF_LIBC6 and entry.flags & FLAG_TYPE_MASK != 1:
                continue
            if entry.flags & ~FLAG_TYPE_MASK != required:
                continue
            # glibc-hwcaps subdirectory entries need a CPU check ld.so does at run time; the plain entry
            # is always valid, so prefer it.
            if entry.hwcap and any(
                not e.hwcap for e in self._by_name[name] if e.flags & ~FLAG_TYPE_MASK == required
            ):
                continue
            return entry.path
        return None
