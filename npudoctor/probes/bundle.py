"""Bundles: every raw answer a check used, recorded on one node and replayed anywhere.

Layout (a ``.tar.gz`` or a plain folder)::

    manifest.json   {"schema": "npudoctor.bundle/1", "tool": ..., "created": ..., "redacted": true,
                     "host": {...}, "records": [{"key", "kind", ...metadata, "raw": "raw/0003.txt"}]}
    raw/NNNN.txt    command stdout (and .err for stderr), file contents, listings

Secrets are redacted when the bundle is written, so nothing secret is ever on disk in it.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import stat
import tarfile
import time
import zlib
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

from npudoctor import __version__
from npudoctor.errors import InputError
from npudoctor.parsers import jsondoc
from npudoctor.parsers.text import decode_text
from npudoctor.probes import sources
from npudoctor.probes.runner import MAX_FILE_BYTES, Runner
from npudoctor.probes.safe_open import UnsafeFile, file_kind, read_file
from npudoctor.probes.sources import Command, CommandResult, DirListing, FileContent, PathInfo
from npudoctor.untrusted.redact import redact_env, redact_text

SCHEMA = "npudoctor.bundle/1"
# Bundles are untrusted input (they travel to support engineers and services that replay them): every
# size is capped before anything is read.
MAX_BUNDLE_MEMBER_BYTES = 64 * 1024 * 1024  # one raw file (a plog end is at most logs.max_bytes_per_file)
MAX_BUNDLE_TOTAL_BYTES = 256 * 1024 * 1024  # all raw files read together
MAX_ARCHIVE_BYTES = 1024 * 1024 * 1024  # the uncompressed archive, members skipped included
MAX_BUNDLE_MEMBERS = 100_000
MAX_TAR_HEADER_BYTES = 64 * 1024  # a GNU long name or pax header; tarfile reads it whole into memory
MAX_RECORDS = 100_000
MANIFEST = "manifest.json"
_RAW_NAME = re.compile(r"raw/[A-Za-z0-9_.-]{1,128}\Z")

# The environment variables checks read (by name or prefix) are recorded with their values (redacted);
# of all others only the names are kept. A probe reading a new variable adds it here.
RECORDED_ENV_NAMES = frozenset(("PATH", "PWD", "LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME",
                                "VIRTUAL_ENV", "CONDA_PREFIX", "LANG", "LC_ALL", "WORLD_SIZE", "RANK",
                                "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"))
RECORDED_ENV_PREFIXES = ("ASCEND_", "HCCL_", "HCCN_", "ACL_", "NPU_", "TORCH_", "PYTORCH_", "TASK_QUEUE_")


class BundleError(InputError):
    """The bundle cannot be read: a clear one-line reason for the user."""


def _raw_name(index: int, suffix: str = "txt") -> str:
    return f"raw/{index:04d}.{suffix}"


def recorded_env(variables: Mapping[str, str]) -> Tuple[Dict[str, str], List[str]]:
    """The variables checks read (to be redacted and stored) and the names of the others."""
    kept = {k: v for k, v in variables.items() if k in RECORDED_ENV_NAMES or k.startswith(RECORDED_ENV_PREFIXES)}
    return kept, sorted(k for k in variables if k not in kept)


NOT_RECORDED = "<not recorded>"
_ENV0_ITEM = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=", re.S)


def _env0_recorded_only(text: str) -> str:
    """An ``env -0`` listing (set_env.sh's environment) keeps, like the environment record, only the values
    of the variables checks read; the others keep their name.

    >>> _env0_recorded_only("LD_LIBRARY_PATH=/a\\0MY_DB=hunter2\\0")
    'LD_LIBRARY_PATH=/a\\x00MY_DB=<not recorded>\\x00'
    """
    if "\0" not in text:
        return text
    items = text.split("\0")
    if not all(_ENV0_ITEM.match(item) for item in items if item):
        return text  # not an environment listing
    kept = []
    for item in items:
        name, sep, _value = item.partition("=")
        if sep and not (name in RECORDED_ENV_NAMES or name.startswith(RECORDED_ENV_PREFIXES)):
            item = f"{name}={NOT_RECORDED}"
        kept.append(item)
    return "\0".join(kept)


def build_bundle(records: Iterable[Tuple[str, Dict[str, Any]]], host: Dict[str, Any],
                 collect_options: Optional[Mapping[str, Any]] = None) -> Dict[str, bytes]:
    """Turn recorded answers into bundle members (name -> bytes), redacting secrets on the way.

    ``collect_options`` (level, python, logs_dirs) are stored so that ``check --from`` replays the bundle
    as it was collected. The manifest lists what was redacted where, by variable name or pattern, never a
    value."""
    members: Dict[str, bytes] = {}
    manifest_records: List[Dict[str, Any]] = []
    redactions: Dict[str, Dict[str, int]] = {}

    def redacted(where: str, text: str) -> str:
        found: Dict[str, int] = {}
        clean = redact_text(text, found)
        if found:
            redactions.setdefault(where, {}).update(found)
        return clean

    for index, (key, record) in enumerate(records):
        kind, value = record["kind"], record["value"]
        entry: Dict[str, Any] = {"key": redacted(key, key), "kind": kind}
        if kind == "command":
            assert isinstance(value, CommandResult)
            entry.update(
                argv=[redacted(key, a) for a in value.argv], rc=value.rc, duration_s=round(value.duration_s, 4),
                error=value.error, resolved_path=value.resolved_path,
            )
            if "t_s" in record:  # `collect --samples`: seconds from the first sample
                entry["t_s"] = round(record["t_s"], 3)
            entry["raw"] = _raw_name(index)
            members[entry["raw"]] = redacted(entry["raw"], _env0_recorded_only(value.stdout)).encode()
            if value.stderr:
                entry["raw_stderr"] = _raw_name(index, "err")
                members[entry["raw_stderr"]] = redacted(entry["raw_stderr"], value.stderr).encode()
        elif kind == "file":
            assert isinstance(value, FileContent)
            entry.update(path=value.path, error=value.error, truncated=value.truncated)
            if value.text is not None:
                entry["raw"] = _raw_name(index)
                members[entry["raw"]] = redacted(entry["raw"], value.text).encode()
        elif kind == "dir":
            assert isinstance(value, DirListing)
            entry.update(path=value.path, entries=list(value.entries), error=value.error)
        elif kind == "stat":
            assert isinstance(value, PathInfo)
            entry.update(value._asdict())
        elif kind == "env":
            kept, others = recorded_env(value)
            found: Dict[str, int] = {}
            entry["variables"] = redact_env(kept, found)
            entry["names_not_recorded"] = others
            if found:
                redactions.setdefault("env", {}).update(found)
        elif kind in ("which", "host", "net"):
            entry["value"] = value
        else:  # pragma: no cover - a new kind must be taught here first
            raise ValueError(f"unknown record kind {kind!r}")
        manifest_records.append(entry)
    manifest = {
        "schema": SCHEMA,
        "tool": {"name": "npudoctor", "version": __version__},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "redacted": True,
        "redactions": redactions,
        "collect": _collect_options(collect_options),
        "host": host,
        "records": manifest_records,
    }
    members[MANIFEST] = json.dumps(manifest, indent=1, sort_keys=True).encode()
    return members


def _collect_options(options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    options = options or {}
    return {"level": int(options.get("level") or 1), "python": options.get("python") or None,
            "logs_dirs": [str(d) for d in options.get("logs_dirs") or ()]}


# -- writing -------------------------------------------------------------------------------------------------
def _exclusive(path: str, mode: int = 0o600) -> int:
    """A new file at ``path``, created here and now: never an existing file, never through a symlink."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)


def write_bundle(path: str, members: Dict[str, bytes]) -> None:
    """Write a ``.tar.gz`` (or a folder when ``path`` has no tar suffix), files 0600 and folders 0700.

    Nothing existing is ever overwritten or followed: the archive is written to ``PATH.partial`` created
    exclusively beside the target (an existing ``.partial`` or a symlink planted there is refused), then
    linked to ``PATH`` only if that name is still free; on any failure (a full disk included) what was
    written is removed. A folder is created fresh and filled the same way."""
    if not path or not os.path.basename(path.rstrip(os.sep)):
        raise OSError(errno.EINVAL, "the output name is empty")
    if path.endswith((".tar.gz", ".tgz", ".tar")):
        _write_archive(path, members)
    else:
        _write_folder(path, members)


def _write_archive(path: str, members: Dict[str, bytes]) -> None:
    tmp = path + ".partial"
    try:
        fd = _exclusive(tmp)
    except FileExistsError:
        raise OSError(errno.EEXIST, f"{tmp} already exists (an unfinished collect? remove it first)") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            with tarfile.open(fileobj=handle, mode="w" if path.endswith(".tar") else "w:gz") as tar:
                now = int(time.time())
                for name, data in sorted(members.items()):
                    info = tarfile.TarInfo(name)
                    info.size, info.mtime, info.mode = len(data), now, 0o600
                    tar.addfile(info, io.BytesIO(data))
            handle.flush()
            os.fsync(handle.fileno())
        # link(2) fails when PATH exists (a rename would replace it): nothing is ever overwritten.
        try:
            os.link(tmp, path)
        except OSError as exc:
            if exc.errno == errno.EEXIST or exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            # A filesystem without hard links (vfat, some FUSE mounts): rename, after one last look.
            if os.path.lexists(path):
                raise OSError(errno.EEXIST, f"{path} already exists") from None
            os.rename(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _write_folder(path: str, members: Dict[str, bytes]) -> None:
    os.mkdir(path, 0o700)
    try:
        os.mkdir(os.path.join(path, "raw"), 0o700)
        for name, data in members.items():
            with os.fdopen(_exclusive(os.path.join(path, name)), "wb") as handle:
                handle.write(data)
    except BaseException:
        _remove_folder(path)
        raise


def _remove_folder(path: str) -> None:
    for folder, _dirs, files in os.walk(path, topdown=False):
        for name in files:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))
        with contextlib.suppress(OSError):
            os.rmdir(folder)


# -- reading -------------------------------------------------------------------------------------------------
class _CappedTarInfo(tarfile.TarInfo):
    """A tar header whose GNU long name / pax data is refused when large (tarfile reads it whole)."""

    def _proc_member(self, tarfile_: Any) -> Any:
        if self.type in (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
                         tarfile.SOLARIS_XHDTYPE) and self.size > MAX_TAR_HEADER_BYTES:
            raise tarfile.HeaderError(f"a {self.size}-byte extended header (at most {MAX_TAR_HEADER_BYTES})")
        return super()._proc_member(tarfile_)  # type: ignore[misc]


def _member_name(name: str) -> str:
    return name[2:] if name.startswith("./") else name


def _wanted(name: str) -> bool:
    return name == MANIFEST or bool(_RAW_NAME.match(name))


def read_bundle(path: str) -> Dict[str, bytes]:
    """The manifest and the raw files it references, by name. Raises :class:`BundleError` with a one-line
    reason on any bad input: a FIFO or device, links, members outside the bundle, oversized members or
    headers, too many members, a manifest that breaks the schema."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise BundleError(f"{path}: {'no such file' if exc.errno == errno.ENOENT else exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        return _read_folder(path)
    if not stat.S_ISREG(info.st_mode):
        raise BundleError(f"{path}: not a bundle (not a regular file or folder: {file_kind(info.st_mode)})")
    return _read_archive(path)


def iter_archive(path: str) -> Iterator[Tuple[str, tarfile.TarInfo, tarfile.TarFile]]:
    """A tar archive's members as ``(name, header, archive)``, one header at a time (never ``getmembers()``,
    whose list and GNU long names can take GBs), at most :data:`MAX_BUNDLE_MEMBERS` members and
    :data:`MAX_ARCHIVE_BYTES` uncompressed; the file is opened without blocking (a FIFO cannot hang it).
    Raises :class:`BundleError` past a cap; tarfile, zlib and OS errors pass through."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as raw, tarfile.open(fileobj=raw, mode="r:*", tarinfo=_CappedTarInfo) as tar:
        for count, info in enumerate(tar, 1):
            tar.members = []  # type: ignore[attr-defined]  # tarfile keeps every header it saw: not for 10**6 members
            if count > MAX_BUNDLE_MEMBERS:
                raise BundleError(f"{path}: more than {MAX_BUNDLE_MEMBERS} members")
            if info.offset_data + info.size > MAX_ARCHIVE_BYTES:
                raise BundleError(f"{path}: the archive is larger than {MAX_ARCHIVE_BYTES} bytes uncompressed")
            yield _member_name(info.name), info, tar


def _report_schema(path: str) -> str:
    """The schema name of an npudoctor JSON document at ``path`` ("npudoctor.report/1"), else ""."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
    except OSError:
        return ""
    match = re.match(rb'\s*\{\s*"schema"\s*:\s*"(npudoctor\.[\w.]+/\d+)"', head)
    return match.group(1).decode() if match else ""


def _read_archive(path: str) -> Dict[str, bytes]:
    members: Dict[str, bytes] = {}
    referenced: Optional[set] = None
    total = 0
    try:
        for name, info, tar in iter_archive(path):
            if name.startswith("/") or ".." in name.split("/"):
                raise BundleError(f"{path}: member {name!r} points outside the bundle")
            if info.issym() or info.islnk():
                raise BundleError(f"{path}: member {name!r} is a link; bundles hold regular files only")
            if not info.isfile() or not _wanted(name):
                continue
            if referenced is not None and name not in referenced:
                continue  # the manifest came first and does not use it: never read
            if info.size > MAX_BUNDLE_MEMBER_BYTES:
                raise BundleError(f"{path}: member {name} is larger than {MAX_BUNDLE_MEMBER_BYTES} bytes")
            total += info.size
            if total > MAX_BUNDLE_TOTAL_BYTES:
                raise BundleError(f"{path}: its files hold more than {MAX_BUNDLE_TOTAL_BYTES} bytes")
            extracted = tar.extractfile(info)
            if extracted is not None:
                members[name] = extracted.read(MAX_BUNDLE_MEMBER_BYTES)
            if name == MANIFEST:
                referenced = _referenced(parse_manifest(path, members[name]))
    except BundleError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error) as exc:
        report = _report_schema(path)
        if report:  # `check --format json > report.json`, then `check --from report.json`: say what it is
            raise BundleError(f"{path}: a report ({report}), not a bundle: --from replays a bundle made by "
                              f"`npudoctor collect`; `npudoctor fleet {path}` shows a report") from None
        reason = str(exc).splitlines()[0].rstrip(" :") if str(exc) else exc.__class__.__name__
        raise BundleError(f"{path}: not a readable bundle archive (.tar.gz or folder): {reason}") from None
    if MANIFEST not in members:
        raise BundleError(f"{path}: not an npudoctor bundle (no manifest.json)")
    wanted = _referenced(parse_manifest(path, members[MANIFEST]))
    return {name: data for name, data in members.items() if name == MANIFEST or name in wanted}


def _read_folder(path: str) -> Dict[str, bytes]:
    """Only the manifest and the raw files it names, each a regular file that is no symlink, under a real
    ``raw/`` folder (a link there could disclose any file of the machine replaying the bundle)."""

    def read(name: str) -> bytes:
        try:
            return read_file(os.path.join(path, name), MAX_BUNDLE_MEMBER_BYTES, follow_symlinks=False,
                             whole=True).data
        except UnsafeFile as exc:
            raise BundleError(f"{path}: {name}: {str(exc).rsplit(': ', 1)[-1]}") from None

    members = {MANIFEST: read(MANIFEST)} if os.path.lexists(os.path.join(path, MANIFEST)) else {}
    if not members:
        raise BundleError(f"{path}: not an npudoctor bundle (no manifest.json)")
    wanted = sorted(_referenced(parse_manifest(path, members[MANIFEST])))
    if wanted:
        raw = os.lstat(os.path.join(path, "raw")) if os.path.lexists(os.path.join(path, "raw")) else None
        if raw is None or not stat.S_ISDIR(raw.st_mode):
            raise BundleError(f"{path}: raw: not a folder (a symlink is not followed)")
    total = 0
    for name in wanted:
        if not os.path.lexists(os.path.join(path, name)):
            continue  # a missing raw file reads as empty output, as in an archive
        members[name] = read(name)
        total += len(members[name])
        if total > MAX_BUNDLE_TOTAL_BYTES:
            raise BundleError(f"{path}: its files hold more than {MAX_BUNDLE_TOTAL_BYTES} bytes")
    return members


def _referenced(manifest: Mapping[str, Any]) -> set:
    return {r[field] for r in manifest["records"] for field in ("raw", "raw_stderr") if r.get(field)}


# The manifest's schema: record field -> accepted types (None: null allowed). Unknown fields are ignored
# (a newer minor version may add some).
_STR, _INT, _NUM, _BOOL, _NULL = (str,), (int,), (int, float), (bool,), (type(None),)
_RECORD_FIELDS: Dict[str, Tuple[type, ...]] = {
    "key": _STR, "kind": _STR, "raw": _STR + _NULL, "raw_stderr": _STR + _NULL, "argv": (list,),
    "rc": _INT + _NULL, "duration_s": _NUM, "error": _STR + _NULL, "resolved_path": _STR + _NULL,
    "path": _STR, "truncated": _BOOL, "entries": (list,), "variables": (dict,), "exists": _BOOL,
    "mode": _INT, "readable": _BOOL, "writable": _BOOL, "link_target": _STR + _NULL,
}
_KINDS = ("command", "file", "dir", "stat", "env", "which", "host", "net")
_VALUE_TYPES: Dict[str, Tuple[type, ...]] = {"which": _STR + _NULL, "host": (dict,), "net": (dict,)}


def parse_manifest(path: str, data: bytes) -> Dict[str, Any]:
    """``manifest.json`` parsed and checked against its schema; :class:`BundleError` names the field."""
    try:
        manifest = jsondoc.loads(data, f"{path}: manifest.json")
    except jsondoc.JsonDocumentError as exc:
        raise BundleError(str(exc)) from None

    def bad(field: str, expected: str, value: Any) -> BundleError:
        return BundleError(f"{path}: manifest.json: {field}: expected {expected}, got {jsondoc.type_name(value)}")

    if not isinstance(manifest, dict):
        raise bad("(top level)", "an object", manifest)
    if manifest.get("schema") != SCHEMA:
        raise BundleError(f"{path}: unsupported bundle schema {manifest.get('schema')!r}")
    records = manifest.get("records")
    if not isinstance(records, list):
        raise bad("records", "a list", records)
    if len(records) > MAX_RECORDS:
        raise BundleError(f"{path}: manifest.json: records: more than {MAX_RECORDS}")
    for field in ("host", "collect"):
        if field in manifest and not isinstance(manifest[field], dict):
            raise bad(field, "an object", manifest[field])
    collect: Dict[str, Any] = manifest.get("collect") or {}
    for field, wanted, expected in (("level", _INT, "an integer"), ("python", _STR + _NULL, "a string or null"),
                                    ("logs_dirs", (list,), "a list of strings")):
        if field in collect and (not isinstance(collect[field], wanted) or isinstance(collect[field], bool)):
            raise bad(f"collect.{field}", expected, collect[field])
    if not all(isinstance(d, str) for d in collect.get("logs_dirs", [])):
        raise bad("collect.logs_dirs", "a list of strings", collect["logs_dirs"])
    record: Any
    for index, record in enumerate(records):
        where = f"records[{index}]"
        if not isinstance(record, dict):
            raise bad(where, "an object", record)
        for field in ("key", "kind"):
            if field not in record:
                raise BundleError(f"{path}: manifest.json: {where}.{field}: missing")
        if not isinstance(record["key"], str):
            raise bad(f"{where}.key", "a string", record["key"])
        # A stat record's "kind" is the path's kind (file, dir, char...): PathInfo's fields are stored flat.
        if record["kind"] not in _KINDS and not (record["key"].startswith("stat:") and isinstance(record["kind"], str)):
            raise BundleError(f"{path}: manifest.json: {where}.kind: unknown kind {str(record['kind'])[:40]!r}")
        value: Any
        types: Optional[Tuple[type, ...]]
        for field, value in record.items():
            types = _VALUE_TYPES.get(record["kind"]) if field == "value" else _RECORD_FIELDS.get(field)
            if types is None:
                continue
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise bad(f"{where}.{field}", " or ".join(jsondoc.type_name(t()) for t in types), value)
            if field in ("argv", "entries") and not all(isinstance(v, str) for v in record[field]):
                raise bad(f"{where}.{field}", "a list of strings", value)
            if field == "variables" and not all(isinstance(v, str) for v in record[field].values()):
                raise bad(f"{where}.{field}", "an object of strings", value)
            if field in ("raw", "raw_stderr") and value and not _RAW_NAME.match(record[field]):
                raise BundleError(f"{path}: manifest.json: {where}.{field}: not a raw/ file name")
        if record["kind"] == "net" and not all(isinstance(v, list) for v in record.get("value", {}).values()):
            raise bad(f"{where}.value", "an object of lists", record["value"])
    return manifest


class ReplayRunner(Runner):
    """Answers every request from a recorded bundle; what was not recorded reads as "not-recorded"."""

    def __init__(self, path: str) -> None:
        members = read_bundle(path)
        self.description = f"bundle:{path}"
        self.manifest = parse_manifest(path, members.pop(MANIFEST))
        self._members = members
        self._records: Dict[str, Dict[str, Any]] = {r["key"]: r for r in self.manifest["records"]}
        # A command run with a computed environment is keyed by a digest of it; the replay's environment
        # is the recorded (filtered, redacted) one, so such commands are also found by their argv alone.
        by_argv: Dict[str, List[Dict[str, Any]]] = {}
        for record in self.manifest["records"]:
            if record["kind"] == "command":
                by_argv.setdefault(record["key"].split(" #env=", 1)[0], []).append(record)
        self._by_argv = {key: found[0] for key, found in by_argv.items() if len(found) == 1}

    @property
    def collect_options(self) -> Dict[str, Any]:
        """The ``--level``, ``--python`` and ``--logs`` given to ``collect`` (the replay uses them)."""
        return _collect_options(self.manifest.get("collect"))

    def _raw(self, record: Dict[str, Any], field: str = "raw") -> str:
        name = record.get(field)
        if not name:
            return ""
        return decode_text(self._members.get(name, b""))  # as a live read decodes (GB18030 fallback)

    def run(self, command: Command) -> CommandResult:
        record = self._records.get(command.key)
        if record is None and command.env is not None:
            record = self._by_argv.get(command.key.split(" #env=", 1)[0])
        return self._result(record) or CommandResult(command.argv, None, error="not-recorded")

    def answer(self, key: str) -> Optional[CommandResult]:
        """The command answer recorded under ``key`` (also the keyed samples of `collect --samples`)."""
        return self._result(self._records.get(key))

    def _result(self, record: Optional[Dict[str, Any]]) -> Optional[CommandResult]:
        if record is None or record.get("kind") != "command":
            return None
        return CommandResult(
            tuple(record.get("argv", ())), record.get("rc"), self._raw(record),
            self._raw(record, "raw_stderr"), record.get("duration_s", 0.0), record.get("error"),
            record.get("resolved_path"),
        )

    def read_text(self, path: str, max_bytes: int = MAX_FILE_BYTES, tail: bool = False) -> FileContent:
        record = self._records.get(sources.file_key(path, tail))
        if record is None:
            return FileContent(path, None, "not-recorded")
        text = self._raw(record) if record.get("raw") else None
        return FileContent(path, text, record.get("error"), bool(record.get("truncated")))

    def list_dir(self, path: str) -> DirListing:
        record = self._records.get(sources.dir_key(path))
        if record is None:
            return DirListing(path, (), "not-recorded")
        return DirListing(path, tuple(record.get("entries", ())), record.get("error"))

    def path_info(self, path: str) -> PathInfo:
        record = self._records.get(sources.stat_key(path))
        if record is None:
            return PathInfo(path, False, error="not-recorded")
        fields = {k: record[k] for k in PathInfo._fields if k in record}
        return PathInfo(**fields)

    def environ(self) -> Dict[str, str]:
        record = self._records.get("env")
        return dict(record["variables"]) if record else {}

    def which(self, name: str, extra_dirs: Iterable[str] = ()) -> Optional[str]:
        record = self._records.get(sources.which_key(name, extra_dirs))
        return record.get("value") if record else None

    def net_interfaces(self) -> Dict[str, List[str]]:
        record = self._records.get("net")
        return {k: list(v) for k, v in record["value"].items()} if record else {}

    def host(self) -> Dict[str, Any]:
        record = self._records.get("host")
        return dict(record["value"]) if record else dict(self.manifest.get("host", {}))
