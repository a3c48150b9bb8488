"""Emulate the dynamic loader (glibc ld.so) statically: which file each DT_NEEDED name loads, and which
undefined symbols stay unresolved. Nothing here executes the analysed files.

Search order for a needed name, as in glibc's ``_dl_map_object``:

1. a name with a ``/`` is opened as it is;
2. an object already loaded under that name (its DT_SONAME or the name it was loaded by) is reused;
3. DT_RPATH of the requesting object, then of the object that loaded it, up to the root (only when the
   requesting object has no DT_RUNPATH);
4. LD_LIBRARY_PATH;
5. DT_RUNPATH of the requesting object;
6. ld.so.cache, then the default directories (both skipped for ``-z nodeflib`` objects).

``$ORIGIN``, ``$LIB`` and ``$PLATFORM`` are expanded; a file of another ELF class or machine is skipped
as ld.so does. Paths are *system* paths: ``local_path`` maps them to where they lie on this machine
(under ``--root``), so a node image can be analysed from another machine.
"""

from __future__ import annotations

import gc
import os
import re
from collections import deque
from contextlib import contextmanager
from itertools import chain, compress, filterfalse
from operator import not_
from types import ModuleType
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple

from npudoctor.elf.compiled import compiled_resolver
from npudoctor.elf.ldcache import LdCache, parse_ld_cache
from npudoctor.elf.reader import (
    DF_1_NODEFLIB,
    ElfError,
    ElfFile,
    gnu_hashes,
    open_elf,
    open_regular,
    string_past_end,
)

LocalPath = Callable[[str], Optional[str]]
# An undefined-symbol reference: (name, version asked for, the file of that version, hidden).
Reference = Tuple[bytes, Optional[str], Optional[str], bool]
# An unresolved one: (index of the referring object, name, version, version file).
MissingRow = Tuple[int, bytes, Optional[str], Optional[str]]
# Records are NamedTuples, and the one mutable record a plain class: each dataclass costs a third of a
# millisecond of start-up, and `npudoctor libs` is timed against `ldd -r` start-up included.

# ld.so.cache is read whole; real ones are well under 1 MiB.
MAX_LD_CACHE_BYTES = 64 * 1024 * 1024
# Multiarch triplets of Debian-style default directories, by e_machine.
TRIPLETS = {62: "x86_64-linux-gnu", 183: "aarch64-linux-gnu", 3: "i386-linux-gnu"}
PLATFORMS = {62: "x86_64", 183: "aarch64", 3: "i686"}


def default_dirs(machine: int, is64: bool) -> Tuple[str, ...]:
    """The directories ld.so searches last (its built-in system path) for this ABI."""
    triplet = TRIPLETS.get(machine)
    multiarch = (f"/lib/{triplet}", f"/usr/lib/{triplet}") if triplet else ()
    if is64:
        return (*multiarch, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
    return (*multiarch, "/lib", "/usr/lib")


class Candidate(NamedTuple):
    """A file named like a needed library in one search directory."""

    path: str
    via: str  # "RPATH of X", "LD_LIBRARY_PATH", "RUNPATH", "ld.so.cache", "default dirs", "path"
    entry: str  # the search entry as written (before $ORIGIN expansion), or the cache key
    real: str = ""  # resolved local path, to tell two names of the same file apart


class Needed:
    """One DT_NEEDED edge and how it resolved (filled in as the search goes)."""

    __slots__ = ("candidates", "entry", "name", "path", "requester", "skipped", "via")

    def __init__(
        self,
        requester: str,
        name: str,
        path: Optional[str] = None,
        via: str = "",
        entry: str = "",
        candidates: Optional[List[Candidate]] = None,
    ) -> None:
        self.requester, self.name, self.path, self.via, self.entry = requester, name, path, via, entry
        # Every compatible file with this name on the search path, winner first (for shadowing).
        self.candidates: List[Candidate] = candidates if candidates is not None else []
        # Files skipped because they are for another ELF class/machine, or could not be read.
        self.skipped: List[Tuple[str, str]] = []

    def __repr__(self) -> str:
        return f"Needed({self.requester!r}, {self.name!r}, path={self.path!r}, via={self.via!r})"


class MissingSymbol(NamedTuple):
    name: str
    object: str  # the object whose reference stays unresolved
    version: Optional[str] = None
    version_file: Optional[str] = None


class MissingVersion(NamedTuple):
    version: str
    file: str
    object: str


class LoadedObject(NamedTuple):
    path: str
    local: str
    elf: ElfFile
    loader: Optional[LoadedObject]
    names: List[str]


class Analysis(NamedTuple):
    root: str
    kind: str
    objects: List[LoadedObject]
    needed: List[Needed]
    missing_symbols: List[MissingSymbol]
    missing_versions: List[MissingVersion]
    errors: List[str]
    ld_library_path: str
    # Paths of the objects in the root's own load graph (all objects unless some were preloaded).
    reachable: List[str]

    @property
    def missing_libraries(self) -> List[Needed]:
        return [n for n in self.needed if n.path is None]

    @property
    def shadowed(self) -> List[Needed]:
        """Needed libraries with more than one distinct file on the search path (the first one wins)."""
        return [n for n in self.needed if len({c.real for c in n.candidates}) > 1]

    def close(self) -> None:
        for obj in self.objects:
            obj.elf.close()


class SearchEnv(NamedTuple):
    """What ld.so reads from the environment: LD_LIBRARY_PATH, the cache, and how to reach files."""

    ld_library_path: str = ""
    cache: Optional[LdCache] = None
    local_path: LocalPath = lambda path: path
    cwd: str = "/"


def load_cache(local_path: LocalPath, path: str = "/etc/ld.so.cache") -> Optional[LdCache]:
    """The node's ld.so.cache, or None when it is absent or unreadable (ld.so then skips it too)."""
    local = local_path(path)
    if local is None:
        return None
    try:
        with open(open_regular(local), "rb") as handle:
            # The real cache is a few hundred KiB; a hostile one (a link to /dev/zero) must not fill memory.
            return LdCache(parse_ld_cache(handle.read(MAX_LD_CACHE_BYTES)))
    except (OSError, ElfError):
        return None


def _read_ident(local: str) -> Optional[Tuple[int, bool, int]]:
    """:attr:`ElfFile.ident` (class, little-endian, machine) of a file, from its first 20 bytes alone, or None
    when it is not a readable ELF file."""
    try:
        with open(open_regular(local), "rb") as handle:
            head = handle.read(20)
    except (OSError, ElfError):
        return None
    if len(head) < 20 or head[:4] != b"\x7fELF":
        return None
    machine = int.from_bytes(head[18:20], "little" if head[5] == 1 else "big")
    return head[4], head[5] == 1, machine


def _expand(entry: str, origin: str, machine: int, is64: bool) -> str:
    lib = "lib64" if is64 else "lib"

    def token(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return {"ORIGIN": origin, "LIB": lib, "PLATFORM": PLATFORMS.get(machine, "")}.get(
            name, match.group(0)
        )

    return re.sub(r"\$(?:\{(\w+)\}|(ORIGIN|LIB|PLATFORM)\b)", token, entry)


def split_path_list(value: str) -> List[str]:
    """Entries of a colon (or semicolon) separated list; an empty entry means the current directory."""
    if not value:
        return []
    return re.split(r"[:;]", value)


class _Resolver:
    def __init__(self, env: SearchEnv, root: LoadedObject) -> None:
        self.env = env
        # The root's ABI decides which files fit, and $ORIGIN in LD_LIBRARY_PATH is the root's directory.
        self.root = root
        self.objects: List[LoadedObject] = []
        self.by_name: Dict[str, LoadedObject] = {}
        self.by_real: Dict[str, LoadedObject] = {}
        self._reals: Dict[str, str] = {}

    def _dir_candidates(self, requester: LoadedObject) -> List[Tuple[str, str, str]]:
        """(directory, via, entry) in ld.so order, $ORIGIN expanded against each object's directory."""
        machine, is64 = self.root.elf.machine, self.root.elf.is64
        dirs: List[Tuple[str, str, str]] = []

        def add(entries: Sequence[str], via: str, origin: str) -> None:
            for entry in entries:
                expanded = _expand(entry, origin, machine, is64) if entry else self.env.cwd
                if not expanded.startswith("/"):
                    expanded = os.path.normpath(os.path.join(self.env.cwd, expanded))
                dirs.append((expanded, via, entry))

        if requester.elf.runpath is None:
            chain: Optional[LoadedObject] = requester
            while chain is not None:
                if chain.elf.rpath is not None and chain.elf.runpath is None:
                    add(
                        split_path_list(chain.elf.rpath),
                        f"RPATH of {os.path.basename(chain.path)}",
                        os.path.dirname(chain.path),
                    )
                chain = chain.loader
        add(split_path_list(self.env.ld_library_path), "LD_LIBRARY_PATH", os.path.dirname(self.root.path))
        if requester.elf.runpath is not None:
            add(
                split_path_list(requester.elf.runpath),
                f"RUNPATH of {os.path.basename(requester.path)}",
                os.path.dirname(requester.path),
            )
        return dirs

    def _try(self, path: str, via: str, entry: str, need: Needed) -> Optional[Candidate]:
        local = self.env.local_path(path)
        if local is None or not os.path.isfile(local):
            return None
        ident = _read_ident(local)
        if ident is None:
            need.skipped.append((path, "not a readable ELF file"))
            return None
        if ident != self.root.elf.ident:
            need.skipped.append((path, "wrong ELF class or machine"))
            return None
        return Candidate(path, via, entry, self.realpath(local))

    def realpath(self, local: str) -> str:
        """``os.path.realpath(local)``, resolving each directory once: every needed name is looked for
        in the same few directories, and realpath costs an lstat per path component."""
        real = self._reals.get(local)
        if real is None:
            directory, name = os.path.split(local)
            real_dir = self._reals.get(directory)
            if real_dir is None:
                real_dir = self._reals[directory] = os.path.realpath(directory)
            real = os.path.join(real_dir, name)
            if name in ("", ".", "..") or os.path.islink(real):
                real = os.path.realpath(real)
            self._reals[local] = real
        return real

    def search(self, requester: LoadedObject, name: str) -> Needed:
        need = Needed(requester.path, name)
        if "/" in name:
            path = name if name.startswith("/") else os.path.normpath(os.path.join(self.env.cwd, name))
            found = self._try(path, "path", name, need)
            if found:
                need.candidates.append(found)
            return self._finish(need)
        seen_dirs = set()
        for directory, via, entry in self._dir_candidates(requester):
            if directory in seen_dirs:
                continue
            seen_dirs.add(directory)
            found = self._try(os.path.join(directory, name), via, entry, need)
            if found:
                need.candidates.append(found)
        root = self.root.elf
        if not requester.elf.flags_1 & DF_1_NODEFLIB:
            cached = self.env.cache.lookup(name, root.machine, root.is64) if self.env.cache else None
            if cached:
                found = self._try(cached, "ld.so.cache", name, need)
                if found:
                    need.candidates.append(found)
            for directory in default_dirs(root.machine, root.is64):
                if directory in seen_dirs:
                    continue
                seen_dirs.add(directory)
                found = self._try(os.path.join(directory, name), "default dirs", directory, need)
                if found:
                    need.candidates.append(found)
        return self._finish(need)

    def _finish(self, need: Needed) -> Needed:
        if need.candidates:
            winner = need.candidates[0]
            need.path, need.via, need.entry = winner.path, winner.via, winner.entry
        return need


def analyse(root_path: str, env: SearchEnv, preload: Sequence[str] = ()) -> Analysis:
    """Resolve the load graph of ``root_path`` (a system path) and every undefined symbol in it.

    ``preload`` names objects already in the process before the root is loaded (the Python interpreter,
    torch's ``_C`` extension before torch_npu's): their dependencies are reused by name and their symbols
    are in scope, as when ``import torch_npu`` runs after ``import torch``. Missing libraries and symbols
    are reported for the root's own load graph only.

    Raises :class:`ElfError` when the root itself is not a readable ELF file. Problems with dependencies
    (corrupt, unreadable) are collected in ``errors`` and the analysis continues, as ld.so would skip them.
    """
    with _cyclic_gc_paused():
        return _analyse(root_path, env, preload)


def _analyse(root_path: str, env: SearchEnv, preload: Sequence[str]) -> Analysis:
    local = env.local_path(root_path)
    if local is None:
        raise ElfError(f"{root_path}: binary analysis needs the live node")
    root_elf = open_elf(local)
    root = LoadedObject(root_path, local, root_elf, None, [os.path.basename(root_path)])
    resolver = _Resolver(env, root)
    needed: List[Needed] = []
    errors: List[str] = []
    for path in preload:
        pre_local = env.local_path(path)
        if pre_local is None or not os.path.isfile(pre_local):
            errors.append(f"{path}: preloaded object not found")
            continue
        try:
            pre_elf = open_elf(pre_local)
        except ElfError as exc:
            errors.append(str(exc))
            continue
        if not pre_elf.compatible_with(root_elf):
            errors.append(f"{path}: {pre_elf.describe_kind}, not {root_elf.describe_kind}; not preloaded")
            pre_elf.close()
            continue
        pre = LoadedObject(path, pre_local, pre_elf, None, [os.path.basename(path)])
        if _add(resolver, pre, resolver.realpath(pre_local), os.path.basename(path)):
            _load_tree(resolver, pre, [], errors)
    _add(resolver, root, resolver.realpath(local), os.path.basename(root_path))
    reachable = _load_tree(resolver, root, needed, errors)
    missing_versions = [v for v in _check_versions(resolver) if v.object in reachable]
    missing_symbols = _resolve_symbols(resolver.objects, errors, reachable, root)
    analysis = Analysis(
        root_path,
        root_elf.describe_kind,
        resolver.objects,
        needed,
        missing_symbols,
        missing_versions,
        errors,
        env.ld_library_path,
        reachable,
    )
    return analysis


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """The analysis allocates some 100k short-lived tuples, bytes and ints and no reference cycle: the cyclic
    collector would run hundreds of times for nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _add(resolver: _Resolver, obj: LoadedObject, real: str, name: str) -> bool:
    if real in resolver.by_real:
        return False
    resolver.objects.append(obj)
    resolver.by_real[real] = obj
    resolver.by_name.setdefault(name, obj)
    if obj.elf.soname:
        resolver.by_name.setdefault(obj.elf.soname, obj)
    return True


def _load_tree(
    resolver: _Resolver, start: LoadedObject, needed: List[Needed], errors: List[str]
) -> List[str]:
    """Load ``start``'s dependencies breadth first, like _dl_map_object_deps (this order is also the
    symbol lookup scope). Returns the paths of every object in ``start``'s graph, reused ones included."""
    env = resolver.env
    reachable = [start.path]
    queue = deque([start])

    def reuse(known: LoadedObject) -> None:
        if known.path not in reachable:
            reachable.append(known.path)
            queue.append(known)

    while queue:
        obj = queue.popleft()
        for name in obj.elf.needed:
            if name in resolver.by_name:
                known = resolver.by_name[name]
                needed.append(
                    Needed(
                        obj.path,
                        name,
                        known.path,
                        "already loaded",
                        "",
                        [Candidate(known.path, "already loaded", "", resolver.realpath(known.local))],
                    )
                )
                reuse(known)
                continue
            need = resolver.search(obj, name)
            needed.append(need)
            if need.path is None:
                continue
            real = need.candidates[0].real
            if real in resolver.by_real:
                known = resolver.by_real[real]
                resolver.by_name[name] = known
                reuse(known)
                continue
            dep_local = env.local_path(need.path) or need.path
            try:
                dep_elf = open_elf(dep_local)
            except ElfError as exc:
                errors.append(str(exc))
                need.path = None
                continue
            dep = LoadedObject(need.path, dep_local, dep_elf, obj, [name])
            _add(resolver, dep, real, name)  # registers it under `name`, absent until now
            reachable.append(dep.path)
            queue.append(dep)
    return reachable


def _check_versions(resolver: _Resolver) -> List[MissingVersion]:
    """Each verneed (version V from file F) against F's verdefs, as dl-version.c does at load time."""
    missing = []
    for obj in resolver.objects:
        try:
            needs = obj.elf.version_needs()
        except ElfError:
            continue
        for need in needs:
            provider = resolver.by_name.get(need.filename)
            if provider is None or need.weak:
                continue
            # A provider without version definitions is accepted (dl-version.c only warns, verbosely).
            if provider.elf.has_versions and not provider.elf.defines_version(need.name):
                missing.append(MissingVersion(need.name, need.filename, obj.path))
    return missing


def _resolve_symbols(
    objects: List[LoadedObject], errors: List[str], report: Sequence[str], root: LoadedObject
) -> List[MissingSymbol]:
    """Every non-weak undefined symbol of the objects in ``report``, looked up in the scope of every
    loaded object in load order. Raises :class:`ElfError` when the root's own tables are corrupt: then there
    is nothing to report about it (a dependency's are listed in ``errors``)."""
    wanted = set(report)
    referrers = [i for i, obj in enumerate(objects) if obj.path in wanted]
    compiled = compiled_resolver()
    if compiled is not None and all(obj.elf.native_order for obj in objects):
        missing, part_errors = _resolve_compiled(compiled, objects, referrers)
    else:
        missing, part_errors = _resolve_python(objects, referrers)
    for index, message in part_errors:
        if objects[index] is root:
            raise ElfError(message)
    errors += [message for _, message in part_errors]
    return [
        MissingSymbol(name.decode("utf-8", errors="surrogateescape"), objects[index].path, version, file)
        for index, name, version, file in missing
    ]


def _resolve_compiled(
    resolver: ModuleType, objects: List[LoadedObject], referrers: List[int]
) -> Tuple[List[MissingRow], List[Tuple[int, str]]]:
    """What :func:`_resolve_python` answers, from the compiled resolver (all objects in this machine's byte
    order)."""
    errors: List[Tuple[int, str]] = []
    wanted = set(referrers)
    layouts = []
    readable = []
    for index, obj in enumerate(objects):
        if index in wanted:
            try:
                layouts.append(obj.elf.resolver_layout(references=True))
                readable.append(index)
                continue
            except ElfError as exc:
                errors.append((index, str(exc)))
        layouts.append(obj.elf.resolver_layout(references=False))
    rows, unreadable = resolver.unresolved(layouts, readable)
    for index, offset in unreadable:
        errors.append((index, str(string_past_end(objects[index].path, offset))))
    return rows, errors


def _resolve_python(
    objects: List[LoadedObject], part: List[int]
) -> Tuple[List[MissingRow], List[Tuple[int, str]]]:
    """(object index, name, version, version file) of each unresolved strong reference of the objects in
    ``part`` (indexes into ``objects``, the lookup scope), and the errors met (object index, message)."""
    errors: List[Tuple[int, str]] = []
    # A reference is (name, version, version file, hidden); each distinct one is looked up once, however
    # many objects make it. Per-reference work is mapped over whole columns (C loops).
    references: List[Tuple[int, List[Reference]]] = []
    for index in part:
        try:
            undefined = objects[index].elf.undefined_references()
        except ElfError as exc:
            errors.append((index, str(exc)))
            continue
        rows = zip(undefined.names, undefined.versions, undefined.files, undefined.hidden)
        references.append((index, list(compress(rows, map(not_, undefined.weak)))))
    distinct = list(dict.fromkeys(chain.from_iterable(refs for _, refs in references)))
    found = _find_definitions(distinct, [o.elf for o in objects])
    missing = [
        (index, name, version, file)
        for index, refs in references
        for name, version, file, _ in filterfalse(found.__contains__, refs)
    ]
    return missing, errors


def _find_definitions(references: List[Reference], scope: List[ElfFile]) -> Set[Reference]:
    """The references some object in ``scope`` defines, object by object: only the names whose hash is
    among the object's defined-symbol hashes (one C-level set intersection) are looked up in its table."""
    names = [ref[0] for ref in references]
    hashes = gnu_hashes(names)
    # A GNU hash chain stores each defined symbol's hash with the low bit marking the chain's end, so a
    # name may sit there as h | 1 or h & ~1: both are looked for, and grouped by h | 1.
    by_odd: Dict[int, List[int]] = {}
    for position, hashed in enumerate(hashes):
        by_odd.setdefault(hashed | 1, []).append(position)
    variants = set(by_odd)
    variants.update([odd ^ 1 for odd in by_odd])
    found = [False] * len(references)
    sysv_hashes: Dict[bytes, int] = {}  # each name hashed once for all the files with only DT_HASH
    for elf in scope:
        try:
            values = elf.defined_hashes()
        except ElfError:  # a corrupt hash table: ld.so could bind nothing here
            continue
        if values is None:  # no GNU hash table (SysV DT_HASH only): every unresolved name is looked up
            pending = [i for i, done in enumerate(found) if not done]
        else:
            pending = [i for value in variants.intersection(values) for i in by_odd[value | 1] if not found[i]]
        if not pending:
            continue
        queries = [(names[i], hashes[i], references[i][1], references[i][3]) for i in pending]
        for position, defined in zip(pending, elf.defines_each(queries, sysv_hashes)):
            if defined:
                found[position] = True
    return set(compress(references, found))
