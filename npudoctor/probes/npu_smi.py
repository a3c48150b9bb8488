"""Probes of the npu-smi stage: ``npu-smi info`` (the Ascend ``nvidia-smi``) and its per-chip sub-commands, each
with a time limit.

What each ``check --level`` asks npu-smi (each call takes up to seconds on a real node; a full per-chip report
of 8x910B3 took 5.4 s in nvitop's Ascend backend), N the NPUs, U the chips whose Health is not OK:

* level 1 (``npu_smi`` facts): ``npu-smi info`` and ``npu-smi info -m`` (started side by side), then for each
  of at most ``npu_smi.health_detail_max_chips`` chips not OK ``npu-smi info -t health -i N -c C`` and
  ``npu-smi info -t ecc -i N``: 2 + 2U calls, 2 on a healthy node;
* level 2 (``npu_smi_detail`` facts, SMI005-SMI008) adds, for every NPU, ``npu-smi info -t board -i N``,
  ``-t ecc -i N`` (unless level 1 read it) and ``-t common -i N``: up to 3N more (24 on an 8-NPU node);
* the physical id of a chip (MindCluster's ``deviceIds``) comes from ``npu-smi info -m`` where it prints a
  Chip Phy-ID column (newer drivers), else from ``npu-smi info -t phyid-remap -p P`` for the /dev/davinci<P>
  of the node, asked for the chips not OK at level 1 and for every chip at level 2, stopping once they are
  found: up to D more calls (D device nodes; none on a healthy node at level 1).

A call that times out is an ERROR finding; after one, the remaining per-chip calls are not started (a hung
driver would hang each of them in turn).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from npudoctor.knowledge import setting
from npudoctor.parsers.npu_smi import (
    ChipIds,
    NpuSmiDetail,
    NpuSmiFailure,
    NpuSmiParseError,
    NpuSmiTable,
    parse_npu_smi_detail,
    parse_npu_smi_info,
    parse_npu_smi_mapping,
    recognise_failure,
)
from npudoctor.probes import prefetches, provides
from npudoctor.probes.sources import Command

# npu-smi lives in /usr/local/sbin on hosts (often not on a user's PATH); some images use /usr/local/bin.
NPU_SMI_DIRS = ("/usr/local/sbin", "/usr/local/bin")
# How much of a failed run's output to keep as evidence.
_HEAD_LINES = 6
# The per-NPU sub-commands level 2 reads, in the order they are asked.
LEVEL2_TOPICS = ("board", "ecc", "common")


@dataclass(frozen=True)
class DetailQuery:
    """One ``npu-smi info -t <topic> -i N [-c C]`` call: what it said (``details``), or why nothing was read."""

    topic: str
    npu_id: int
    chip_id: Optional[int]
    argv: Tuple[str, ...]
    details: Tuple[NpuSmiDetail, ...] = ()
    error: Optional[str] = None  # "timeout", "not started: ...", "exit code 1: ...", a parse error
    duration_s: float = 0.0

    @property
    def command(self) -> str:
        return " ".join(self.argv)

    @property
    def timed_out(self) -> bool:
        return self.error == "timeout"

    def for_chip(self, chip_id: Optional[int]) -> Optional[NpuSmiDetail]:
        """The block about ``chip_id`` of this NPU (the NPU-level block, or the only block, where none names it;
        the MCU's own block, ``Chip Name : mcu``, is never a chip's)."""
        mine = [d for d in self.details if d.npu_id in (None, self.npu_id)
                and (d.text("chip name") or "").lower() != "mcu"]
        named = [d for d in mine if d.chip_id == chip_id]
        if named:
            return named[0]
        unnamed = [d for d in mine if d.chip_id is None]
        return unnamed[0] if unnamed else (mine[0] if len(mine) == 1 else None)


@dataclass(frozen=True)
class NpuSmiFacts:
    """What ``npu-smi info`` said: its table, or the recognised way it failed.

    ``error`` is the runner's: "not-found", "timeout", "permission", "os-error: ...", None when it ran.
    """

    path: Optional[str]
    rc: Optional[int]
    error: Optional[str]
    timeout_s: float
    duration_s: float
    table: Optional[NpuSmiTable] = None
    failure: Optional[NpuSmiFailure] = None
    parse_error: Optional[str] = None
    output_head: str = ""
    # For chips whose Health is not OK: chip subject -> `npu-smi info -t health` keys (Error Code, ...), or
    # {"query_error": why it could not be read}.
    health_details: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # `npu-smi info -m`: NPU/chip -> logic id (what ASCEND_RT_VISIBLE_DEVICES and the device plugin count).
    ids: Tuple[ChipIds, ...] = ()
    ids_error: Optional[str] = None
    # The per-chip calls level 1 made for chips not OK (health, ecc), in order.
    queries: Tuple[DetailQuery, ...] = ()
    # (npu id, chip id) -> physical id, from `npu-smi info -t phyid-remap -p N` for chips not OK (where -m
    # prints no Chip Phy-ID column): what MindCluster's deviceIds name.
    phy_ids: Mapping[Tuple[int, int], int] = field(default_factory=dict)

    def chip_ids(self, npu_id: int, chip_id: Optional[int]) -> Optional[ChipIds]:
        return next((ids for ids in self.ids if ids.npu_id == npu_id and ids.chip_id == (chip_id or 0)), None)

    def query(self, topic: str, npu_id: int) -> Optional[DetailQuery]:
        return next((q for q in self.queries if q.topic == topic and q.npu_id == npu_id), None)


@dataclass(frozen=True)
class NpuSmiDetailFacts:
    """Level 2: ``npu-smi info -t board|ecc|common -i N`` for every NPU (the ECC read at level 1 reused)."""

    queries: Tuple[DetailQuery, ...]
    stopped: Optional[str] = None  # why calls were not started (a timeout before them)
    phy_ids: Mapping[Tuple[int, int], int] = field(default_factory=dict)  # every chip's, as level 1's

    def query(self, topic: str, npu_id: int) -> Optional[DetailQuery]:
        return next((q for q in self.queries if q.topic == topic and q.npu_id == npu_id), None)

    def of_topic(self, topic: str) -> List[DetailQuery]:
        return [q for q in self.queries if q.topic == topic]

    @property
    def calls(self) -> int:
        return sum(1 for q in self.queries if not (q.error or "").startswith("not started"))


def _command(ctx: Any, *args: str) -> Command:
    timeout_s = float(setting(ctx.profile, "commands.npu_smi_timeout_s"))
    return Command(("npu-smi", *args), timeout_s=timeout_s, extra_dirs=NPU_SMI_DIRS)


@prefetches("npu-smi")
def npu_smi_info_command(ctx: Any) -> Command:
    return _command(ctx, "info")


@prefetches("npu-smi")
def npu_smi_ids_command(ctx: Any) -> Command:
    return _command(ctx, "info", "-m")


@provides("npu_smi")
def npu_smi_facts(ctx: Any) -> NpuSmiFacts:
    """Equivalent to ``timeout 15 npu-smi info`` and ``timeout 15 npu-smi info -m`` (also looked up in
    /usr/local/sbin and /usr/local/bin), then ``npu-smi info -t health -i N -c C`` and ``-t ecc -i N`` for each
    chip not OK."""
    command = npu_smi_info_command(ctx)
    timeout_s = command.timeout_s
    result = ctx.runner.run(command)
    output = result.output
    head = "\n".join(output.strip().splitlines()[:_HEAD_LINES])
    common = {"path": result.resolved_path, "rc": result.rc, "error": result.error, "timeout_s": timeout_s,
              "duration_s": round(result.duration_s, 3), "output_head": head}
    if result.error is not None:
        return NpuSmiFacts(**common)
    try:
        table = parse_npu_smi_info(result.stdout)
    except NpuSmiParseError as exc:
        return NpuSmiFacts(failure=recognise_failure(output), parse_error=str(exc), **common)
    ids, ids_error = _chip_ids(ctx)
    details, queries = _unhealthy_chips(ctx, table)
    unhealthy = [(chip.npu_id, chip.chip_id or 0) for chip in table.chips if chip.subject in details]
    phy_ids = {} if any(q.timed_out for q in queries) else resolve_phy_ids(ctx, ids, unhealthy, {})
    return NpuSmiFacts(table=table, health_details=details, ids=ids, ids_error=ids_error, queries=queries,
                       phy_ids=phy_ids, **common)


# The key under which resolve_phy_ids notes the physical id whose `phyid-remap` call timed out.
TIMED_OUT = (-1, -1)


def resolve_phy_ids(ctx: Any, ids: Sequence[ChipIds], wanted: Sequence[Tuple[int, int]],
                    known: Mapping[Tuple[int, int], int]) -> Dict[Tuple[int, int], int]:
    """The physical id of each ``wanted`` (npu, chip): from ``npu-smi info -m`` where it prints a Chip Phy-ID
    column, else ``npu-smi info -t phyid-remap -p N`` for the /dev/davinci<N> of this node (N is a physical
    id), stopping once every wanted chip is found or after a call that does not answer."""
    found: Dict[Tuple[int, int], int] = dict(known)
    found.update({(i.npu_id, i.chip_id): i.phy_id for i in ids if i.phy_id is not None})
    missing = {key for key in wanted if key not in found}
    if not missing or TIMED_OUT in found:  # after a hung call the next would hang too
        return found
    nodes = ctx.facts_or_none("device_nodes")
    numbers = [int(node.path.rsplit("davinci", 1)[1]) for node in (nodes.chips if nodes is not None else ())]
    # a chip's physical id is usually its logic id: ask those first, so one call per chip most often does
    logic = {(i.npu_id, i.chip_id): i.logic_id for i in ids}
    likely = [logic.get(key) for key in wanted]
    numbers.sort(key=lambda number: (number not in likely, number))
    taken = set(found.values())
    for number in numbers:
        if not missing:
            break
        if number in taken:
            continue
        result = ctx.runner.run(_command(ctx, "info", "-t", "phyid-remap", "-p", str(number)))
        if result.error is not None:  # not found, a timeout: the next one would not answer either
            if result.error == "timeout":
                found[TIMED_OUT] = number
            break
        try:
            blocks = parse_npu_smi_detail(result.stdout) if not result.rc else []
        except NpuSmiParseError:
            blocks = []
        block = blocks[0] if len(blocks) == 1 else None
        phy = block.number("chip physical id", "chip phy-id", "chip phy id") if block is not None else None
        if block is None or block.npu_id is None or phy is None or int(phy) != number:
            continue
        key = (block.npu_id, block.chip_id or 0)
        found[key] = number
        missing.discard(key)
    return found


def _chip_ids(ctx: Any) -> Tuple[Tuple[ChipIds, ...], Optional[str]]:
    """``npu-smi info -m``: the logic id of each chip, or why it is not known."""
    result = ctx.runner.run(npu_smi_ids_command(ctx))
    if result.error is not None or result.rc:
        return (), f"`npu-smi info -m`: {result.error or f'exit code {result.rc}'}"
    try:
        return tuple(parse_npu_smi_mapping(result.stdout)), None
    except NpuSmiParseError as exc:
        return (), f"`npu-smi info -m`: {exc}"


def ask(ctx: Any, topic: str, npu_id: int, chip_id: Optional[int] = None) -> DetailQuery:
    """Run ``npu-smi info -t <topic> -i <npu_id> [-c <chip_id>]`` and parse it by structure."""
    args = ["info", "-t", topic, "-i", str(npu_id)] + ([] if chip_id is None else ["-c", str(chip_id)])
    command = _command(ctx, *args)
    result = ctx.runner.run(command)
    base = {"topic": topic, "npu_id": npu_id, "chip_id": chip_id, "argv": command.argv,
            "duration_s": round(result.duration_s, 3)}
    if result.error is not None:
        return DetailQuery(error=result.error, **base)
    if result.rc:
        first = (result.output.strip().splitlines() or ["(no output)"])[0]
        return DetailQuery(error=f"exit code {result.rc}: {first[:200]}", **base)
    try:
        return DetailQuery(details=tuple(parse_npu_smi_detail(result.stdout, npu_id, chip_id)), **base)
    except NpuSmiParseError as exc:
        return DetailQuery(error=str(exc), **base)


def not_started(topic: str, npu_id: int, chip_id: Optional[int], why: str) -> DetailQuery:
    args = ("npu-smi", "info", "-t", topic, "-i", str(npu_id)) + (() if chip_id is None else ("-c", str(chip_id)))
    return DetailQuery(topic, npu_id, chip_id, args, error=f"not started: {why}")


def _unhealthy_chips(ctx: Any, table: NpuSmiTable) -> Tuple[Dict[str, Dict[str, str]], Tuple[DetailQuery, ...]]:
    """``npu-smi info -t health -i <npu> -c <chip>`` and ``-t ecc -i <npu>`` for each chip that is not OK (at
    most ``npu_smi.health_detail_max_chips`` of them: each call can take seconds): its error codes say why, its
    memory counters whether HBM is failing."""
    limit = int(setting(ctx.profile, "npu_smi.health_detail_max_chips"))
    unhealthy = [chip for chip in table.chips if chip.health.strip().lower() != "ok"][:max(limit, 0)]
    details: Dict[str, Dict[str, str]] = {}
    queries: List[DetailQuery] = []
    stopped: Optional[str] = None
    for chip in unhealthy:
        for topic, chip_id in (("health", chip.chip_id or 0), ("ecc", None)):
            if topic == "ecc" and any(q.topic == "ecc" and q.npu_id == chip.npu_id for q in queries):
                continue  # one ECC report per NPU covers its chips
            query = not_started(topic, chip.npu_id, chip_id, stopped) if stopped else \
                ask(ctx, topic, chip.npu_id, chip_id)
            queries.append(query)
            if query.timed_out:
                stopped = f"`{query.command}` timed out before it"
        health = next(q for q in queries if q.topic == "health" and q.npu_id == chip.npu_id
                      and q.chip_id == (chip.chip_id or 0))
        details[chip.subject] = _health_keys(health)
    return details, tuple(queries)


def _health_keys(query: DetailQuery) -> Dict[str, str]:
    if query.error is not None or not query.details:
        reason = "timeout" if query.timed_out else (query.error or "no key/value lines")
        return {"query_error": f"`{query.command}`: {reason}"}
    merged: Dict[str, str] = {}
    for detail in query.details:
        merged.update(dict(detail.fields))
    return merged


@provides("npu_smi_detail")
def npu_smi_detail_facts(ctx: Any) -> NpuSmiDetailFacts:
    """Level 2: equivalent to ``npu-smi info -t board -i N``, ``-t ecc -i N`` and ``-t common -i N`` for each NPU
    of ``npu-smi info`` (the ECC report level 1 read for a chip not OK is reused)."""
    smi = ctx.facts("npu_smi")
    npu_ids: Sequence[int] = smi.table.npu_ids if smi.table is not None else ()
    queries: List[DetailQuery] = []
    stopped = next((f"`{q.command}` timed out" for q in smi.queries if q.timed_out), None)
    for npu_id in npu_ids:
        for topic in LEVEL2_TOPICS:
            earlier = smi.query(topic, npu_id)
            if earlier is not None:
                queries.append(earlier)
                continue
            query = not_started(topic, npu_id, None, stopped) if stopped else ask(ctx, topic, npu_id)
            queries.append(query)
            if query.timed_out and not stopped:
                stopped = f"`{query.command}` timed out"
    phy_ids = dict(smi.phy_ids)
    if not stopped and smi.table is not None:
        every = [(chip.npu_id, chip.chip_id or 0) for chip in smi.table.chips]
        phy_ids = resolve_phy_ids(ctx, smi.ids, every, smi.phy_ids)
    return NpuSmiDetailFacts(tuple(queries), stopped, phy_ids)

