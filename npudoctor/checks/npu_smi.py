"""Checks of the npu-smi stage: does ``npu-smi info`` run, is every chip healthy, does it see every NPU on
the bus, and is anything else already using the NPUs.

For newcomers from NVIDIA: ``npu-smi`` is the Ascend ``nvidia-smi``. It ships with the driver (usually in
/usr/local/sbin), talks to the driver through DCMI, and prints one table with two rows per chip. An NPU is a
card; a chip (die) is what one training process uses. Most NPUs have one chip; an Atlas 300I Duo has two per
card, and an Atlas A3 NPU has two dies.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

from npudoctor import knowledge
from npudoctor.checks.registry import (
    NOT_AN_ASCEND_NODE,
    CheckContext,
    Outcome,
    check,
    error,
    fail,
    passed,
    setting,
    skip,
    warn,
)
from npudoctor.logs import fault_codes
from npudoctor.parsers.npu_smi import NpuSmiChip, NpuSmiDetail, NpuSmiFailure
from npudoctor.parsers.npu_smi import fault_codes as smi_fault_codes
from npudoctor.probes.npu_smi import TIMED_OUT

NOT_FOUND_FIX = (
    "on the host npu-smi comes with the driver package (/usr/local/sbin/npu-smi): install the driver "
    "(Ascend-hdk-*-npu-driver_*.run --full)\n"
    "in a container, mount it: -v /usr/local/sbin/npu-smi:/usr/local/sbin/npu-smi:ro "
    "-v /usr/local/Ascend/driver:/usr/local/Ascend/driver:ro"
)
#: Option (``run_checks(options=...)``): the pids of the job being watched; SMI004 passes the chips they hold.
JOB_PIDS_OPTION = "job_pids"


def npus_on_bus(ctx: CheckContext) -> Optional[Sequence[Any]]:
    """NPU functions on the PCI bus (virtual functions left out), or None when the bus could not be read."""
    pci = ctx.facts_or_none("pci")
    if pci is None or pci.error:
        return None
    return pci.physical_npus


def explain_failure(failure: NpuSmiFailure) -> Dict[str, str]:
    """Meaning, cause and fix of a recognised failure, from checks/npu_smi_errors.yaml (SMI001 and
    `npudoctor parse npu-smi` say the same)."""
    known = knowledge.load("npu_smi_errors")
    if failure.kind == "dcmi":
        return dict(known["dcmi_codes"].get(str(failure.code), known["dcmi_unknown"]))
    if failure.kind == "missing-library":
        libraries = known["missing_libraries"]
        return dict(libraries.get(failure.library, libraries["default"]))
    return dict(known["no_such_file"])


@check("SMI001", stage="npu-smi", title="npu-smi available and runs",
       settings=("commands.npu_smi_timeout_s", "npu_smi.health_detail_max_chips"))
def npu_smi_runs(ctx: CheckContext) -> Iterable[Outcome]:
    """Runs ``npu-smi info`` (the Ascend ``nvidia-smi``) with a time limit and reads its table.

    If npu-smi cannot run, nothing else on the node can see the NPUs either: torch_npu and HCCL go through the
    same driver (DCMI). The known failures are explained:

    * ``dcmi module initialize failed. ret is -8005``: the devices cannot be opened (a container without every
      /dev/davinci* node or the driver, a user outside HwHiAiUser, or a driver upgraded without a reboot);
    * ``... because the device is used. ret is -8020``: another process or container holds the device;
    * ``-8010`` / ``-8012``: the device is not ready or dropped off the bus;
    * ``error while loading shared libraries: libc_sec.so``: the driver libraries are not mounted into the
      container;
    * not found: SKIP on a machine without NPUs on the PCI bus, FAIL when NPUs are there.

    A hanging npu-smi is killed after ``commands.npu_smi_timeout_s`` (profile, default 15 s) and reported as
    ERROR.

    What npu-smi is asked, per level (N NPUs; U chips not OK, at most ``npu_smi.health_detail_max_chips``):
    level 1 `npu-smi info` and `npu-smi info -m` (logic ids), and for each chip not OK
    `npu-smi info -t health -i N -c C`, `npu-smi info -t ecc -i N` and its physical id (2 + 3U calls: 2 on a
    healthy 8-NPU node); level 2 adds `-t board -i N`, `-t ecc -i N` and `-t common -i N` for every NPU and
    every chip's physical id (34 calls on 8 NPUs). The physical id comes from `npu-smi info -m` where it prints a
    Chip Phy-ID column (then it costs nothing), else from `npu-smi info -t phyid-remap -p P` per /dev/davinci<P>.
    Each call has the same time limit; after one hangs, the per-chip calls left are not started.

    Fix: the one printed with the finding's code; the codes, causes and fixes are data in
    checks/npu_smi_errors.yaml.
    """
    facts = ctx.facts("npu_smi")
    evidence: Dict[str, Any] = {"path": facts.path, "rc": facts.rc, "duration_s": facts.duration_s}
    if facts.error == "not-found":
        npus = npus_on_bus(ctx)
        searched = {"searched": "PATH, /usr/local/sbin, /usr/local/bin"}
        if npus is None:
            yield skip("npu-smi not found, and the PCI bus could not be read to tell whether this node has "
                       "NPUs", subject="npu-smi", evidence=searched, fix=NOT_FOUND_FIX)
        elif not npus:
            yield skip("npu-smi not found and no Ascend NPU on the PCI bus: not an NPU node",
                       subject="npu-smi", evidence=searched, cause=NOT_AN_ASCEND_NODE)
        else:
            yield fail("npu-smi", f"npu-smi not found, but {len(npus)} Ascend NPU(s) are on the PCI bus",
                       evidence={**searched, "npus_on_pci": len(npus)}, fix=NOT_FOUND_FIX)
        return
    if facts.error == "timeout":
        yield error(f"`npu-smi info` did not finish within {facts.timeout_s:g} s and was killed (a hung "
                    "driver or a device that does not answer; raise commands.npu_smi_timeout_s in a site "
                    "profile if the node is just slow)",
                    subject="npu-smi", evidence={**evidence, "timeout_s": facts.timeout_s})
        return
    if facts.error == "output-limit":
        yield error("`npu-smi info` printed more output than any npu-smi table holds and was killed (a "
                    "runaway npu-smi or driver)", subject="npu-smi", evidence=evidence)
        return
    if facts.error is not None:
        yield fail("npu-smi", f"npu-smi at {facts.path} could not be started: {facts.error}", evidence,
                   fix=f"ls -l {facts.path}   # must be executable by this user (root or HwHiAiUser)")
        return
    if facts.table is not None:
        table = facts.table
        detail = (f"npu-smi {table.tool_version or '?'} (driver {table.driver_version or '?'}): "
                  f"{len(table.chips)} chip(s) on {len(table.npu_ids)} NPU(s)")
        if table.notes:
            detail += "; " + "; ".join(table.notes)
        yield passed("npu-smi", detail, {**evidence, "tool_version": table.tool_version,
                                         "driver_version": table.driver_version, "chips": len(table.chips),
                                         "partial": table.partial, "ids_error": facts.ids_error})
        return
    if facts.failure is not None:
        explained = explain_failure(facts.failure)
        yield fail("npu-smi", f"{facts.failure.line}: {explained['meaning']} ({explained['cause']})",
                   evidence={**evidence, "failure": facts.failure.kind, "code": facts.failure.code,
                             "library": facts.failure.library, "output": facts.output_head},
                   fix=explained["fix"])
        return
    first = facts.output_head.splitlines()[0] if facts.output_head else "(no output)"
    if facts.rc:
        yield fail("npu-smi", f"`npu-smi info` failed with exit code {facts.rc}: {first}",
                   evidence={**evidence, "output": facts.output_head},
                   fix="run `npu-smi info` by hand on the host; see `dmesg | grep -i -E \"devdrv|davinci\"`")
        return
    yield error(f"npu-smi ran but its output could not be read: {facts.parse_error}",
                subject="npu-smi", evidence={**evidence, "output": facts.output_head})


@check("SMI002", stage="npu-smi", title="NPU chip health", requires=("SMI001",),
       settings=("npu_smi.health_detail_max_chips", "npu_smi.ecc.isolated_pages_limit",
                 "npu_smi.ecc.isolated_pages_warn_share", "npu_smi.ecc.double_bit", "npu_smi.ecc.single_bit_warn"))
def chip_health(ctx: CheckContext) -> Iterable[Outcome]:
    """Every chip's Health column in ``npu-smi info`` must read OK; for a chip that does not, its alarm codes
    say what is wrong and what to do.

    ``Warning`` (WARN) means the chip has a minor fault but still works; ``Alarm`` and ``Critical`` (FAIL)
    mean a fault that can break or slow training (memory errors, over-temperature, a link down). The
    Health word is npu-smi's summary of the chip's fault codes, like ``nvidia-smi -q``'s retired pages and
    Xid events.

    For each chip that is not OK npudoctor also runs `npu-smi info -t health -i <npu> -c <chip>` and
    `npu-smi info -t ecc -i <npu>` (at most ``npu_smi.health_detail_max_chips`` chips, profile). Each fault code
    (``80E01801``) is looked up in MindCluster's public fault table (checks/npu_fault_codes.yaml;
    `npudoctor explain 80E01801`): its level decides the status and the fix, from "watch" (sub-health) through
    "restart the job" and "reset the chip" to "isolate and replace the chip". The HBM/DDR error counters and
    isolated pages are judged like SMI005. Each finding names the chip as npu-smi does (subject
    ``npu:N/chip:C``) and, in ``evidence.chip``, by logic id (``npu-smi info -m``: what
    ``ASCEND_RT_VISIBLE_DEVICES`` counts), physical id (MindCluster's ``deviceIds``) and PCI bus id.

    Fix: the one printed for the chip's most severe code. Resetting a chip is
    `npu-smi set -t reset -i <npu> -c <chip>`, on an idle chip (printed, never run by npudoctor); if the state
    comes back, hand the node to hardware support.
    """
    levels = {word.lower(): level for word, level in knowledge.load("npu_smi_errors")["health"].items()}
    facts = ctx.facts("npu_smi")
    if facts.ids_error and facts.ids_error.endswith(": timeout"):  # an ERROR here blocks no other check
        yield error(f"{facts.ids_error}: it did not finish within {facts.timeout_s:g} s, so the chips' logic ids "
                    f"are unknown {_HUNG}", subject="npu-smi", evidence={"timeout_s": facts.timeout_s})
    hung = facts.phy_ids.get(TIMED_OUT)
    if hung is not None:
        yield error(f"`npu-smi info -t phyid-remap -p {hung}` did not finish within {facts.timeout_s:g} s, so the "
                    f"physical ids of the chips not OK are unknown {_HUNG}", subject="npu-smi",
                    evidence={"timeout_s": facts.timeout_s})
    for chip in facts.table.chips:
        evidence = _chip_evidence(chip)
        evidence["chip"] = chip_identity(facts, chip.npu_id, chip.chip_id, chip.bus_id, chip.phy_id)
        level = levels.get(chip.health.strip().lower())
        if level == "pass":
            yield passed(chip.subject, f"{chip.name}: {chip.health}", evidence)
            continue
        detail = f"{chip.name}: health {chip.health}"
        ids = evidence["chip"]
        where = f"-i {chip.npu_id} -c {chip.chip_id or 0}"
        fix = (f"npu-smi info -t health {where}   # the error codes\n"
               f"npu-smi set -t reset {where}   # on an idle chip; reboot if the state comes back")
        severity = {"fail": 2, "warn": 1}.get(level or "", 1)
        health = facts.health_details.get(chip.subject)
        if health:
            evidence["health_query"] = dict(health)
            codes = [f"{key} {value}" for key, value in health.items()
                     if key.lower().startswith("error") and value not in ("NA", "")]
            if codes:
                detail += " (" + "; ".join(codes) + ")"
            printed = [code for key, value in health.items() if key.lower().startswith("error code")
                       for code in smi_fault_codes(value)]
            alarms = [fault_codes.fault(code) for code in printed]
            known = sorted((a for a in alarms if a is not None), key=lambda a: -a.rank)
            unknown = [code for code, alarm in zip(printed, alarms) if alarm is None]
            if unknown:
                evidence["unknown_codes"] = unknown
                detail += f": {', '.join(unknown)} not in MindCluster's fault table"
            if known:
                evidence["alarms"] = [{"code": a.code, "level": a.level, "action": a.action, "title": a.title}
                                      for a in known]
                detail += ": " + "; ".join(f"{a.code} {a.title} -> {a.action} ({a.level})" for a in known)
                worst = known[0]
                severity = max(severity, 2 if worst.severity == "fail" else 1)
                fix = worst.fix(chip.npu_id, chip.chip_id or 0, ids["logic_id"], ids["phy_id"])
        ecc = facts.query("ecc", chip.npu_id)
        block = ecc.for_chip(chip.chip_id) if ecc is not None else None
        if block is not None:
            verdict = judge_ecc(ctx, block)
            evidence["ecc"] = verdict.counters
            if verdict.severity:
                detail += f"; {verdict.text}"
                if verdict.severity > severity or verdict.action == "replace":
                    severity = max(severity, verdict.severity)
                    fix = verdict.fix(chip.npu_id, chip.chip_id, ids["logic_id"])
                else:
                    fix += f"\nnpu-smi info -t ecc -i {chip.npu_id}   # memory errors: plan the replacement as " \
                           "isolated pages near the limit"
        if level not in ("warn", "fail"):
            detail += ": a Health value npudoctor does not know"
        yield (fail if severity >= 2 else warn)(chip.subject, detail, evidence, fix=fix)


def chip_identity(facts: Any, npu_id: int, chip_id: Optional[int], bus_id: Optional[str] = None,
                  phy_id: Optional[int] = None, detail: Any = None) -> Dict[str, Any]:
    """A chip as each consumer names it (the contract of every chip finding's ``evidence["chip"]``): npu-smi's
    NPU and chip id, the logic id of ``npu-smi info -m`` (what ``ASCEND_RT_VISIBLE_DEVICES`` counts), the physical
    id (MindCluster's ``deviceIds``: ``-m``'s Chip Phy-ID or ``-t phyid-remap``), the PCI bus id; None where not
    known (never guessed from another id)."""
    if bus_id is None or phy_id is None:
        table = getattr(facts, "table", None)
        row = next((c for c in (table.chips if table else ()) if c.npu_id == npu_id
                    and (c.chip_id or 0) == (chip_id or 0)), None)
        if row is not None:
            bus_id = bus_id or row.bus_id
            phy_id = phy_id if phy_id is not None else row.phy_id
    ids = facts.chip_ids(npu_id, chip_id) if facts is not None else None
    if ids is not None and phy_id is None:
        phy_id = ids.phy_id
    if phy_id is None:  # `npu-smi info -t phyid-remap`: level 1's for chips not OK, level 2's for every chip
        for source in (facts, detail):
            phy_id = (getattr(source, "phy_ids", None) or {}).get((npu_id, chip_id or 0), phy_id)
    return {"npu_id": npu_id, "chip_id": chip_id, "logic_id": ids.logic_id if ids else None, "phy_id": phy_id,
            "bus_id": bus_id}


class EccVerdict(NamedTuple):
    """What the ECC counters of one chip say: severity 0 (fine), 1 (WARN) or 2 (FAIL), why, and the counters."""

    severity: int
    text: str
    counters: Dict[str, Dict[str, int]]
    action: str = ""

    def fix(self, npu: int, chip: Optional[int], logic: Optional[int]) -> str:
        where = f"-i {npu}" + ("" if chip is None else f" -c {chip}")
        if self.action == "replace":
            return (f"take the chip out of service (leave logic id {logic if logic is not None else '<logic id>'} "
                    "out of ASCEND_RT_VISIBLE_DEVICES, or mark it unhealthy in the scheduler) and have the NPU "
                    f"replaced: its memory has no spare rows left\nnpu-smi info -t ecc -i {npu}   # the counters")
        return (f"npu-smi info -t ecc -i {npu}   # watch the counters; restart the job if it failed on this chip\n"
                f"npu-smi set -t reset {where}   # on an idle chip after a double-bit error (printed, never run)\n"
                "plan the replacement when isolated pages near the limit")


# "hbm double bit isolated pages count" -> (hbm, double, isolated)
_ECC_KEY = re.compile(r"(?P<memory>[a-z0-9]+) (?P<bit>single|double) bit "
                      r"(?P<kind>error count|aggregate total err cnt|isolated pages count)")
_ECC_KIND = {"error count": "errors", "aggregate total err cnt": "aggregate", "isolated pages count": "isolated"}


def judge_ecc(ctx: CheckContext, block: NpuSmiDetail) -> EccVerdict:
    """Judge one chip's ``npu-smi info -t ecc`` block against the profile's ``npu_smi.ecc`` settings."""
    counters: Dict[str, Dict[str, int]] = {}
    for match, value in block.matching(_ECC_KEY):
        number = _whole(value)
        if number is not None:
            memory = counters.setdefault(match["memory"].upper(), {})
            memory[f"{match['bit']}_bit_{_ECC_KIND[match['kind']]}"] = number
    limit = int(setting(ctx, "npu_smi.ecc.isolated_pages_limit"))
    near = float(setting(ctx, "npu_smi.ecc.isolated_pages_warn_share")) * limit
    double_severity = 2 if str(setting(ctx, "npu_smi.ecc.double_bit")).lower() == "fail" else 1
    single_limit = setting(ctx, "npu_smi.ecc.single_bit_warn")
    severity, action = 0, ""
    texts: List[str] = []
    for name, values in counters.items():
        isolated = values.get("single_bit_isolated", 0) + values.get("double_bit_isolated", 0)
        double = max(values.get("double_bit_errors", 0), values.get("double_bit_aggregate", 0))
        single = max(values.get("single_bit_errors", 0), values.get("single_bit_aggregate", 0))
        if isolated >= limit:
            severity, action = 2, "replace"
            texts.append(f"{name} {isolated} isolated pages, at the limit of {limit}: replace the NPU")
        elif isolated >= near and isolated:
            severity = max(severity, 1)
            texts.append(f"{name} {isolated} isolated pages, near the limit of {limit}")
        if double:
            severity = max(severity, double_severity)
            now, total = values.get("double_bit_errors", 0), values.get("double_bit_aggregate", 0)
            counted = f"{now} since boot, {total} in total" if total > now else f"{double}"
            texts.append(f"{name} double-bit (uncorrectable) ECC errors: {counted}")
        if single_limit is not None and single >= int(single_limit):
            severity = max(severity, 1)
            texts.append(f"{name} {single} single-bit ECC errors (limit {single_limit})")
    return EccVerdict(severity, "; ".join(texts), counters, action)


def _whole(value: str) -> Optional[int]:
    number = value.strip()
    return int(number) if number.isdigit() and len(number) <= 18 else None


def _chip_evidence(chip: NpuSmiChip) -> Dict[str, Any]:
    return {key: value for key, value in chip.to_dict().items() if value is not None}


def _davinci_count(ctx: CheckContext) -> Optional[int]:
    """How many /dev/davinci<N> nodes exist (one per chip the driver brought up), None when unknown."""
    nodes = ctx.facts_or_none("device_nodes")
    return None if nodes is None or nodes.error else len(nodes.chips)


def _normal_bdf(bus_id: str) -> str:
    return bus_id.strip().lower()


@check("SMI003", stage="npu-smi", title="npu-smi sees every NPU", requires=("SMI001",), settings=("node.npu_count",))
def chip_count(ctx: CheckContext) -> Iterable[Outcome]:
    """The NPUs npu-smi lists must be the NPUs on the PCI bus (and the profile's ``node.npu_count``).

    A card on the bus that npu-smi does not list is one the driver could not bring up: training on that node
    will find fewer devices than the job expects. The comparison is by PCI function: where npu-smi prints
    Bus-Ids, the distinct Bus-Ids are counted (an Atlas 300I Duo shows its two chips on one Bus-Id; an A3 NPU
    shows two dies, each with its own Bus-Id); where it prints none (SoCs, 950), the NPU ids are counted.
    In a container npu-smi lists only the devices given to it while /sys shows the host's bus: then pass
    every device, or run on the host.
    The profile's ``node.npu_count`` may count NPUs or chips; either matches.

    Fix: `lspci -d 19e5:` and `dmesg | grep -i -E "devdrv|davinci"` for the missing card; reload the driver or
    reboot; a card that stays missing is a hardware case.
    """
    table = ctx.facts("npu_smi").table
    chips = table.chips
    bus_ids = {_normal_bdf(c.bus_id) for c in chips if c.bus_id}
    uses_bus_ids = all(c.bus_id for c in chips)
    seen = len(bus_ids) if uses_bus_ids else len(table.npu_ids)
    unit = "PCI function(s) (distinct Bus-Id)" if uses_bus_ids else "NPU id(s)"
    evidence: Dict[str, Any] = {"npus": len(table.npu_ids), "chips": len(chips), "npu_smi_functions": seen}
    if table.partial:
        yield skip("the npu-smi table is partial (rows elided or cut off): its counts are not the node's",
                   subject="npu-smi", evidence=evidence)
        return
    npus = npus_on_bus(ctx)
    if npus:
        evidence["npus_on_pci"] = len(npus)
        if seen != len(npus):
            on_bus = {_normal_bdf(d.bdf) for d in npus}
            detail = f"npu-smi lists {seen} {unit}, the PCI bus has {len(npus)} NPU(s)"
            if uses_bus_ids and on_bus & bus_ids:
                evidence["missing_from_npu_smi"] = sorted(on_bus - bus_ids)
                evidence["not_on_pci_bus"] = sorted(bus_ids - on_bus)
                if evidence["missing_from_npu_smi"]:
                    detail += f"; not listed by npu-smi: {', '.join(evidence['missing_from_npu_smi'])}"
            davinci = _davinci_count(ctx)
            if seen < len(npus) and davinci == len(chips):
                evidence["dev_davinci_nodes"] = davinci
                detail += (f" (/dev has {davinci} davinci node(s), one per listed chip: a container given "
                           "only these devices looks like this)")
            yield fail("npu-smi", detail, evidence,
                       fix="lspci -d 19e5: ; dmesg | grep -i -E 'devdrv|davinci'   # is the card up?\n"
                           "in a container: pass every /dev/davinciN, or run the check on the host "
                           "(or `--skip SMI003` where a subset is intended)")
            return
    expected = ctx.profile.expected_chip_count
    if expected is not None:
        evidence["expected_npus"] = expected
        if expected not in (len(table.npu_ids), len(chips)):
            yield fail("npu-smi", f"npu-smi lists {len(table.npu_ids)} NPU(s) with {len(chips)} chip(s), "
                                  f"but the profile {ctx.profile.name} expects {expected}", evidence,
                       fix="lspci -d 19e5: ; npu-smi info -l   # which card is missing?")
            return
    if not npus and expected is None:
        yield skip("nothing to compare with: no NPU readable on the PCI bus and no node.npu_count in the "
                   "profile", subject="npu-smi", evidence=evidence)
        return
    yield passed("npu-smi", f"{len(table.npu_ids)} NPU(s), {len(chips)} chip(s), matching "
                            + ("the PCI bus" if npus else f"the profile {ctx.profile.name}"), evidence)


@check("SMI004", stage="npu-smi", title="No other process holds the NPUs", requires=("SMI001",))
def other_processes(ctx: CheckContext) -> Iterable[Outcome]:
    """Lists the processes npu-smi shows on each chip (pid, name, device memory): each one is a WARN, except
    those of the job being watched (``npudoctor dashboard --follow LOG``: the pids its memory log names), which
    pass as "the followed job".

    A leftover or hung training process keeps its device memory (HBM) and can make a new job fail with out of
    memory or DCMI -8020 ("device is used"), exactly like a stale CUDA process under ``nvidia-smi``. npu-smi
    sometimes prints no process name; look the pid up with ps.

    Fix: `ps -o pid,user,etime,cmd -p <pid>`; stop the process if it is a leftover (`kill <pid>`, printed,
    never run by npudoctor). In a container the pid is the host's: look it up on the host.
    """
    table = ctx.facts("npu_smi").table
    if not table.has_process_section:
        yield skip("this npu-smi prints no process list", subject="npu-smi")
        return
    if not table.processes:
        yield passed("npu-smi", f"no process on any of the {len(table.npu_ids)} NPU(s)")
        return
    facts = ctx.facts("npu_smi")
    job_pids = frozenset(ctx.options.get(JOB_PIDS_OPTION) or ())
    for process in table.processes:
        subject = f"npu:{process.npu_id}" + ("" if process.chip_id is None else f"/chip:{process.chip_id}")
        name = process.name or "(no name shown)"
        memory = f", {process.memory_mib} MiB device memory" if process.memory_mib is not None else ""
        evidence = {"pid": process.pid, "name": process.name, "memory_mib": process.memory_mib,
                    "chip": chip_identity(facts, process.npu_id, process.chip_id)}
        if process.pid in job_pids:
            yield passed(subject, f"the followed job: pid {process.pid} {name}{memory}", {**evidence, "job": True})
            continue
        yield warn(subject, f"pid {process.pid} {name}{memory}", evidence,
                   fix=f"ps -o pid,user,etime,cmd -p {process.pid}   # a leftover? then: kill {process.pid}")


def _chips_of(facts: Any, npu_id: int) -> List[NpuSmiChip]:
    return [chip for chip in facts.table.chips if chip.npu_id == npu_id]


_HUNG = ("(a hung driver or a device that does not answer; raise commands.npu_smi_timeout_s in a site profile "
         "if the node is just slow)")


def _answered(queries: Sequence[Any]) -> Iterable[Outcome]:
    """The calls not started after a hung one, as one ERROR (one per NPU would repeat the same cause)."""
    idle = [q for q in queries if (q.error or "").startswith("not started")]
    if idle:
        yield error(f"{len(idle)} call(s) ({idle[0].command}, ...) {idle[0].error} {_HUNG}", "npu-smi",
                    {"not_started": [q.command for q in idle]})


def _unread(query: Any, chip: Optional[NpuSmiChip], facts: Any, detail: Any) -> Outcome:
    """A per-NPU call that gave nothing: ERROR when npu-smi hung, SKIP with the reason otherwise."""
    subject = chip.subject if chip is not None else f"npu:{query.npu_id}"
    evidence = {"command": query.command, "reason": query.error,
                "chip": chip_identity(facts, query.npu_id, chip.chip_id if chip else None, detail=detail)}
    if query.timed_out:
        return error(f"`{query.command}` did not finish within its time limit {_HUNG}", subject, evidence)
    return skip(f"`{query.command}` could not be read: {query.error}", subject, evidence)


def _answered_calls(facts: Any, detail: Any, topic: str) -> Iterable[Union[Outcome, Tuple[Any, List[NpuSmiChip]]]]:
    """Each per-NPU call of ``topic`` that answered, with the NPU's chips; for the others their ERROR or SKIP
    (the calls not started after a hung one as one ERROR, a call that gave nothing as :func:`_unread`)."""
    queries = detail.of_topic(topic)
    yield from _answered(queries)
    for query in queries:
        if (query.error or "").startswith("not started"):
            continue
        chips = _chips_of(facts, query.npu_id)
        if query.error is not None or not query.details:
            yield _unread(query, chips[0] if len(chips) == 1 else None, facts, detail)
        else:
            yield query, chips


@check("SMI005", stage="npu-smi", title="HBM and DDR memory errors (ECC, isolated pages)", level=2,
       requires=("SMI001",), settings=("commands.npu_smi_timeout_s", "npu_smi.ecc.isolated_pages_limit",
                                       "npu_smi.ecc.isolated_pages_warn_share", "npu_smi.ecc.double_bit",
                                       "npu_smi.ecc.single_bit_warn"))
def memory_errors(ctx: CheckContext) -> Iterable[Outcome]:
    """Reads `npu-smi info -t ecc -i <npu>` for every NPU (``--level 2``): the single- and double-bit ECC error
    counts of each chip's HBM and DDR, since boot and in total, and the pages the chip isolated after errors.

    A double-bit error is uncorrectable: the data was lost and the job on the chip failed (fault code
    ``80E01801``, "restart the job"); ``npu_smi.ecc.double_bit`` says whether it WARNs or FAILs. Each isolated
    page takes memory out of use for good; at ``npu_smi.ecc.isolated_pages_limit`` (64, MindCluster's
    ``80E18402`` "isolated rows have reached 64: replace the NPU") the chip FAILs, and it WARNs from
    ``npu_smi.ecc.isolated_pages_warn_share`` of that. Single-bit errors are corrected; they are judged only when
    ``npu_smi.ecc.single_bit_warn`` is set. The operators' counterpart of ``nvidia-smi -q -d ECC`` and its
    retired pages.

    Fix: restart the job that failed on the chip; reset the chip when idle
    (`npu-smi set -t reset -i <npu> -c <chip>`, printed, never run); when isolated pages near the limit, plan the
    chip's replacement; at the limit take it out of service and have it replaced.
    """
    facts = ctx.facts("npu_smi")
    detail = ctx.facts("npu_smi_detail")
    fine: List[str] = []
    for answer in _answered_calls(facts, detail, "ecc"):
        if isinstance(answer, Outcome):
            yield answer
            continue
        query, chips = answer
        for chip in chips:
            block = query.for_chip(chip.chip_id)
            ids = chip_identity(facts, chip.npu_id, chip.chip_id, chip.bus_id, chip.phy_id, detail)
            if block is None:
                yield skip(f"`{query.command}` has no block for chip {chip.chip_id}", chip.subject, {"chip": ids})
                continue
            verdict = judge_ecc(ctx, block)
            evidence = {"chip": ids, "ecc": verdict.counters, "command": query.command}
            if not verdict.counters:
                yield skip(f"`{query.command}` prints no ECC counter npudoctor knows", chip.subject, evidence)
            elif verdict.severity:
                yield (fail if verdict.severity >= 2 else warn)(
                    chip.subject, f"{chip.name}: {verdict.text}", evidence,
                    fix=verdict.fix(chip.npu_id, chip.chip_id, ids["logic_id"]))
            else:
                fine.append(chip.subject)
    if fine:
        yield passed("npu-smi", f"{len(fine)} chip(s): no double-bit ECC error, isolated pages below "
                                f"{float(setting(ctx, 'npu_smi.ecc.isolated_pages_warn_share')):.0%} of the limit",
                     {"chips": fine})


def _version_key(version: str) -> tuple:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:8])


@check("SMI006", stage="npu-smi", title="Every NPU on the same firmware", level=2, requires=("SMI001",),
       settings=("commands.npu_smi_timeout_s",))
def same_firmware(ctx: CheckContext) -> Iterable[Outcome]:
    """Reads `npu-smi info -t board -i <npu>` for every NPU (``--level 2``) and compares the firmware versions.

    The NPUs of one node are upgraded together (the firmware package is one .run for all of them); an NPU whose
    firmware differs from its siblings missed an upgrade (a failed or interrupted flash, a card swapped in from
    stock) and may behave differently in collectives, or not match the driver. The version most NPUs run is
    the reference; each NPU on another one is a WARN saying whether it is older or newer. ``npudoctor fleet``
    compares the firmware across nodes.

    Fix: upgrade the odd NPU with the firmware package the others run
    (`./Ascend-hdk-<chip>-npu-firmware_<version>.run --full`, then a reboot or
    `npu-smi set -t reset -i <npu> -c 0`), and check `npu-smi info -t board -i <npu>` again.
    """
    facts = ctx.facts("npu_smi")
    detail = ctx.facts("npu_smi_detail")
    firmware: Dict[int, str] = {}
    software: Dict[int, str] = {}
    yield from _answered(detail.of_topic("board"))
    for query in detail.of_topic("board"):
        if (query.error or "").startswith("not started"):
            continue
        chips = _chips_of(facts, query.npu_id)
        block = query.for_chip(None) if query.error is None else None
        version = block.text("firmware version") if block is not None else None
        if query.error is not None or block is None:
            yield _unread(query, chips[0] if len(chips) == 1 else None, facts, detail)
        elif version is None:
            yield skip(f"`{query.command}` prints no Firmware Version", f"npu:{query.npu_id}",
                       {"command": query.command, "chip": chip_identity(facts, query.npu_id, None, detail=detail)})
        else:
            firmware[query.npu_id] = version
            software[query.npu_id] = block.text("software version") or ""
    if not firmware:
        return
    counts: Dict[str, int] = {}
    for version in firmware.values():
        counts[version] = counts.get(version, 0) + 1
    reference = max(counts, key=lambda v: (counts[v], _version_key(v)))
    if len(counts) == 1:
        yield passed("npu-smi", f"{len(firmware)} NPU(s) on firmware {reference}",
                     {"firmware": reference, "npus": sorted(firmware)})
        return
    for npu_id, version in sorted(firmware.items()):
        if version == reference:
            continue
        older = _version_key(version) < _version_key(reference)
        chips = _chips_of(facts, npu_id)
        chip = chips[0] if chips else None
        ids = chip_identity(facts, npu_id, chip.chip_id if chip else None, detail=detail)
        yield warn(chip.subject if chip is not None else f"npu:{npu_id}",
                   f"firmware {version}, {'older' if older else 'newer'} than the {reference} of its "
                   f"{counts[reference]} sibling(s)",
                   {"chip": ids, "firmware": version, "siblings_firmware": reference,
                    "software_version": software.get(npu_id), "firmware_by_npu": dict(sorted(firmware.items()))},
                   fix=f"upgrade NPU {npu_id} to {reference} with the firmware package the others run "
                       f"(./Ascend-hdk-<chip>-npu-firmware_{reference}.run --full), then reboot\n"
                       f"npu-smi info -t board -i {npu_id}   # Firmware Version must read {reference}")


@check("SMI007", stage="npu-smi", title="Chip temperature and power within limits", requires=("SMI001",),
       settings=("npu_smi.temperature_warn_c", "npu_smi.temperature_fail_c", "npu_smi.power_warn_w"))
def heat_and_power(ctx: CheckContext) -> Iterable[Outcome]:
    """Each chip's temperature (and power, where a limit is set) from the ``npu-smi info`` table, against the
    profile's limits: WARN from ``npu_smi.temperature_warn_c``, FAIL from ``npu_smi.temperature_fail_c``;
    ``npu_smi.power_warn_w`` (null by default: rated power differs per card) WARNs above it.

    A hot chip lowers its clock to protect itself (see SMI008) and shuts down at its limit (BMC alarm
    ``0x56000009``, "NPU overheating shutdown"). This reads the table level 1 already has: no extra call.

    Fix: check the node's cooling: fans (`ipmitool sdr type Fan`, the BMC), blocked air inlets, the room or
    rack inlet temperature, the liquid-cooling loop; a single hot chip among cool siblings is a seating or
    heat-sink case for hardware support.
    """
    facts = ctx.facts("npu_smi")
    warn_c = float(setting(ctx, "npu_smi.temperature_warn_c"))
    fail_c = float(setting(ctx, "npu_smi.temperature_fail_c"))
    power_limit = setting(ctx, "npu_smi.power_warn_w")
    readings = [chip for chip in facts.table.chips if chip.temp_c is not None]
    if not readings:
        yield skip("the npu-smi table prints no chip temperature", subject="npu-smi")
        return
    hot = 0
    for chip in readings:
        ids = chip_identity(facts, chip.npu_id, chip.chip_id, chip.bus_id, chip.phy_id,
                            ctx.gathered("npu_smi_detail"))  # level 2's physical ids where SMI005 read them
        evidence = {"chip": ids, "temp_c": chip.temp_c, "power_w": chip.power_w}
        fix = ("check the cooling: fans and the BMC (`ipmitool sdr type Fan`), air inlets, rack inlet air, the "
               "liquid loop; a single hot chip among cool siblings goes to hardware support")
        temp = float(chip.temp_c or 0)
        if temp >= fail_c:
            hot += 1
            yield fail(chip.subject, f"{chip.name}: {temp:g} C, at or above {fail_c:g} C", evidence, fix=fix)
        elif temp >= warn_c:
            hot += 1
            yield warn(chip.subject, f"{chip.name}: {temp:g} C, at or above {warn_c:g} C", evidence, fix=fix)
        elif power_limit is not None and chip.power_w is not None and chip.power_w > float(power_limit):
            hot += 1
            yield warn(chip.subject, f"{chip.name}: {chip.power_w:g} W, above {float(power_limit):g} W", evidence,
                       fix="compare with the card's rated power; check the power supply and the BMC's power "
                           "capping")
    if hot < len(readings):
        temps = [float(c.temp_c or 0) for c in readings]
        powers = [float(c.power_w) for c in readings if c.power_w is not None]
        power = f", {min(powers):g}-{max(powers):g} W" if powers else ""
        yield passed("npu-smi", f"{len(readings) - hot} chip(s) at {min(temps):g}-{max(temps):g} C{power} "
                                f"(WARN from {warn_c:g} C)", {"chips": len(readings) - hot})


@check("SMI008", stage="npu-smi", title="AI Core clock at its rated value", level=2, requires=("SMI001",),
       settings=("commands.npu_smi_timeout_s", "npu_smi.aicore_clock_min_ratio", "npu_smi.aicore_clock_busy_pct"))
def aicore_clock(ctx: CheckContext) -> Iterable[Outcome]:
    """Reads `npu-smi info -t common -i <npu>` for every NPU (``--level 2``): the AI Core's current clock
    (``Aicore curFreq``) against its rated clock (``Aicore Freq``).

    A chip held below ``npu_smi.aicore_clock_min_ratio`` of its rated clock is throttled (too hot, too much
    power drawn) or capped (a power or frequency limit set on it): every step that waits for it runs slower,
    and in data-parallel training the whole job waits for the slowest chip, like an NVIDIA GPU whose
    ``clocks_throttle_reasons`` are active. The chip's temperature and power are shown with it. An idle chip
    lowers its clock on its own (real captures: 800 of 1800 MHz on an idle 910B3, 100 of 1650 MHz at 0 % use), so
    only a chip at least ``npu_smi.aicore_clock_busy_pct`` busy (``Aicore Usage Rate``) is judged; run the check
    while the job trains.

    Fix: see SMI007 for the cooling; a chip that stays slow while cool and idle is capped or faulty: compare
    with its siblings (`npu-smi info -t common -i <npu>`), reset it when idle
    (`npu-smi set -t reset -i <npu> -c <chip>`, printed, never run) and hand it to hardware support if it stays.
    """
    facts = ctx.facts("npu_smi")
    detail = ctx.facts("npu_smi_detail")
    minimum = float(setting(ctx, "npu_smi.aicore_clock_min_ratio"))
    busy_from = float(setting(ctx, "npu_smi.aicore_clock_busy_pct"))
    fine: List[str] = []
    idle: List[str] = []
    for answer in _answered_calls(facts, detail, "common"):
        if isinstance(answer, Outcome):
            yield answer
            continue
        query, chips = answer
        for chip in chips:
            block = query.for_chip(chip.chip_id)
            rated = block.number("aicore freq") if block is not None else None
            current = block.number("aicore curfreq") if block is not None else None
            ids = chip_identity(facts, chip.npu_id, chip.chip_id, chip.bus_id, chip.phy_id, detail)
            if block is None or not rated or current is None:
                yield skip(f"`{query.command}` prints no Aicore Freq and curFreq for chip {chip.chip_id}",
                           chip.subject, {"chip": ids, "command": query.command})
                continue
            temp = block.number("temperature")
            power = block.number("npu real-time power", "power", "power dissipation")
            busy = block.number("aicore usage rate")
            evidence = {"chip": ids, "aicore_mhz": current, "rated_mhz": rated, "ratio": round(current / rated, 3),
                        "temp_c": temp, "power_w": power, "aicore_busy_pct": busy}
            if current < minimum * rated and busy is not None and busy < busy_from:
                idle.append(chip.subject)  # a chip at rest lowers its clock: says nothing about throttling
            elif current < minimum * rated:
                context = ", ".join(part for part in (f"{temp:g} C" if temp is not None else "",
                                                      f"{power:g} W" if power is not None else "") if part)
                load = f" while {busy:g}% busy" if busy is not None else ""
                yield warn(chip.subject, f"{chip.name}: AI Core at {current:g} of its rated {rated:g} MHz "
                                         f"({current / rated:.0%}){load}: throttled or capped"
                           + (f" ({context})" if context else ""), evidence,
                           fix=f"npu-smi info -t common -i {chip.npu_id}   # compare with its siblings\n"
                               "check the cooling and power (SMI007); if it stays slow when cool and idle: "
                               f"npu-smi set -t reset -i {chip.npu_id} -c {chip.chip_id or 0} (printed, never "
                               "run), then hardware support")
            else:
                fine.append(chip.subject)
    if fine:
        yield passed("npu-smi", f"{len(fine)} chip(s) at their rated AI Core clock "
                                f"(WARN below {minimum:.0%})", {"chips": fine})
    if idle:
        yield skip(f"{len(idle)} chip(s) idle (AI Core under {busy_from:g}% busy) with a lowered clock, as idle "
                   "chips run: throttling shows only under load (run the check while a job trains)", "npu-smi",
                   {"chips": idle})
