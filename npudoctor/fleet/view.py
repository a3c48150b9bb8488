"""The fleet view: many reports (or bundles) at once, which nodes fail which checks, and version drift.

Inputs are ``npudoctor.report/1`` JSON files, bundles (``.tar.gz`` or folders with ``manifest.json``: replayed
through the same checks as ``check --from``), tar archives of report files, and folders holding any of these.
The cost is linear in the number of reports: each is read once, reduced to a small record (name, failing and
warning check IDs, the inventory as a tuple of values in one shared field order) and dropped. Drift is every
inventory field on which nodes disagree, with the majority value and the nodes that differ from it.

A node reported twice (same host name) counts once: by its newest report where reports carry ``run.started``
(``onboard`` records do; ``check --format json`` leaves times out so that replays are byte-stable), else by
the one read last (inputs in the order given, folders in name order). "Same" is the name as the report wrote
it: two names that only read alike once cleaned (a secret redacted, a control character dropped) are two
nodes, each shown with the report it came from (``node-<redacted> (rack1/a.json)``); nothing derived from the
hidden text (not even a hash, which would let a guess be checked) leaves the view.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from npudoctor.errors import InputError
from npudoctor.fleet.reportdoc import MAX_REPORT_BYTES, ReportShapeError, check_report
from npudoctor.model import inputs
from npudoctor.model.profile import flatten
from npudoctor.parsers import jsondoc
from npudoctor.untrusted import clean, csv_cell, one_line

SCHEMA = "npudoctor.fleet/1"
BUNDLE_SUFFIXES = (".tar.gz", ".tgz", ".tar")
# Fields that name a node or say where a value came from rather than describe the node: never "drift".
NOT_DRIFT = frozenset({"hostname", "chips.source"})
# Per-chip rows (health, temperature): state for chip tables, not an inventory value to compare or keep.
NOT_KEPT = frozenset({"chips.devices"})
NOTABLE = frozenset({"fail", "error", "warn"})
# Distinct inventory fields the view compares (a real fleet has ~30; each report may bring 1,000 at most).
MAX_FLEET_FIELDS = 4_096


# Chip findings kept per node (a node with every chip failing SMI002..SMI008 stays small).
MAX_CHIPS_PER_NODE = 64


class NodeRecord(NamedTuple):
    """One node, reduced to what the view shows (a NamedTuple: 50,000 of them stay small)."""

    name: str
    source: str
    started: str
    failing: Tuple[str, ...]  # check IDs with a FAIL or ERROR finding
    warning: Tuple[str, ...]
    counts: Tuple[int, int, int, int, int]  # pass, warn, fail, skip, error
    inventory: Tuple[Any, ...]  # values in FleetView.fields order (shorter tuples: missing trailing fields)
    # (check id, chip subject "npu:N/chip:C") of the chip findings that failed or warned: which chip to act on
    chips: Tuple[Tuple[str, str], ...] = ()

    @property
    def verdict(self) -> str:
        return "fail" if self.failing else "warn" if self.warning else "ok"


@dataclass
class Drift:
    field: str
    majority: Any
    majority_count: int
    others: List[Tuple[Any, List[str]]]  # (value, nodes), most common first


@dataclass
class FleetView:
    nodes: List[NodeRecord] = field(default_factory=list)
    fields: List[str] = field(default_factory=list)
    titles: Dict[str, str] = field(default_factory=dict)  # check id -> title
    errors: List[Tuple[str, str]] = field(default_factory=list)  # (path, reason)
    reports_read: int = 0
    fields_not_compared: int = 0  # inventory values whose field came after the first MAX_FLEET_FIELDS

    def failing_checks(self) -> List[Tuple[str, List[str]]]:
        """(check id, nodes failing it), most nodes first."""
        return self._nodes_by_check(lambda node: node.failing)

    def warning_checks(self) -> List[Tuple[str, List[str]]]:
        return self._nodes_by_check(lambda node: node.warning)

    def _nodes_by_check(self, ids_of: Callable[[NodeRecord], Tuple[str, ...]]) -> List[Tuple[str, List[str]]]:
        by_check: Dict[str, List[str]] = {}
        for node in self.nodes:
            for check_id in ids_of(node):
                by_check.setdefault(check_id, []).append(node.name)
        return sorted(by_check.items(), key=lambda item: (-len(item[1]), item[0]))

    def drift(self) -> List[Drift]:
        """Every inventory field on which the nodes disagree (a node that could not read a field is not
        counted for it)."""
        result: List[Drift] = []
        for index, name in enumerate(self.fields):
            if name in NOT_DRIFT:
                continue
            values: Dict[Any, List[str]] = {}
            for node in self.nodes:
                value = node.inventory[index] if index < len(node.inventory) else None
                if value is not None:
                    values.setdefault(value, []).append(node.name)
            if len(values) < 2:
                continue
            ranked = sorted(values.items(), key=lambda item: (-len(item[1]), str(item[0])))
            majority, majority_nodes = ranked[0]
            result.append(Drift(name, majority, len(majority_nodes), [(v, n) for v, n in ranked[1:]]))
        return result

    def inventory_of(self, node: NodeRecord) -> Dict[str, Any]:
        return {name: node.inventory[i] if i < len(node.inventory) else None for i, name in enumerate(self.fields)}

    def exit_code(self) -> int:
        """2 when no report was read; else 1 when a node fails or an input could not be read
        (:mod:`npudoctor.model.inputs`); else 0."""
        if not self.nodes:
            return inputs.EXIT_NOTHING_READABLE
        return inputs.exit_code(1 if any(node.failing for node in self.nodes) else 0, len(self.errors))


class FleetInputError(InputError):
    """No input could be read at all: one line for the user."""


def _mapping(document: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = document.get(key)
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class _Builder:
    def __init__(self, replay: Optional[Callable[[str], Dict[str, Any]]],
                 progress: Optional[Callable[[int], None]] = None) -> None:
        self.view = FleetView()
        self.progress = progress
        self.field_index: Dict[str, int] = {}
        self.by_name: Dict[str, int] = {}  # the host name as the report wrote it -> its node
        self.shown_as: Dict[str, str] = {}  # a cleaned name -> the first written name shown so
        self.alike: Set[str] = set()  # cleaned names that several written names share
        # One object per distinct text (50,000 nodes share a few strings), cleaned once: every string a report
        # brings is someone else's text, redacted and without control characters before any output sees it.
        self.values: Dict[str, str] = {}
        self.replay = replay

    def add(self, document: Any, source: str) -> None:
        try:
            check_report(document)
        except ReportShapeError as exc:
            self.view.errors.append((source, str(exc)))
            return
        self.view.reports_read += 1
        if self.progress is not None and self.view.reports_read % 200 == 0:
            self.progress(self.view.reports_read)
        findings = document.get("findings")
        failing: Dict[str, None] = {}
        warning: Dict[str, None] = {}
        chips: Dict[Tuple[str, str], None] = {}
        titles = self.view.titles
        for finding in findings if isinstance(findings, list) else ():
            # Most findings pass or skip: one lookup decides (this loop runs 60 times per report).
            status = finding.get("status") if type(finding) is dict else None
            if status not in NOTABLE:
                continue
            check_id = self._text(str(finding.get("id", "?")))
            (warning if status == "warn" else failing)[check_id] = None
            subject = finding.get("subject")
            if isinstance(subject, str) and subject.startswith("npu:") and len(chips) < MAX_CHIPS_PER_NODE:
                chips[(check_id, self._text(subject))] = None
            if check_id not in titles:
                titles[check_id] = self._text(str(finding.get("title", "")))
        summary = _mapping(document, "summary")
        counts = tuple(_count(summary.get(k)) for k in ("pass", "warn", "fail", "skip", "error"))
        inventory, host = _mapping(document, "inventory"), _mapping(document, "host")
        written = str(inventory.get("hostname") or host.get("hostname") or source)
        name = one_line(self._text(written))
        started = self._text(str(_mapping(document, "run").get("started") or ""))
        record = NodeRecord(name, source, started, tuple(failing), tuple(warning),
                            counts, self._inventory_tuple(inventory), tuple(chips))  # type: ignore[arg-type]
        previous = self.by_name.get(written)
        if previous is None:
            if self.shown_as.setdefault(name, written) != written:
                self.alike.add(name)
            self.by_name[written] = len(self.view.nodes)
            self.view.nodes.append(record)
        elif started >= self.view.nodes[previous].started:
            self.view.nodes[previous] = record

    def finish(self) -> FleetView:
        """The view, each node whose cleaned name another node shares named with its report as well."""
        if self.alike:
            self.view.nodes = [node._replace(name=f"{node.name} ({one_line(clean(node.source))})")
                               if node.name in self.alike else node for node in self.view.nodes]
        return self.view

    def _inventory_tuple(self, inventory: Mapping[str, Any]) -> Tuple[Any, ...]:
        flat = flatten(inventory)
        slots: List[Any] = [None] * len(self.field_index)
        for key, value in flat.items():
            if value is None or key in NOT_KEPT or isinstance(value, dict):  # {} is no value to compare
                continue
            index = self.field_index.get(key)
            if index is None:
                if len(self.view.fields) >= MAX_FLEET_FIELDS:  # reports that each bring new keys: bounded
                    self.view.fields_not_compared += 1
                    continue
                index = self.field_index[key] = len(self.view.fields)
                self.view.fields.append(one_line(self._text(key)))
                slots.append(None)
            if isinstance(value, list):
                value = ",".join(map(str, value))
            if isinstance(value, str):
                value = self._text(value)
            slots[index] = value
        while slots and slots[-1] is None:
            slots.pop()
        return tuple(slots)

    def _text(self, text: str) -> str:
        cleaned = self.values.get(text)
        if cleaned is None:
            cleaned = self.values[text] = clean(text)
        return cleaned

    # -- inputs ------------------------------------------------------------------------------------------
    def read_path(self, path: str) -> None:
        """One input named on the command line (a link there is refused: the one link rule, model.inputs)."""
        if inputs.is_named_link(path):
            self.view.errors.append((path, inputs.NAMED_LINK))
            return
        self._read_entry(path)

    def _read_entry(self, path: str) -> None:
        try:
            info = os.stat(path)
        except OSError as exc:
            self.view.errors.append((path, exc.strerror or str(exc)))
            return
        if stat.S_ISDIR(info.st_mode):
            if os.path.isfile(os.path.join(path, "manifest.json")):
                self._read_bundle(path)
            else:
                self._read_folder(path)
        elif not stat.S_ISREG(info.st_mode):
            self.view.errors.append((path, "not a regular file (a FIFO, device or socket is never read)"))
        elif path.endswith(BUNDLE_SUFFIXES):
            self._read_archive(path)
        elif info.st_size > MAX_REPORT_BYTES:
            self.view.errors.append((path, f"larger than {MAX_REPORT_BYTES} bytes: not a report"))
        else:
            self._read_report_file(path)

    def _read_folder(self, folder: str) -> None:
        for dirpath, dirnames, filenames in os.walk(folder):
            # A link met in the walk, to a folder or a file, is not followed (the one link rule, model.inputs).
            for name in sorted(n for n in dirnames if os.path.islink(os.path.join(dirpath, n))):
                self.view.errors.append((os.path.join(dirpath, name), inputs.WALKED_LINK))
            dirnames[:] = sorted(d for d in dirnames if not os.path.islink(os.path.join(dirpath, d)))
            bundles = [d for d in dirnames if os.path.isfile(os.path.join(dirpath, d, "manifest.json"))]
            for name in bundles:
                self._read_bundle(os.path.join(dirpath, name))
            dirnames[:] = [d for d in dirnames if d not in bundles]
            for name in sorted(filenames):
                if name.endswith(".json") or name.endswith(BUNDLE_SUFFIXES):
                    path = os.path.join(dirpath, name)
                    if os.path.islink(path):
                        self.view.errors.append((path, inputs.WALKED_LINK))
                    else:
                        self._read_entry(path)

    def _read_report_file(self, path: str) -> None:
        from npudoctor.probes.safe_open import UnsafeFile, read_file

        try:  # the safe opener: a file swapped for a FIFO after the stat still cannot block the open
            data = read_file(path, MAX_REPORT_BYTES, whole=True).data
        except UnsafeFile as exc:
            self.view.errors.append((path, str(exc)[len(exc.path) + 2:]))
            return
        self._add_bytes(data, path)

    def _add_bytes(self, data: bytes, source: str) -> None:
        if len(data) > MAX_REPORT_BYTES:
            self.view.errors.append((source, f"larger than {MAX_REPORT_BYTES} bytes: not a report"))
            return
        try:
            document = jsondoc.loads(data, "")
        except jsondoc.JsonDocumentError as exc:
            self.view.errors.append((source, f"not JSON ({str(exc)[2:][:100]})"))
            return
        self.add(document, source)

    def _read_archive(self, path: str) -> None:
        """A bundle (manifest.json inside) is replayed; any other tar is read as an archive of reports, one
        member at a time within the bundle reader's caps (member count, uncompressed size, header size)."""
        import zlib

        from npudoctor.probes.bundle import BundleError, iter_archive

        is_bundle = False
        try:
            for name, member, tar in iter_archive(path):
                if not member.isfile():
                    continue
                if name == "manifest.json":
                    is_bundle = True
                    break
                if not name.endswith(".json"):
                    continue
                source = f"{path}:{member.name}"
                if member.size > MAX_REPORT_BYTES:
                    self.view.errors.append((source, f"larger than {MAX_REPORT_BYTES} bytes: not a report"))
                    continue
                extracted = tar.extractfile(member)
                if extracted is not None:
                    self._add_bytes(extracted.read(MAX_REPORT_BYTES + 1), source)
        except BundleError as exc:
            self.view.errors.append((path, f"not a readable archive: {str(exc)[len(path) + 2:]}"))
            return
        except (tarfile.TarError, EOFError, OSError, ValueError, zlib.error) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
            self.view.errors.append((path, f"not a readable archive: {reason}"))
            return
        if is_bundle:
            self._read_bundle(path)

    def _read_bundle(self, path: str) -> None:
        if self.replay is None:
            self.view.errors.append((path, "a bundle, and bundles are not replayed here"))
            return
        try:
            document = self.replay(path)
        except Exception as exc:  # BundleError, UsageError: the reason is one line
            self.view.errors.append((path, str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__))
            return
        self.add(document, path)


def replay_bundle(path: str) -> Dict[str, Any]:
    """The report of ``check --from PATH`` (default profile), as the JSON document."""
    from npudoctor import api

    return api.run_checks(api.make_runner(bundle=path)).to_dict()


def build(paths: Sequence[str], replay: Optional[Callable[[str], Dict[str, Any]]] = replay_bundle,
          progress: Optional[Callable[[int], None]] = None) -> FleetView:
    """Read every report and bundle under ``paths`` (``progress(n)`` hears every 200th report). Unreadable
    inputs are listed in ``errors``; with no readable report at all, :class:`FleetInputError`."""
    builder = _Builder(replay, progress)
    for path in paths:
        builder.read_path(path)
    if not builder.view.nodes:
        reasons = "; ".join(f"{p}: {r}" for p, r in builder.view.errors[:3]) or "no report found"
        raise FleetInputError(f"no readable npudoctor report in {', '.join(paths)} ({reasons})")
    return builder.finish()


def from_documents(documents: Iterable[Tuple[Dict[str, Any], str]]) -> FleetView:
    """A view of report documents already in memory (the demo fleet)."""
    builder = _Builder(None)
    for document, source in documents:
        builder.add(document, source)
    return builder.finish()


# -- output ------------------------------------------------------------------------------------------------
# What a report brought was cleaned as it was read (_Builder._text); the outputs add what their format needs:
# text and CSV keep a value on one line, CSV never starts a formula (npudoctor.untrusted).
def to_dict(view: FleetView) -> Dict[str, Any]:
    return {
        "schema": SCHEMA,
        "summary": {**to_dict_summary(view), "unreadable": len(view.errors)},
        "failing_checks": [{"id": check_id, "title": view.titles.get(check_id, ""), "nodes": nodes}
                           for check_id, nodes in view.failing_checks()],
        "warning_checks": [{"id": check_id, "title": view.titles.get(check_id, ""), "nodes": nodes}
                           for check_id, nodes in view.warning_checks()],
        "drift": [{"field": d.field, "majority": d.majority, "majority_nodes": d.majority_count,
                   "others": [{"value": v, "nodes": n} for v, n in d.others]} for d in view.drift()],
        "nodes": [{"name": n.name, "source": n.source, "verdict": n.verdict, "failing": list(n.failing),
                   "warning": list(n.warning), "inventory": view.inventory_of(n),
                   "chips": [{"id": check_id, "subject": subject} for check_id, subject in n.chips]}
                  for n in view.nodes],
        "unreadable": [{"path": clean(p), "reason": clean(r)} for p, r in view.errors],
        **({"fields_not_compared": view.fields_not_compared} if view.fields_not_compared else {}),
    }


def render_json(view: FleetView) -> str:
    from npudoctor.report import json_report

    return json_report.document_text(to_dict(view))


def render_csv(view: FleetView) -> str:
    """One row per node: name, verdict, failing and warning check IDs, then every inventory field."""
    import csv

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(name) for name in ["node", "verdict", "failing", "warning", "source", *view.fields]])
    for node in view.nodes:
        inventory = view.inventory_of(node)
        cells = [node.name, node.verdict, " ".join(node.failing), " ".join(node.warning), node.source,
                 *("" if inventory[f] is None else inventory[f] for f in view.fields)]
        writer.writerow([csv_cell(cell) for cell in cells])
    return buffer.getvalue()


def _names(nodes: Sequence[str], limit: int = 4) -> str:
    shown = ", ".join(nodes[:limit])
    return shown + (f" (+{len(nodes) - limit} more)" if len(nodes) > limit else "")


def _with_chips(with_chips: Mapping[str, NodeRecord], check_id: str, nodes: Sequence[str],
                limit: int = 4) -> List[str]:
    """The first nodes' names, each with (up to two of) the chips the check named on it ("atlas-3 npu:5/chip:0")."""
    def shown(name: str) -> str:
        record = with_chips.get(name)
        subjects = [subject for found, subject in record.chips if found == check_id] if record else []
        return " ".join([name, *subjects[:2]])
    return [shown(name) for name in nodes[:limit]] + list(nodes[limit:])


def text_lines(view: FleetView) -> Iterator[str]:
    summary = to_dict_summary(view)
    yield (f"npudoctor fleet: {summary['nodes']} nodes ({summary['reports']} reports): {summary['ok']} ok, "
           f"{summary['warn']} warn only, {summary['fail']} failing")
    failing = view.failing_checks()
    with_chips = {node.name: node for node in view.nodes if node.chips}
    yield ""
    yield "failing checks" if failing else "failing checks: none"
    for check_id, nodes in failing:
        yield f"  {check_id:<8}{len(nodes):>6} node(s)  {view.titles.get(check_id, '')}"
        yield f"          {_names(_with_chips(with_chips, check_id, nodes))}"
    warning = view.warning_checks()
    if warning:
        yield ""
        yield "warnings"
        for check_id, nodes in warning:
            yield f"  {check_id:<8}{len(nodes):>6} node(s)  {view.titles.get(check_id, '')}"
            yield f"          {_names(_with_chips(with_chips, check_id, nodes))}"
    drift = view.drift()
    yield ""
    yield "version drift" if drift else "version drift: none (every node agrees on every inventory field)"
    for item in drift:
        yield f"  {item.field}: {item.majority} on {item.majority_count} node(s)"
        for value, nodes in item.others:
            yield f"      {value} on {len(nodes)}: {_names(nodes)}"
    if view.fields_not_compared:
        yield ""
        yield (f"{view.fields_not_compared} inventory value(s) not compared: their fields came after the first "
               f"{MAX_FLEET_FIELDS} distinct ones")
    if view.errors:
        yield ""
        yield f"unreadable ({len(view.errors)})"
        for path, reason in view.errors[:20]:
            yield f"  {path}: {reason}"
        if len(view.errors) > 20:
            yield f"  (+{len(view.errors) - 20} more)"


def to_dict_summary(view: FleetView) -> Dict[str, int]:
    verdicts = Counter(node.verdict for node in view.nodes)
    return {"nodes": len(view.nodes), "reports": view.reports_read, "ok": verdicts["ok"], "warn": verdicts["warn"],
            "fail": verdicts["fail"]}


def render_text(view: FleetView) -> str:
    return "\n".join(one_line(clean(line)) for line in text_lines(view)) + "\n"
