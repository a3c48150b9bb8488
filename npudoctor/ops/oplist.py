"""The operator list of a torch_npu release, read from the release itself, never by importing torch_npu.

Every torch_npu wheel ships ``torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml``: the operators its code
generator registered NPU kernels for (``supported``, ``symint``, ``quant``: aten overloads; ``custom``: torch_npu's
own ``npu::`` operators; ``autograd``: operators with an NPU autograd kernel). An aten operator outside it reaches
torch_npu's boxed CPU fallback (``npu_cpu_fallback``: "will fall back to run on the CPU") unless a composite kernel
of torch itself decomposes it first. This module reads that file from four places:

- an installed torch_npu (``location``: its site-packages folder, as the versions probe found it), through the
  runner, so ``--root DIR`` and replayed bundles work;
- a wheel file (``--torch-npu torch_npu-2.14.0-...whl``) or a folder (a site-packages, an extracted wheel, or
  the ``torch_npu`` package folder itself);
- the lists shipped as data (``checks/torch_npu_ops/<release>.yaml``), one per release of the compatibility
  matrix that pip can download, each naming its source wheel and its sha256 (``render_shipped`` writes them).

Torch-free and pure apart from the file reads; the YAML goes through the one loader (``knowledge.load_yaml_text``:
size, depth and alias limits).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import zipfile
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

from npudoctor import knowledge
from npudoctor.errors import InputError

SCHEMA = "npudoctor.torch_npu_ops/1"
CODEGEN_MEMBER = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
# Sections holding operators torch_npu registers a kernel for, and the namespace their names live in.
SECTIONS: Tuple[Tuple[str, str], ...] = (
    ("supported", "aten"), ("symint", "aten"), ("quant", "aten"), ("autograd", "aten"), ("custom", "npu"))
SHIPPED_FOLDER = "torch_npu_ops"
# The 2.14.0 file is 250 KB; a file 16 times larger is no operator list.
MAX_LIST_BYTES = knowledge.MAX_YAML_BYTES
_RELEASE = re.compile(r"^[0-9][0-9A-Za-z.+]{0,40}$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?$")


class OpListError(InputError):
    """The operator list cannot be read (one line naming the source)."""


class OpList(NamedTuple):
    """The operators one torch_npu release runs on the NPU, and where that knowledge came from."""

    release: Optional[str]       # the torch_npu version, when the source says it
    kind: str                    # "installed", "wheel", "folder" or "shipped"
    source: str                  # the file or folder read (for a shipped list: its data file)
    operators: FrozenSet[str]    # names as torch prints them: "aten::add.Tensor", "aten::clone", "npu::npu_rotary_mul"
    sections: Dict[str, int]     # operators per section of the file, for the record
    wheel: Optional[str] = None  # the wheel the list was read from (shipped lists: the wheel they were made from)
    sha256: Optional[str] = None

    def describe(self) -> str:
        """How to name the list to a person: ``torch_npu 2.14.0 (shipped list, from torch_npu-2.14.0-...whl)``."""
        release = f"torch_npu {self.release}" if self.release else "torch_npu (release unknown)"
        where = {"installed": f"installed at {self.source}", "wheel": f"wheel {self.source}",
                 "folder": f"folder {self.source}"}.get(self.kind, "shipped list")
        return f"{release} ({where})"

    def to_dict(self) -> Dict[str, Any]:
        return {"release": self.release, "kind": self.kind, "source": self.source, "wheel": self.wheel,
                "sha256": self.sha256, "operators": len(self.operators), "sections": dict(self.sections)}


def _entry_name(entry: Any, source: str, section: str) -> str:
    """``add.Tensor`` from ``add.Tensor``, ``{func: add.Tensor}`` or ``{func: "add.Tensor(Tensor self) -> ..."}``."""
    func = entry.get("func") if isinstance(entry, dict) else entry
    if not isinstance(func, str):
        raise OpListError(f"{source}: an entry of {section!r} names no operator ({type(func).__name__})")
    name = func.split("(", 1)[0].strip()
    if not _NAME.match(name):
        raise OpListError(f"{source}: {section!r} holds {name[:60]!r}, not an operator name")
    return name


def parse_codegen_yaml(text: str, source: str) -> Dict[str, List[str]]:
    """The operator names per section of an ``npu_native_functions_by_codegen.yaml`` text.

    >>> parse_codegen_yaml("backend: NPU\\nsupported:\\n  - add.Tensor\\n  - func: clone\\n"
    ...                    "custom:\\n  - func: npu_rotary_mul(Tensor self) -> Tensor\\n", "f.yaml")
    {'supported': ['add.Tensor', 'clone'], 'custom': ['npu_rotary_mul']}
    """
    try:
        data = knowledge.load_yaml_text(text, source)
    except knowledge.KnowledgeError as exc:
        raise OpListError(str(exc)) from None
    if not isinstance(data, dict):
        raise OpListError(f"{source}: not a torch_npu operator list (a {type(data).__name__}, not a mapping)")
    sections: Dict[str, List[str]] = {}
    for section, _namespace in SECTIONS:
        entries = data.get(section)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise OpListError(f"{source}: {section!r} is a {type(entries).__name__}, not a list")
        sections[section] = [_entry_name(entry, source, section) for entry in entries]
    if not sections.get("supported"):
        raise OpListError(f"{source}: not a torch_npu operator list (no 'supported' operators)")
    return sections


def qualified_names(sections: Dict[str, List[str]]) -> FrozenSet[str]:
    """``{'supported': ['add.Tensor']}`` -> ``{'aten::add.Tensor'}``; ``custom`` names are ``npu::``."""
    namespaces = dict(SECTIONS)
    return frozenset(f"{namespaces[section]}::{name}" for section, names in sections.items() for name in names)


def _build(sections: Dict[str, List[str]], release: Optional[str], kind: str, source: str,
           wheel: Optional[str] = None, sha256: Optional[str] = None) -> OpList:
    return OpList(release, kind, source, qualified_names(sections),
                  {name: len(values) for name, values in sections.items()}, wheel, sha256)


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OpListError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


# --- a wheel file -----------------------------------------------------------------------------------------------

def _regular_file(path: str, what: str) -> os.stat_result:
    try:
        info = os.stat(path)
    except OSError as exc:
        raise OpListError(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise OpListError(f"{path}: not a regular file; a {what} is expected")
    return info


def wheel_release(filename: str) -> Optional[str]:
    """``torch_npu-2.1.0.post10-cp310-...whl`` -> ``2.1.0.post10`` (the wheel name's version field)."""
    match = re.match(r"^torch_npu-([0-9][^-]*)-", os.path.basename(filename))
    return match.group(1) if match else None


def read_wheel(path: str) -> Tuple[OpList, bytes]:
    """The list in a torch_npu wheel, and the member's bytes (for :func:`render_shipped`)."""
    _regular_file(path, "torch_npu wheel")
    try:
        with zipfile.ZipFile(path) as archive:
            try:
                member = archive.getinfo(CODEGEN_MEMBER)
            except KeyError:
                raise OpListError(f"{path}: not a torch_npu wheel (it has no {CODEGEN_MEMBER})") from None
            if member.file_size > MAX_LIST_BYTES:
                raise OpListError(f"{path}: {CODEGEN_MEMBER} says {member.file_size} bytes; more than "
                                  f"{MAX_LIST_BYTES} is no operator list; refused")
            with archive.open(member) as handle:
                data = handle.read(MAX_LIST_BYTES + 1)  # the header's size may lie: never read past the cap
    except zipfile.BadZipFile:
        raise OpListError(f"{path}: not a wheel (not a zip archive)") from None
    except (OSError, EOFError, NotImplementedError, RuntimeError, ValueError) as exc:
        raise OpListError(f"{path}: cannot read the wheel ({exc})") from None
    if len(data) > MAX_LIST_BYTES:
        raise OpListError(f"{path}: {CODEGEN_MEMBER} is larger than {MAX_LIST_BYTES} bytes; refused")
    source = f"{path}!{CODEGEN_MEMBER}"
    sections = parse_codegen_yaml(_decode(data, source), source)
    return _build(sections, wheel_release(path), "wheel", path, os.path.basename(path)), data


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --- a folder: site-packages, an extracted wheel, or the torch_npu package ---------------------------------------

def _folder_release(site: str) -> Optional[str]:
    try:
        names = os.listdir(site)
    except OSError:
        return None
    for name in sorted(names):
        match = re.match(r"^torch_npu-([0-9][^-]*)\.dist-info$", name)
        if match:
            return match.group(1)
    return None


def read_folder(path: str) -> OpList:
    """The list under a folder holding ``torch_npu/`` (site-packages, extracted wheel) or the package itself."""
    if not os.path.isdir(path):
        raise OpListError(f"{path}: no such folder")
    site = path
    if os.path.basename(os.path.normpath(path)) == "torch_npu" and not os.path.isdir(os.path.join(path, "torch_npu")):
        site = os.path.dirname(os.path.normpath(path)) or "."
    target = os.path.join(site, CODEGEN_MEMBER)
    from npudoctor.model.inputs import WALKED_LINK
    from npudoctor.probes.safe_open import UnsafeFile, read_file

    # The one link rule (npudoctor.model.inputs): inside the folder named, no link is followed (a list file or
    # a torch_npu/ linked to a credentials file or /proc/self/environ is not read).
    inside = site
    for part in CODEGEN_MEMBER.split("/"):
        inside = os.path.join(inside, part)
        if os.path.islink(inside):
            raise OpListError(f"{path}: no torch_npu operator list here ({inside}: {WALKED_LINK})")
    try:
        data = read_file(target, MAX_LIST_BYTES, whole=True, follow_symlinks=False).data
    except UnsafeFile as exc:
        raise OpListError(f"{path}: no torch_npu operator list here ({exc})") from None
    return _build(parse_codegen_yaml(_decode(data, target), target), _folder_release(site), "folder", target)


def read_path(path: str) -> OpList:
    """``--torch-npu PATH``: a wheel file or a folder (not a link to one: :data:`model.inputs.NAMED_LINK`)."""
    from npudoctor.model.inputs import NAMED_LINK, is_named_link

    if is_named_link(path):
        raise OpListError(f"{path}: {NAMED_LINK}")
    if os.path.isdir(path):
        return read_folder(path)
    return read_wheel(path)[0]


# --- an installed torch_npu, through the runner -------------------------------------------------------------------

def read_installed(runner: Any, location: str, release: Optional[str]) -> OpList:
    """The list of the torch_npu installed in ``location`` (its site-packages, as the versions probe says),
    read through ``runner`` (live, ``--root`` or a bundle)."""
    target = os.path.join(location, CODEGEN_MEMBER)
    content = runner.read_text(target, max_bytes=MAX_LIST_BYTES)
    if content.text is None:
        raise OpListError(f"{target}: cannot read the installed torch_npu's operator list ({content.error})")
    if content.truncated:
        raise OpListError(f"{target}: larger than {MAX_LIST_BYTES} bytes; refused")
    return _build(parse_codegen_yaml(content.text, target), release, "installed", location)


# --- the lists shipped as data ------------------------------------------------------------------------------------

def shipped_folder() -> Path:
    return knowledge.data_dir("knowledge") / SHIPPED_FOLDER


def _release_key(release: str) -> Tuple[Any, ...]:
    """Order releases as versions: 2.1.0rc1 < 2.1.0 < 2.1.0.post6 < 2.1.0.post10 < 2.2.0."""
    match = re.match(r"^(\d+)\.(\d+)\.(\d+)(?:rc(\d+))?(?:\.post(\d+))?", release)
    if not match:
        return (0, 0, 0, 0, 0, release)
    major, minor, patch, rc, post = match.groups()
    return (int(major), int(minor), int(patch), -1 if rc is None else -1000 + int(rc),
            -1 if post is None else int(post), release)


def shipped_releases() -> List[str]:
    """The releases with a shipped list, oldest first."""
    try:
        names = [p.stem for p in shipped_folder().glob("*.yaml")]
    except OSError:
        return []
    return sorted(names, key=_release_key)


def normalize_release(release: str) -> str:
    """A release as pip spells it: the matrix's ``2.1.0.rc1`` is the wheel's ``2.1.0rc1`` (PEP 440).

    >>> normalize_release("2.1.0.rc1"), normalize_release("2.1.0.post10")
    ('2.1.0rc1', '2.1.0.post10')
    """
    return re.sub(r"[.-]?rc", "rc", release.strip().lower())


def read_shipped(release: str) -> OpList:
    """The shipped list of ``release`` (``--torch-npu 2.1.0.post10``; ``2.1.0.rc1`` as the matrix spells it)."""
    release = normalize_release(release)
    if not _RELEASE.match(release):
        raise OpListError(f"--torch-npu {release[:60]!r}: neither a file, a folder nor a torch_npu release")
    path = shipped_folder() / f"{release}.yaml"
    if not path.is_file():
        known = shipped_releases()
        raise OpListError(f"no operator list shipped for torch_npu {release} (shipped: "
                          f"{', '.join(known[-6:])} and {max(0, len(known) - 6)} older; or give a wheel or "
                          "folder with --torch-npu PATH)")
    return load_shipped_file(path)


def load_shipped_file(path: Path) -> OpList:
    try:
        data = knowledge.load_yaml_file(path)
    except knowledge.KnowledgeError as exc:
        raise OpListError(str(exc)) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise OpListError(f"{path}: not an {SCHEMA} document")
    operators = data.get("operators")
    source = data.get("source") or {}
    if not isinstance(operators, dict) or not isinstance(source, dict):
        raise OpListError(f"{path}: 'operators' and 'source' must be mappings")
    sections: Dict[str, List[str]] = {}
    known = dict(SECTIONS)
    for section, names in operators.items():
        if section not in known or not isinstance(names, list) or not all(
                isinstance(n, str) and _NAME.match(n) for n in names):
            raise OpListError(f"{path}: section {str(section)[:40]!r} is not a list of operator names")
        sections[section] = names
    release = data.get("torch_npu")
    return _build(sections, str(release) if release else None, "shipped", str(path),
                  str(source.get("wheel") or "") or None, str(source.get("sha256") or "") or None)


def render_shipped(sections: Dict[str, List[str]], release: str, wheel: str, sha256: str) -> str:
    """The shipped data file for one release (``tests/test_ops_lists.py`` regenerates the 2.14.0 one)."""
    lines = [
        "# Operators torch_npu registers NPU kernels for, read from the release's own",
        f"# {CODEGEN_MEMBER} (generated by npudoctor.ops.oplist.render_shipped; do not edit).",
        f"schema: {SCHEMA}",
        f'torch_npu: "{release}"',
        "source:",
        f"  wheel: {wheel}",
        f"  sha256: {sha256}",
        f"  member: {CODEGEN_MEMBER}",
        "operators:",
    ]
    for section, _namespace in SECTIONS:
        if section in sections:
            names = sorted(set(sections[section]))
            lines.append(f"  {section}:" + (" []" if not names else ""))
            lines.extend(f"  - {name}" for name in names)
    return "\n".join(lines) + "\n"


def native_in_later_release(names: Iterable[str], release: Optional[str]) -> Dict[str, str]:
    """For each of ``names`` that a newer shipped list runs on the NPU, the oldest such release after
    ``release`` (every shipped one when ``release`` is not known): the upgrade that ends its fallback."""
    wanted = set(names)
    after = _release_key(normalize_release(release)) if release else None
    found: Dict[str, str] = {}
    for candidate in shipped_releases():
        if not wanted:
            break
        if after is not None and _release_key(candidate) <= after:
            continue
        native = load_shipped_file(shipped_folder() / f"{candidate}.yaml").operators & wanted
        found.update({name: candidate for name in native})
        wanted -= native
    return found
