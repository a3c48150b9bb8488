"""The target Python's packages, as the probe script prints them (pure).

The versions probe runs the training interpreter with a short script that reads package metadata through
``importlib.metadata`` (it never imports torch: importing torch_npu without a working CANN fails or hangs)
and prints one JSON line. This module turns that line into :class:`PythonFacts`.

>>> facts = parse_python_report('{"python": {"version": "3.10.14", "executable": "/usr/bin/python3"}, '
...     '"packages": {"torch": {"version": "2.1.0+cpu", "location": "/usr/lib/python3/site-packages", '
...     '"so_files": []}}, "missing": ["torch_npu"], "errors": {}}', interpreter="python3")
>>> facts.version, facts.packages["torch"].version, facts.missing
('3.10.14', '2.1.0+cpu', ('torch_npu',))
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from npudoctor.errors import InputError


@dataclass(frozen=True)
class PackageInfo:
    version: str
    location: str  # the site-packages folder holding the distribution
    # Shared objects in the distribution (paths relative to ``location``, as in its RECORD); listed for
    # torch and torch_npu so the libraries stage can resolve them.
    so_files: Tuple[str, ...] = ()

    def find(self, pattern: str) -> Optional[str]:
        r"""The path of the first listed shared object whose relative path matches ``pattern``.

        >>> PackageInfo("2.1.0", "/site", ("torch_npu/lib/libtorch_npu.so",)).find(r"libtorch_npu\.so$")
        '/site/torch_npu/lib/libtorch_npu.so'
        """
        for rel in self.so_files:
            if re.search(pattern, rel):
                return os.path.normpath(os.path.join(self.location, rel))
        return None


@dataclass(frozen=True)
class PythonFacts:
    """What the target interpreter says about itself; ``error`` when it could not be asked."""

    interpreter: str  # what was run: "python3", the --python option, or npudoctor's own interpreter
    version: Optional[str] = None  # "3.10.14"
    executable: Optional[str] = None  # sys.executable of that interpreter
    packages: Mapping[str, PackageInfo] = field(default_factory=dict)
    missing: Tuple[str, ...] = ()
    errors: Mapping[str, str] = field(default_factory=dict)  # package -> why its metadata could not be read
    error: Optional[str] = None
    # The interpreter's path as found on PATH or given (/opt/venv/bin/python3), symlinks not resolved: a
    # venv's python links to the base interpreter, whose resolved path names another environment.
    found_at: Optional[str] = None

    def package(self, name: str) -> Optional[PackageInfo]:
        return self.packages.get(name)

    @property
    def where(self) -> str:
        """How to name this interpreter to a person: ``python3 (/opt/venv/bin/python3)``, the path as found
        on PATH or given rather than its resolved symlink."""
        shown = self.found_at or self.executable
        if shown and shown != self.interpreter:
            return f"{self.interpreter} ({shown})"
        return self.interpreter


class PythonReportError(InputError, ValueError):
    pass


def parse_python_report(stdout: str, interpreter: str) -> PythonFacts:
    """Read the JSON line the probe script printed (the last line starting with ``{``).

    Raises :class:`PythonReportError` with a one-line reason when there is none or it is malformed.

    >>> parse_python_report("Traceback ...", "python3")
    Traceback (most recent call last):
    ...
    npudoctor.parsers.python_packages.PythonReportError: no JSON report in the output of python3
    """
    lines = [line for line in stdout.splitlines() if line.strip().startswith("{")]
    if not lines:
        raise PythonReportError(f"no JSON report in the output of {interpreter}")
    try:
        data = json.loads(lines[-1])
    except ValueError as exc:
        raise PythonReportError(f"malformed JSON report from {interpreter}: {exc}") from None
    if not isinstance(data, dict):
        raise PythonReportError(f"malformed JSON report from {interpreter}: not an object")
    python: Dict[str, Any] = data.get("python") or {}
    packages: Dict[str, PackageInfo] = {}
    for name, info in (data.get("packages") or {}).items():
        if not isinstance(info, dict) or not info.get("version"):
            continue
        packages[str(name)] = PackageInfo(
            version=str(info["version"]),
            location=str(info.get("location") or ""),
            so_files=tuple(str(path) for path in info.get("so_files") or ()),
        )
    return PythonFacts(
        interpreter=interpreter,
        version=python.get("version"),
        executable=python.get("executable"),
        packages=packages,
        missing=tuple(str(name) for name in data.get("missing") or ()),
        errors={str(k): str(v) for k, v in (data.get("errors") or {}).items()},
    )
