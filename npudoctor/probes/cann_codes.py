"""CANN's own error texts on a node: the error-message registry (``error_code.json``) a toolkit installs.

Read statically through the runner (never imported or executed), so ``--root`` and bundles work: what the
registry says about a code (title, message, possible cause, solution) is preferred to the shipped text by
:func:`npudoctor.logs.codes.explain`, which then says where the text comes from and for which CANN.

Equivalent to ``cat $ASCEND_HOME_PATH/{,<arch>-linux/}conf/error_manager/error_code.json`` for the sourced
install, else ``/usr/local/Ascend/ascend-toolkit/latest``, ``/usr/local/Ascend/cann``, ``nnae/latest``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional

from npudoctor.errors import InputError
from npudoctor.probes.ascend_layout import ASCEND, HOME_VARIABLES, INFO_FILES
from npudoctor.untrusted import clean, one_line

REGISTRY = "conf/error_manager/error_code.json"
HOMES = (f"{ASCEND}/ascend-toolkit/latest", f"{ASCEND}/cann", f"{ASCEND}/nnae/latest")
ARCH_FOLDERS = ("aarch64-linux", "x86_64-linux")
# A registry is a few hundred KB; the runner's own cap (4 MiB) bounds what is read.
MAX_ENTRIES = 20000
TEXT_FIELDS = 2000  # characters kept of each text of an entry


class InstalledRegistry(NamedTuple):
    """The registry of one install: code -> {title, message, cause, solution, source}."""

    path: str
    version: str  # the install's CANN version, "" when its install.info could not be read
    codes: Dict[str, Dict[str, str]]

    @property
    def label(self) -> str:
        cann = f"CANN {self.version} " if self.version else "CANN "
        return f"{cann}as installed: {self.path}"


def _homes(runner: Any) -> List[str]:
    environ = runner.environ()
    found = [environ[name] for name in HOME_VARIABLES if environ.get(name)]
    return list(dict.fromkeys([*found, *HOMES]))


def _version(runner: Any, home: str) -> str:
    for folder in ("", *(f"{arch}/" for arch in ARCH_FOLDERS)):
        for info in INFO_FILES.values():
            content = runner.read_text(f"{home}/{folder}{info}", max_bytes=64 * 1024)
            for line in (content.text or "").splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "version" and value.strip():
                    return one_line(clean(value.strip()))[:200]
    return ""


def parse_registry(text: str, path: str) -> Dict[str, Dict[str, str]]:
    """The entries of an ``error_code.json`` text (``{"error_info_list": [...]}``); {} when it is not one."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    entries = document.get("error_info_list") if isinstance(document, Mapping) else None
    if not isinstance(entries, list):
        return {}
    codes: Dict[str, Dict[str, str]] = {}
    for entry in entries[:MAX_ENTRIES]:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("ErrCode"), str):
            continue
        raw = entry.get("suggestion")
        suggestion: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}

        def text_of(value: Any) -> str:
            # The node's text, redacted where it enters: every format of explain, logs explain, logs scan and
            # check shows it as read here (issue 33)
            return clean(" ".join(value.split())[:TEXT_FIELDS]) if isinstance(value, str) else ""

        codes[one_line(clean(entry["ErrCode"].strip().upper()))] = {
            "title": text_of(entry.get("errTitle")), "message": text_of(entry.get("ErrMessage")),
            "cause": text_of(suggestion.get("Possible Cause")), "solution": text_of(suggestion.get("Solution")),
            "source": path}
    return codes


def read_installed_registry(runner: Any) -> Optional[InstalledRegistry]:
    """The registry of the sourced (else the default) CANN install, or None when no install has one."""
    for home in _homes(runner):
        for folder in ("", *(f"{arch}/" for arch in ARCH_FOLDERS)):
            path = f"{home}/{folder}{REGISTRY}"
            content = runner.read_text(path)
            if content.text is None:
                continue
            codes = parse_registry(content.text, path)
            if codes:
                registry = InstalledRegistry(path, _version(runner, home), codes)
                label = registry.label
                for entry in codes.values():
                    entry["source"] = label
                return registry
    return None


class NodeError(InputError):
    """``--root`` or ``--from`` names nothing that can be read (one line; exit 2 like every user error)."""


def texts_on_node(root: Optional[str] = None, bundle: Optional[str] = None) -> Dict[str, Dict[str, str]]:
    """CANN's registry texts on the node ``explain`` is asked about: live (``/``), under ``root``, or as
    ``bundle`` recorded it; {} where no install has a registry. Imports only the runner it needs, so that
    ``logs explain`` stays as light as the code lookup itself."""
    if bundle and root:
        raise NodeError("--from and --root cannot be used together")
    runner: Any
    if bundle:
        from npudoctor.probes.bundle import BundleError, ReplayRunner

        try:
            runner = ReplayRunner(bundle)
        except BundleError as exc:
            raise NodeError(str(exc)) from None
    else:
        if root is not None and not os.path.isdir(root):
            raise NodeError(f"--root {root}: not a directory")
        from npudoctor.probes.runner import LiveRunner

        runner = LiveRunner(root or "/")
    registry = read_installed_registry(runner)
    return registry.codes if registry else {}
