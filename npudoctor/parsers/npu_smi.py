"""Pure reader of ``npu-smi info`` text (the main table), and of the ways ``npu-smi`` fails.

``npu-smi`` is the Ascend counterpart of ``nvidia-smi``. Its table has two text rows per chip, boxed by
``|``; the third box holds several whitespace-separated sub-fields whose names (and number) depend on the
driver version and the chip. So the table is read by structure: cells split on ``|``, sub-fields named by the
header rows, chips delimited by ``+---``/``+===`` separators; never by character columns. A real 910B2C
capture (nputop test fixture, npu-smi 23.0.2.1; note the lost space in ``20701/ 65536``):

>>> table = parse_npu_smi_info('''
... +------------------------------------------------------------------------------------------------+
... | npu-smi 23.0.2.1                 Version: 23.0.2.1                                             |
... +---------------------------+---------------+----------------------------------------------------+
... | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
... | Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
... +===========================+===============+====================================================+
... | 0     910B2C              | OK            | 88.6        51                0    / 0             |
... | 0                         | 0000:5A:00.0  | 0           0    / 0          20701/ 65536         |
... +===========================+===============+====================================================+
... +---------------------------+---------------+----------------------------------------------------+
... | NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
... +===========================+===============+====================================================+
... | 0       0                 | 124528        | python3.8                | 17400                   |
... +---------------------------+---------------+----------------------------------------------------+
... ''')
>>> table.tool_version, table.driver_version
('23.0.2.1', '23.0.2.1')
>>> chip = table.chips[0]
>>> chip.npu_id, chip.name, chip.health, chip.bus_id, chip.power_w, chip.hbm_used_mib, chip.hbm_total_mib
(0, '910B2C', 'OK', '0000:5A:00.0', 88.6, 20701, 65536)
>>> table.processes[0].pid, table.processes[0].name, table.processes[0].memory_mib
(124528, 'python3.8', 17400)

A failed run is recognised, not parsed (real capture, vllm-ascend issue 632):

>>> recognise_failure('''DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)
... dcmi model initialized failed, because the device is used. ret is -8020''').code
-8020
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from npudoctor.errors import InputError
from npudoctor.parsers.markdown import row_cells

# What npu-smi prints where a chip has no reading (310P power, second die of an A3 NPU, SoC Bus-Id).
_ABSENT = {"NA", "N/A", "-", "--", ""}
_BANNER = re.compile(r"npu-smi\s+(?P<tool>\S+)(?:\s+Version:\s*(?P<driver>\S+))?", re.IGNORECASE)
# The banner pasted outside its box (`npu-smi 25.5.0   Version: 25.5.0`); a version, not `npu-smi info`.
_BARE_BANNER = re.compile(r"^npu-smi\s+(?P<tool>\d[\w.-]*)\s+Version:\s*(?P<driver>\S+)", re.IGNORECASE)
_IDLE = re.compile(r"No running processes found in NPU\s+([0-9]{1,9})(?![0-9])", re.IGNORECASE)
# A reading as npu-smi prints one (ASCII digits, an optional fraction or exponent); anything else is no reading.
_READING = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?\Z")
_MAX_NUMBER_CHARS = 32
#: Larger than any reading a chip gives (MiB, W, C, %, ids, pids): a bigger one is a damaged cell.
MAX_READING = 1e18
# A key of `npu-smi info -t ...` output ("PCIe Bus Info", "Aicore Usage Rate(%)"); table rows are not keys.
_KEY = re.compile(r"^[A-Za-z][\w .()%/-]*$")
# One sub-field of the third box: a "used / total" pair (the space may be missing: "20701/ 65536") or a word.
_SUBFIELD = re.compile(r"[^\s/]+\s*/\s*[^\s/]+|\S+")
# "+---+===+", also with a "|" at an end ("|====+===|") as some versions and pastes have it.
_SEPARATOR = re.compile(r"^(?:\+[-=+|]*|\|[=+]+\|?)$")
# Sub-field header names (lower-case prefixes) -> our field names (units in the names; MB as printed is MiB).
_HEADER_FIELDS: Sequence[Tuple[str, str]] = (
    ("power", "power_w"), ("temp", "temp_c"), ("hugepages", "hugepages"),
    ("aicore", "aicore_pct"), ("memory", "memory"), ("hbm", "hbm"),
    # The 950 layout names its compute utilisation "NPU Util(%)", where older layouts print AICore(%).
    ("npu util", "aicore_pct"),
)
_NAME_GAP = re.compile(r"\s{2,}")
# The Health words npu-smi prints (a word cut short by a paste is none of them); what each means for a check
# is in checks/npu_smi_errors.yaml's `health`, which a test keeps in step with this set.
HEALTH_WORDS = frozenset({"OK", "Warning", "Alarm", "Critical", "UNKNOWN"})
# Used when a header row has no third box (a hand-edited paste): the layout most nodes print.
_DEFAULT_ROW1 = ("power_w", "temp_c", "hugepages")
_DEFAULT_ROW2 = ("aicore_pct", "memory", "hbm")


class NpuSmiParseError(InputError, ValueError):
    """The text is not an ``npu-smi info`` table with at least one chip row (one-line reason)."""


@dataclass(frozen=True)
class NpuSmiChip:
    """One chip (die) of one NPU, as its two table rows show it; None where the layout has no such value."""

    npu_id: int
    chip_id: Optional[int]
    name: str
    health: str
    bus_id: Optional[str] = None
    power_w: Optional[float] = None
    temp_c: Optional[float] = None
    aicore_pct: Optional[float] = None
    memory_used_mib: Optional[int] = None
    memory_total_mib: Optional[int] = None
    hbm_used_mib: Optional[int] = None
    hbm_total_mib: Optional[int] = None
    hugepages_used: Optional[int] = None
    hugepages_total: Optional[int] = None
    device_id: Optional[int] = None  # "Chip Device" layouts (310, 310P, 310B)
    phy_id: Optional[int] = None  # "Chip Phy-ID" layout (A3: two dies per NPU)

    JSON_FIELDS = ("npu_id", "chip_id", "name", "health", "bus_id", "power_w", "temp_c", "aicore_pct",
                   "memory_used_mib", "memory_total_mib", "hbm_used_mib", "hbm_total_mib")

    @property
    def subject(self) -> str:
        return f"npu:{self.npu_id}" if self.chip_id is None else f"npu:{self.npu_id}/chip:{self.chip_id}"

    def to_dict(self) -> Dict[str, Any]:
        return {name: getattr(self, name) for name in self.JSON_FIELDS}


@dataclass(frozen=True)
class NpuSmiProcess:
    npu_id: int
    chip_id: Optional[int]
    pid: int
    name: str  # may be empty: npu-smi prints no name for some processes (seen on A2/A3)
    memory_mib: Optional[int]

    def to_dict(self) -> Dict[str, Any]:
        return {"npu_id": self.npu_id, "chip_id": self.chip_id, "pid": self.pid, "name": self.name,
                "memory_mib": self.memory_mib}


@dataclass(frozen=True)
class NpuSmiTable:
    tool_version: Optional[str]
    driver_version: Optional[str]
    chips: Tuple[NpuSmiChip, ...]
    processes: Tuple[NpuSmiProcess, ...] = ()
    has_process_section: bool = False
    idle_npus: Tuple[int, ...] = ()  # "No running processes found in NPU n"
    partial: bool = False  # rows elided ("...") or cut off: counts are lower bounds
    notes: Tuple[str, ...] = ()

    @property
    def npu_ids(self) -> List[int]:
        return sorted({c.npu_id for c in self.chips})

    def to_dict(self) -> Dict[str, Any]:
        return {
            "version": {"tool": self.tool_version, "driver": self.driver_version},
            "chips": [c.to_dict() for c in self.chips],
            "processes": [p.to_dict() for p in self.processes],
        }


@dataclass(frozen=True)
class NpuSmiFailure:
    """A recognised way ``npu-smi`` fails instead of printing its table."""

    kind: str  # "dcmi" (DCMI init failed, with ``code``), "missing-library" (``library``), "no-such-file"
    line: str  # the line as npu-smi (or the shell) printed it
    code: Optional[int] = None
    library: Optional[str] = None


_DCMI = re.compile(r"dcmi\b.*?\bret(?:\s+is|\s*code)?\s*[:=]?\s*(-?[0-9]{1,12})(?![0-9])", re.IGNORECASE)
_MISSING_LIBRARY = re.compile(r"error while loading shared libraries:\s*([^\s:]+)\s*:")
_NO_SUCH_FILE = re.compile(r"npu-smi:\s*No such file or directory")


def recognise_failure(text: str) -> Optional[NpuSmiFailure]:
    """The known failure printed in ``text`` (stdout and stderr of ``npu-smi info``), or None.

    >>> recognise_failure("npu-smi: error while loading shared libraries: libc_sec.so: "
    ...                   "cannot open shared object file: No such file or directory").library
    'libc_sec.so'
    >>> recognise_failure("bash: /usr/local/bin/npu-smi: No such file or directory").kind
    'no-such-file'
    """
    for raw in text.splitlines():
        line = raw.strip()
        match = _DCMI.search(line)
        if match:
            return NpuSmiFailure("dcmi", line, code=int(match.group(1)))
        match = _MISSING_LIBRARY.search(line)
        if match:
            return NpuSmiFailure("missing-library", line, library=match.group(1))
        if _NO_SUCH_FILE.search(line):
            return NpuSmiFailure("no-such-file", line)
    return None


def parse_colon_sections(text: str) -> List[Dict[str, str]]:
    """``npu-smi info -t board|health|usages|common|memory|ecc`` and ``-l``: ``Key : value`` lines, indented
    by a TAB or spaces, in sections separated by blank lines (card part, then chip part).

    Real ``npu-smi info -i <id> -c 0 -t health`` output (MindCluster doc):

    >>> parse_colon_sections(" Health Status                  : OK\\n"
    ...                  " Error Code                     : NA\\n"
    ...                  " Error Information              : NA\\n")
    [{'Health Status': 'OK', 'Error Code': 'NA', 'Error Information': 'NA'}]
    """
    sections: List[Dict[str, str]] = []
    current: Dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            if current:
                sections.append(current)
                current = {}
            continue
        key, colon, value = line.partition(":")
        if colon and _KEY.match(key.strip()):
            current[key.strip()] = value.strip()
    if current:
        sections.append(current)
    return sections


# -- `npu-smi info -t <topic>` and `npu-smi info -m` ------------------------------------------------------------
# The keys that say which NPU / chip a block of `-t` output is about (not readings).
_ID_KEYS = {"npu id": "npu_id", "chip id": "chip_id"}
_UNIT = re.compile(r"\([^)]*\)")
# An Ascend device fault code as npu-smi, the device plugin and the logs print it: 8 hex digits, 0x optional.
FAULT_CODE = re.compile(r"(?<![0-9A-Za-z])(?:0[xX])?([0-9A-Fa-f]{8})(?![0-9A-Za-z])")


def detail_key(key: str) -> str:
    """A ``-t`` key in the form lookups use: lower case, units dropped, single spaces.

    >>> detail_key("Aicore curFreq(MHZ)"), detail_key("NPU Real-time Power(W)")
    ('aicore curfreq', 'npu real-time power')
    """
    return " ".join(_UNIT.sub(" ", key).lower().split())


@dataclass(frozen=True)
class NpuSmiDetail:
    """One block of ``npu-smi info -t <topic>`` output: what it says about one chip (``chip_id`` None: the
    whole NPU, as ``-t board -i N`` prints it). ``fields`` keeps the keys as printed, in order."""

    npu_id: Optional[int]
    chip_id: Optional[int]
    fields: Tuple[Tuple[str, str], ...]

    def text(self, *names: str) -> Optional[str]:
        """The value of the first key whose :func:`detail_key` is one of ``names``; None where absent or NA."""
        wanted = set(names)
        for key, value in self.fields:
            if detail_key(key) in wanted:
                return None if value in _ABSENT else value
        return None

    def number(self, *names: str) -> Optional[float]:
        value = self.text(*names)
        return None if value is None else _number(value)

    def matching(self, pattern: re.Pattern[str]) -> List[Tuple[re.Match[str], str]]:
        """(match, value) of every key whose :func:`detail_key` matches ``pattern`` in full."""
        found = []
        for key, value in self.fields:
            match = pattern.fullmatch(detail_key(key))
            if match:
                found.append((match, value))
        return found

    def to_dict(self) -> Dict[str, Any]:
        return {"npu_id": self.npu_id, "chip_id": self.chip_id, "fields": dict(self.fields)}


def parse_npu_smi_detail(text: str, npu_id: Optional[int] = None,
                         chip_id: Optional[int] = None) -> List[NpuSmiDetail]:
    """Parse ``npu-smi info -t health|ecc|board|common|memory|usages|temp|power ...`` by structure: ``Key : value``
    lines (indented by a TAB or spaces; quoted or prompt lines around them are ignored) in blocks separated by
    blank lines. A block holding only ``NPU ID`` and ``Chip Count`` names the card for the blocks after it; a
    block's ``Chip ID`` (first or last, as npu-smi prints it) names its chip; a key met twice in one block starts
    the next chip (a paste that lost its blank lines). ``npu_id``/``chip_id`` (the command's ``-i``/``-c``) name
    the chip where the text does not (``-t health -i 3 -c 0`` prints no ids).

    Real ``npu-smi info -i 1 -t ecc`` (MindCluster doc, shortened):

    >>> (chip,) = parse_npu_smi_detail(
    ...     "NPU ID                      : 1\\n"
    ...     "Chip Count                  : 1\\n"
    ...     "\\n"
    ...     "HBM Double Bit Error Count  : 0\\n"
    ...     "HBM Double Bit Isolated Pages Count      : 0\\n"
    ...     "Chip ID                     : 0\\n")
    >>> chip.npu_id, chip.chip_id, chip.number("hbm double bit isolated pages count")
    (1, 0, 0)

    Raises :class:`NpuSmiParseError` when no ``Key : value`` line is there (a failure message, another format).
    """
    blocks: List[List[Tuple[str, str]]] = [[]]
    for raw in text.splitlines():
        line = _clean(raw)
        key, colon, value = line.partition(":")
        key = key.strip()
        if not line.strip():
            if blocks[-1]:
                blocks.append([])
        elif colon and len(key) <= 80 and _KEY.match(key):
            blocks[-1].append((key, value.strip()))
    blocks = [block for block in blocks if block]
    if not blocks:
        failure = recognise_failure(text)
        if failure is not None:
            raise NpuSmiParseError(f"npu-smi printed an error instead of its report: {failure.line}")
        raise NpuSmiParseError("not `npu-smi info -t ...` output: no `Key : value` line")
    details: List[NpuSmiDetail] = []
    card = npu_id
    for block in blocks:
        ids: Dict[str, Optional[int]] = {}
        readings: List[Tuple[str, str]] = []
        seen: Set[str] = set()  # normalised keys of `readings`: a set keeps a hostile block linear
        for key, value in block:
            normal = detail_key(key)
            name = _ID_KEYS.get(normal)
            if (name and name in ids) or normal in seen:
                # the next chip of a block printed without blank lines
                if readings:
                    details.append(_detail(ids, readings, card, chip_id))
                    card = ids.get("npu_id", card)
                ids, readings, seen = {}, [], set()
            if name:
                ids[name] = _integer(value)
            elif normal != "chip count":
                readings.append((key, value))
                seen.add(normal)
        if "npu_id" in ids:
            card = ids["npu_id"]
        if readings:
            details.append(_detail(ids, readings, card, chip_id))
    return details


def _detail(ids: Mapping[str, Optional[int]], readings: Sequence[Tuple[str, str]], card: Optional[int],
            chip_id: Optional[int]) -> NpuSmiDetail:
    return NpuSmiDetail(ids.get("npu_id", card), ids.get("chip_id", chip_id), tuple(readings))


@dataclass(frozen=True)
class ChipIds:
    """One chip as ``npu-smi info -m`` names it: NPU id and chip id (npu-smi's), logic id (what
    ``ASCEND_RT_VISIBLE_DEVICES`` counts; None for an MCU row), physical id where a Chip Phy-ID column is printed."""

    npu_id: int
    chip_id: int
    logic_id: Optional[int]
    name: str
    phy_id: Optional[int] = None


_MAPPING_COLUMNS = {"npu id": "npu_id", "chip id": "chip_id", "chip logic id": "logic_id",
                    "chip phy-id": "phy_id", "chip phy id": "phy_id", "chip name": "name"}


def parse_npu_smi_mapping(text: str) -> List[ChipIds]:
    """Parse ``npu-smi info -m``: a header row (``NPU ID  Chip ID  Chip Logic ID  Chip Name``, names separated by
    runs of spaces) and one row per chip; the last column (the name) may hold spaces. Rows whose logic id is
    ``-`` (the MCU of an Atlas 800I A2) are kept with ``logic_id`` None.

    >>> parse_npu_smi_mapping(
    ...     "  NPU ID     Chip ID     Chip Logic ID     Chip Name\\n"
    ...     "  0          0           0                 Ascend 910B4\\n"
    ...     "  0          1           -                 Mcu\\n")[0]
    ChipIds(npu_id=0, chip_id=0, logic_id=0, name='Ascend 910B4', phy_id=None)
    """
    columns: List[str] = []
    chips: List[ChipIds] = []
    for raw in text.splitlines():
        line = _clean(raw).strip()
        if not columns:
            names = [detail_key(name) for name in _NAME_GAP.split(line)]
            if "npu id" in names and "chip logic id" in names:
                columns = [_MAPPING_COLUMNS.get(name, "?") for name in names]
            continue
        cells = line.split(None, len(columns) - 1)
        if len(cells) != len(columns):
            continue
        row = dict(zip(columns, cells))
        npu, chip = _integer(row.get("npu_id", "")), _integer(row.get("chip_id", ""))
        if npu is None or chip is None:
            continue
        chips.append(ChipIds(npu, chip, _integer(row.get("logic_id", "-")), row.get("name", "").strip(),
                             _integer(row.get("phy_id", "-"))))
    if not chips:
        raise NpuSmiParseError("not `npu-smi info -m` output: no 'NPU ID ... Chip Logic ID' header with chip rows")
    return chips


def fault_codes(value: str) -> List[str]:
    """The device fault codes in an ``Error Code`` value, upper-case without ``0x``, once each, in order.

    >>> fault_codes("0x80e01801, 80CB8009 0x80E01801"), fault_codes("NA")
    (['80E01801', '80CB8009'], [])
    """
    return list(dict.fromkeys(match.group(1).upper() for match in FAULT_CODE.finditer(value)))


def _number(token: str) -> Optional[float]:
    """A reading as printed: int when it has no decimal point, float otherwise; None for NA / - / junk and for
    what no reading can be (``inf``, ``nan``, ``1e400``, a 4000-digit number, ``1_000``, non-ASCII digits).

    >>> [_number(t) for t in ("42", "75.3%", "0.", "1e3", "inf", "nan", "1e400", "9" * 40, "1_0", "NA")]
    [42, 75.3, 0.0, 1000.0, None, None, None, None, None, None]
    """
    token = token.strip().rstrip("%")
    if token in _ABSENT or len(token) > _MAX_NUMBER_CHARS or not _READING.match(token):
        return None
    if token.lstrip("+-").isdigit():
        value: float = int(token)
    else:
        value = float(token)
    return value if abs(value) <= MAX_READING else None  # also False for nan (refused by the pattern anyway)


def _integer(token: str) -> Optional[int]:
    value = _number(token)
    return int(value) if value is not None else None


def _pair(token: str) -> Tuple[Optional[int], Optional[int]]:
    if "/" not in token:
        return _integer(token), None
    used, total = token.split("/", 1)
    return _integer(used), _integer(total)


def _field_name(header: str) -> Optional[str]:
    lowered = header.lower()
    return next((name for prefix, name in _HEADER_FIELDS if lowered.startswith(prefix)), None)


def _field_names(cell: str) -> List[str]:
    """Header sub-field names (``Power(W)    Temp(C)    Hugepages-Usage(page)``) -> our names, in order.

    Names are separated by runs of spaces; a name may hold one space (``NPU Util(%)``), so a chunk is split
    on single spaces only when each of its words is a known name.
    """
    names: List[str] = []
    for chunk in _NAME_GAP.split(cell.strip()):
        words = chunk.split()
        if len(words) > 1 and all(_field_name(word) for word in words):
            names.extend(str(_field_name(word)) for word in words)
        elif chunk:
            names.append(_field_name(chunk) or "?" + chunk)
    return names


def _clean(line: str) -> str:
    # Pastes quote tables in Markdown ("> |...") or indent them; npu-smi pads some rows with trailing spaces.
    return re.sub(r"^\s*(?:>\s?)*", "", line).rstrip()


def _assign(fields: Dict[str, Any], names: Sequence[str], cell: str, where: str, notes: List[str]) -> None:
    values = _SUBFIELD.findall(cell)
    if len(values) != len(names) and values:
        notes.append(f"{where}: {len(values)} values under {len(names)} header names; read in order")
    for name, value in zip(names, values):
        if name in ("memory", "hbm", "hugepages"):
            used, total = _pair(value)
            fields[f"{name}_used" + ("" if name == "hugepages" else "_mib")] = used
            fields[f"{name}_total" + ("" if name == "hugepages" else "_mib")] = total
        elif name in ("power_w", "temp_c", "aicore_pct"):
            fields[name] = _number(value)


class _Builder:
    """Walks the lines once; keeps the layout learned from the header rows."""

    def __init__(self) -> None:
        self.tool: Optional[str] = None
        self.driver: Optional[str] = None
        self.row1_names: Sequence[str] = _DEFAULT_ROW1
        self.row2_names: Sequence[str] = _DEFAULT_ROW2
        self.second_id = "device_id"  # what the second number of the "Chip" cell is
        # Where the Health and Bus-Id cells are: 1 usually, 2 in the 950 layout ("NPU ID | Name | Health").
        self.health_at = 1
        self.bus_at = 1
        self.header_seen = False
        self.section = ""  # "", "chips", "processes"
        self.process_columns: Dict[str, int] = {}
        self.pending: Optional[Dict[str, Any]] = None  # row 1 of a chip, waiting for its row 2
        self.chips: List[NpuSmiChip] = []
        self.processes: List[NpuSmiProcess] = []
        self.idle: List[int] = []
        self.partial = False
        self.notes: List[str] = []
        self.done = False  # a second table begins (a paste of two runs): only the first is read

    # -- rows ----------------------------------------------------------------------------------------
    def row(self, cells: Sequence[str]) -> None:
        first = cells[0]
        if len(cells) == 1 and self.tool is None and (banner := _BANNER.search(first)):
            self.tool, self.driver = banner.group("tool"), banner.group("driver")
            return
        lowered = [cell.lower() for cell in cells]
        if first.split()[:1] == ["NPU"] and "health" in lowered:
            if self.chips or self.pending is not None:
                self.done = True
                self.notes.append("a second table follows the first; only the first is read")
                return
            self.header_seen, self.section = True, "chips"
            self.health_at = lowered.index("health")
            after = self.health_at + 1
            self.row1_names = _field_names(cells[after]) if len(cells) > after else _DEFAULT_ROW1
            return
        if "bus-id" in lowered:
            self.bus_at = lowered.index("bus-id")
            after = self.bus_at + 1
            self.row2_names = _field_names(cells[after]) if len(cells) > after else _DEFAULT_ROW2
            words = " ".join(cells[:self.bus_at]).split()
            is_phy = len(words) > 1 and words[1].lower().startswith("phy")
            self.second_id = "phy_id" if is_phy else "device_id"
            return
        if any(cell.lower().startswith("process id") for cell in cells):
            self.section = "processes"
            self.process_columns = {}
            for index, name in enumerate(lowered):
                if name.startswith("process id") and "pid" not in self.process_columns:
                    self.process_columns["pid"] = index
                elif name.startswith("process name"):
                    self.process_columns["name"] = index
                elif name.startswith("process memory"):
                    self.process_columns["memory"] = index
            return
        if self.section == "" and not self.header_seen and _looks_like_chip_row(cells):
            # A paste that starts at a chip's row border: no header rows to learn the layout from.
            self.section, self.partial = "chips", True
            self.notes.append("no header rows: read with the usual layout (Power Temp Hugepages / AICore "
                              "Memory HBM); chips above the paste may be missing")
        if self.section == "processes":
            self.process_row(cells)
        elif self.section == "chips":
            self.chip_row(cells)

    def chip_row(self, cells: Sequence[str]) -> None:
        if self.pending is None:
            words = " ".join(cells[:self.health_at]).split()
            if not words or _integer(words[0]) is None:
                self.notes.append(f"skipped a row that is no chip row: |{'|'.join(cells)}|")
                return
            if len(cells) <= self.health_at or not cells[self.health_at]:
                self.partial = True
                self.notes.append(f"NPU {words[0]}: row cut off before its health; that chip is left out")
                return
            if len(cells) < self.health_at + 2:  # cut after the health: what is visible is read
                if cells[self.health_at] not in HEALTH_WORDS:  # the health cell itself may be cut short
                    self.partial = True
                    self.notes.append(f"NPU {words[0]}: row cut off in its health; that chip is left out")
                    return
                self.partial = True
                self.notes.append(f"NPU {words[0]}: row cut off; its readings are missing")
                cells = [*cells, ""]
            fields: Dict[str, Any] = {"npu_id": _integer(words[0]), "name": " ".join(words[1:]),
                                      "health": cells[self.health_at]}
            _assign(fields, self.row1_names, cells[self.health_at + 1], f"NPU {words[0]}", self.notes)
            self.pending = fields
            return
        fields = self.pending
        self.pending = None
        words = " ".join(cells[:self.bus_at]).split()
        fields["chip_id"] = _integer(words[0]) if words else None
        if len(words) > 1:
            fields[self.second_id] = _integer(words[1])
        if len(cells) > self.bus_at:
            bus_id = cells[self.bus_at]
            fields["bus_id"] = None if bus_id in _ABSENT else bus_id
        if len(cells) > self.bus_at + 1:
            _assign(fields, self.row2_names, cells[self.bus_at + 1],
                    f"NPU {fields['npu_id']} chip {fields['chip_id']}", self.notes)
        else:
            self.partial = True
            self.notes.append(f"NPU {fields['npu_id']}: second row cut off; its readings are missing")
        self.chips.append(NpuSmiChip(**fields))

    def end_of_chip(self) -> None:
        """A separator: a chip whose second row never came still counts, with what its first row said."""
        if self.pending is not None:
            fields, self.pending = self.pending, None
            self.partial = True
            self.notes.append(f"NPU {fields['npu_id']}: only the first row of a chip is present")
            self.chips.append(NpuSmiChip(chip_id=None, **fields))

    def process_row(self, cells: Sequence[str]) -> None:
        idle = _IDLE.search(cells[0])
        if idle:
            self.idle.append(int(idle.group(1)))
            return
        words = cells[0].split()
        pid_at = self.process_columns.get("pid", 1)
        npu_id = _integer(words[0]) if words else None
        if npu_id is None or len(cells) <= pid_at:
            return
        pid = _integer(cells[pid_at])
        if pid is None:
            return
        name_at, memory_at = self.process_columns.get("name", 2), self.process_columns.get("memory", 3)
        self.processes.append(NpuSmiProcess(
            npu_id=npu_id,
            chip_id=_integer(words[1]) if len(words) > 1 else None,
            pid=pid,
            name=cells[name_at] if len(cells) > name_at else "",
            memory_mib=_integer(cells[memory_at]) if len(cells) > memory_at else None,
        ))

    def table(self) -> NpuSmiTable:
        self.end_of_chip()
        if self.partial:
            self.notes.insert(0, "partial table: some rows are elided or cut off, so counts are lower bounds")
        return NpuSmiTable(self.tool, self.driver, tuple(self.chips), tuple(self.processes),
                           self.section == "processes", tuple(self.idle), self.partial, tuple(self.notes))


def _looks_like_chip_row(cells: Sequence[str]) -> bool:
    """The first row of a chip in the usual layout: ``| 0     910B3 | OK | 91.1  32  0 / 0 |``."""
    words = cells[0].split()
    return (len(cells) >= 2 and len(words) >= 2 and _integer(words[0]) is not None
            and cells[1].isalpha() and not cells[1].lower().startswith("health"))


def parse_npu_smi_info(text: str) -> NpuSmiTable:
    """Parse the ``npu-smi info`` table in ``text`` (noise lines around it are ignored).

    Raises :class:`NpuSmiParseError` when there is no chip row: empty text, another format, a failure
    message, or a table cut off before its first chip. A partial table with at least one chip row parses,
    with ``partial`` set and a note saying what was missing.
    """
    if not text.strip():
        raise NpuSmiParseError("empty input: no npu-smi output")
    builder = _Builder()
    for raw in text.splitlines():
        if builder.done:
            break
        line = _clean(raw)
        if not line:
            continue
        if _SEPARATOR.match(line):
            builder.end_of_chip()
            continue
        if line.startswith("|"):
            body = line.strip("| ")
            if body and set(body) == {"."}:
                builder.partial = True
                continue
            builder.row(row_cells(line))
            continue
        if builder.section == "chips" and set(line) == {"."}:
            builder.partial = True  # a doc author's "..." between chips
        elif builder.tool is None and (banner := _BARE_BANNER.match(line)):
            builder.tool, builder.driver = banner.group("tool"), banner.group("driver")
    table = builder.table()
    if table.chips:
        return table
    failure = recognise_failure(text)
    if failure is not None:
        raise NpuSmiParseError(f"npu-smi printed an error instead of its table: {failure.line}")
    if builder.header_seen:
        raise NpuSmiParseError("npu-smi table has a header but no chip row (truncated?)")
    if builder.tool is not None:
        raise NpuSmiParseError(f"npu-smi {builder.tool} banner but no table header and no chip row "
                               "(truncated?)")
    raise NpuSmiParseError("not an npu-smi info table (no 'NPU Name | Health' header row and no chip row)")
