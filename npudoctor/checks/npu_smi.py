"""Checks of the npu-smi stage: does ``npu-smi info`` run, is every chip healthy, does it see every NPU on
the bus, and is anything else already using the NPUs.

For newcomers from NVIDIA: ``npu-smi`` is the Ascend ``nvidia-smi``. It ships with the driver (usually in
/usr/local/sbin), talks to the driver through DCMI, and prints one table with two rows per chip. An NPU is a
card; a chip (die) is what one training process uses. Most NPUs have one chip; an Atlas 300I Duo has two per
card, and an Atlas A3 NPU has two dies.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Sequence

from npudoctor import knowledge
from npudoctor.checks.registry import (
    NOT_AN_ASCEND_NODE,
    CheckContext,
    Outcome,
    check,
    error,
    fail,
    passed,
    skip,
    warn,
)
from npudoctor.parsers.npu_smi import NpuSmiChip, NpuSmiFailure

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
                                         "partial": table.partial})
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
       settings=("npu_smi.health_detail_max_chips",))
def chip_health(ctx: CheckContext) -> Iterable[Outcome]:
    """Every chip's Health column in ``npu-smi info`` must read OK.

    ``Warning`` (WARN) means the chip has a minor fault but still works; ``Alarm`` and ``Critical`` (FAIL)
    mean a fault that can break or slow training (memory errors, over-temperature, a link down). The
    Health word is npu-smi's summary of the chip's error codes, like ``nvidia-smi -q``'s retired pages and
    Xid events.

    For each chip that is not OK npudoctor also runs `npu-smi info -t health -i <npu> -c <chip>` (at most
    ``npu_smi.health_detail_max_chips`` of them, profile) and shows its error codes.

    Fix: read the error codes with `npu-smi info -t health -i <npu> -c <chip>`, and the kernel side with
    `dmesg | grep -i -E "devdrv|davinci"`. Then, on an idle chip, reset it with
    `npu-smi set -t reset -i <npu> -c <chip>` (printed, never run by npudoctor); if the state comes back,
    hand the node to hardware support.
    """
    levels = {word.lower(): level for word, level in knowledge.load("npu_smi_errors")["health"].items()}
    facts = ctx.facts("npu_smi")
    for chip in facts.table.chips:
        evidence = _chip_evidence(chip)
        level = levels.get(chip.health.strip().lower())
        if level == "pass":
            yield passed(chip.subject, f"{chip.name}: {chip.health}", evidence)
            continue
        detail = f"{chip.name}: health {chip.health}"
        health = facts.health_details.get(chip.subject)
        if health:
            evidence["health_query"] = dict(health)
            codes = [f"{key} {value}" for key, value in health.items()
                     if key.lower().startswith("error") and value not in ("NA", "")]
            if codes:
                detail += " (" + "; ".join(codes) + ")"
        where = f"-i {chip.npu_id} -c {chip.chip_id or 0}"
        fix = (f"npu-smi info -t health {where}   # the error codes\n"
               f"npu-smi set -t reset {where}   # on an idle chip; reboot if the state comes back")
        if level == "fail":
            yield fail(chip.subject, detail, evidence, fix=fix)
        elif level == "warn":
            yield warn(chip.subject, detail, evidence, fix=fix)
        else:
            yield warn(chip.subject, f"{detail}: a Health value npudoctor does not know", evidence, fix=fix)


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
    job_pids = frozenset(ctx.options.get(JOB_PIDS_OPTION) or ())
    for process in table.processes:
        subject = f"npu:{process.npu_id}" + ("" if process.chip_id is None else f"/chip:{process.chip_id}")
        name = process.name or "(no name shown)"
        memory = f", {process.memory_mib} MiB device memory" if process.memory_mib is not None else ""
        evidence = {"pid": process.pid, "name": process.name, "memory_mib": process.memory_mib}
        if process.pid in job_pids:
            yield passed(subject, f"the followed job: pid {process.pid} {name}{memory}", {**evidence, "job": True})
            continue
        yield warn(subject, f"pid {process.pid} {name}{memory}", evidence,
                   fix=f"ps -o pid,user,etime,cmd -p {process.pid}   # a leftover? then: kill {process.pid}")
