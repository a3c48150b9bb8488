"""Bundles: every raw answer a check used, recorded on one node and replayed anywhere.

Layout (a ``.tar.gz`` or a plain folder)::

    manifest.json   {"schema": "npudoctor.bundle/1", "tool": ..., "created": ..., "redacted": true,
                     "host": {...}, "records": [{"key", "kind", ...metadata, "raw": "raw/0003.txt"}]}
    raw/NNNN.txt    command stdout (and .err for stderr), file contents, listings

Secrets are redacted when the bundle is written, so nothing secret is ever on disk in it.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from npudoctor import __version__
from npudoctor.probes import sources
from npudoctor.probes.redact import redact_env, redact_text
from npudoctor.probes.runner import MAX_FILE_BYTES, Runner
from npudoctor.probes.sources import Command, CommandResult, DirListing, FileContent, PathInfo

SCHEMA = "npudoctor.bundle/1"
MAX_BUNDLE_MEMBER_BYTES = 64 * 1024 * 1024


class BundleError(Exception):
    """The bundle cannot be read: a clear one-line reason for the user."""


def _raw_name(index: int, suffix: str = "txt") -> str:
    return f"raw/{index:04d}.{suffix}"


def build_bundle(records: Iterable[Tuple[str, Dict[str, Any]]], host: Dict[str, Any]) -> Dict[str, bytes]:
    """Turn recorded answers into bundle members (name -> bytes), redacting secrets on the way."""
    members: Dict[str, bytes] = {}
    manifest_records: List[Dict[str, Any]] = []
    for index, (key, record) in enumerate(records):
        kind, value = record["kind"], record["value"]
        entry: Dict[str, Any] = {"key": key, "kind": kind}
        if kind == "command":
            assert isinstance(value, CommandResult)
            entry.update(
                argv=list(value.argv), rc=value.rc, duration_s=round(value.duration_s, 4), error=value.error,
                resolved_path=value.resolved_path,
            )
            if "t_s" in record:  # `collect --samples`: seconds from the first sample
                entry["t_s"] = round(record["t_s"], 3)
            entry["raw"] = _raw_name(index)
            members[entry["raw"]] = redact_text(value.stdout).encode()
            if value.stderr:
                entry["raw_stderr"] = _raw_name(index, "err")
                members[entry["raw_stderr"]] = redact_text(value.stderr).encode()
        elif kind == "file":
            assert isinstance(value, FileContent)
            entry.update(path=value.path, error=value.error, truncated=value.truncated)
            if value.text is not None:
                entry["raw"] = _raw_name(index)
                members[entry["raw"]] = redact_text(value.text).encode()
        elif kind == "dir":
            assert isinstance(value, DirListing)
            entry.update(path=value.path, entries=list(value.entries), error=value.error)
        elif kind == "stat":
            assert isinstance(value, PathInfo)
            entry.update(value._asdict())
        elif kind == "env":
            entry["variables"] = redact_env(value)
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
        "host": host,
        "records": manifest_records,
    }
    members["manifest.json"] = json.dumps(manifest, indent=1, sort_keys=True).encode()
    return members


def write_bundle(path: str, members: Dict[str, bytes]) -> None:
    """Write a ``.tar.gz`` (or a folder when ``path`` has no tar suffix). Never overwrites silently:
    the caller checks for an existing path first; the archive is written to a temporary name and renamed."""
    if path.endswith((".tar.gz", ".tgz", ".tar")):
        tmp = path + ".partial"
        with tarfile.open(tmp, "w" if path.endswith(".tar") else "w:gz") as tar:
            for name, data in sorted(members.items()):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = int(time.time())
                info.mode = 0o600
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, path)
    else:
        os.makedirs(os.path.join(path, "raw"), exist_ok=False)
        for name, data in members.items():
            with open(os.path.join(path, name), "wb") as handle:
                handle.write(data)


def read_bundle(path: str) -> Dict[str, bytes]:
    """Bundle members by name. Raises :class:`BundleError` with a one-line reason on any bad input."""
    members: Dict[str, bytes] = {}
    if os.path.isdir(path):
        for dirpath, _dirs, files in os.walk(path):
            for name in files:
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, path).replace(os.sep, "/")
                with open(full, "rb") as handle:
                    members[rel] = handle.read(MAX_BUNDLE_MEMBER_BYTES)
    elif not os.path.exists(path):
        raise BundleError(f"{path}: no such file")
    else:
        try:
            with tarfile.open(path, "r:*") as tar:
                for info in tar.getmembers():
                    if not info.isfile():
                        continue
                    name = info.name[2:] if info.name.startswith("./") else info.name
                    if info.size > MAX_BUNDLE_MEMBER_BYTES:
                        raise BundleError(
                            f"{path}: member {name} is larger than {MAX_BUNDLE_MEMBER_BYTES} bytes"
                        )
                    extracted = tar.extractfile(info)
                    if extracted is not None:
                        members[name] = extracted.read()
        except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
            reason = str(exc).splitlines()[0].rstrip(" :") if str(exc) else exc.__class__.__name__
            raise BundleError(f"{path}: not a readable bundle archive (.tar.gz or folder): {reason}") from None
    if "manifest.json" not in members:
        raise BundleError(f"{path}: not an npudoctor bundle (no manifest.json)")
    return members


class ReplayRunner(Runner):
    """Answers every request from a recorded bundle; what was not recorded reads as "not-recorded"."""

    def __init__(self, path: str) -> None:
        members = read_bundle(path)
        try:
            manifest = json.loads(members["manifest.json"].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BundleError(f"{path}: manifest.json is not valid JSON ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA:
            schema = manifest.get("schema") if isinstance(manifest, dict) else None
            raise BundleError(f"{path}: unsupported bundle schema {schema!r}")
        self.description = f"bundle:{path}"
        self.manifest = manifest
        self._members = members
        self._records: Dict[str, Dict[str, Any]] = {r["key"]: r for r in manifest.get("records", [])}

    def _raw(self, record: Dict[str, Any], field: str = "raw") -> str:
        name = record.get(field)
        if not name:
            return ""
        return self._members.get(name, b"").decode("utf-8", errors="replace")

    def run(self, command: Command) -> CommandResult:
        return self.answer(command.key) or CommandResult(command.argv, None, error="not-recorded")

    def answer(self, key: str) -> Optional[CommandResult]:
        """The command answer recorded under ``key`` (also the keyed samples of `collect --samples`)."""
        record = self._records.get(key)
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
