"""The collective probe: all_reduce / all_gather / broadcast over torch.distributed, measured like nccl-tests.

Each process of a ``torchrun`` job runs :func:`run_worker`; rank 0 assembles the ``npudoctor.collective/1``
document. ``npudoctor collective --nproc-per-node N`` starts torchrun itself on one node; across nodes, run
``torchrun --nnodes ... -m npudoctor.collective`` yourself (same options). torch (and torch_npu for HCCL) are
imported only inside the functions that run the collectives.

Figures, per operation and message size, as nccl-tests and hccl_test print them:

* time: the mean time of one operation on the slowest rank (a collective ends when its last rank does);
* algbw = size / time (GB/s, 1e9 bytes); busbw = algbw x factor, the factor making numbers comparable with
  the link's bandwidth whatever the rank count: all_reduce 2(n-1)/n, all_gather (n-1)/n, broadcast 1.
  For all_gather the size is the gathered output (each rank sends size/n), as in nccl-tests.

Findings COL001 (correct results), COL002 (bus bandwidth against the profile) and COL003 (the slowest
rank) are checks over the finished run's document, registered in the rulebook; their docstrings are what
``npudoctor explain COL001`` prints.
"""

from __future__ import annotations

import os
import re
import statistics
import textwrap
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from npudoctor.errors import InputError
from npudoctor.knowledge import setting
from npudoctor.model import rulebook
from npudoctor.model.finding import Finding, Report, Status
from npudoctor.parsers import jsondoc
from npudoctor.untrusted import clean, clean_value

SCHEMA = "npudoctor.collective/1"
OPS = ("all_reduce", "all_gather", "broadcast")
UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
DEFAULT_SIZES = {"gloo": "1K,1M,16M", "hccl": "1K,1M,64M,1G", "nccl": "1K,1M,64M,1G"}
class CollectiveError(InputError):
    """Bad options: one line for the user."""


def parse_sizes(text: str) -> List[int]:
    """``"1K,1M,64M,1G"`` -> bytes.

    >>> parse_sizes("1K, 1M,64m,1G,4096")
    [1024, 1048576, 67108864, 1073741824, 4096]
    """
    sizes = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*([KMGkmg]?)[iI]?[Bb]?\s*", part)
        if not match or int(match.group(1)) == 0:
            raise CollectiveError(f"--sizes: {part.strip()!r} is not a size such as 1K, 64M or 1G")
        sizes.append(int(match.group(1)) * UNITS[match.group(2).upper()])
    return sizes


def parse_ops(text: str) -> List[str]:
    ops = [op.strip() for op in text.split(",") if op.strip()]
    if ops == ["all"]:
        return list(OPS)
    unknown = [op for op in ops if op not in OPS]
    if unknown or not ops:
        raise CollectiveError(f"--ops: unknown {', '.join(unknown) or '(none)'}; choose from {', '.join(OPS)}")
    return ops


def bus_factor(op: str, ranks: int) -> float:
    """nccl-tests' bus bandwidth factor.

    >>> bus_factor("all_reduce", 8), bus_factor("all_gather", 8), bus_factor("broadcast", 8)
    (1.75, 0.875, 1.0)
    """
    if op == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if op == "all_gather":
        return (ranks - 1) / ranks
    return 1.0


def human_size(size: int) -> str:
    """>>> human_size(1024), human_size(64 * 1024 ** 2), human_size(1000)
    ('1K', '64M', '1000B')
    """
    for unit in ("G", "M", "K"):
        if size >= UNITS[unit] and size % UNITS[unit] == 0:
            return f"{size // UNITS[unit]}{unit}"
    return f"{size}B"


def under_torchrun(environ: Mapping[str, str]) -> bool:
    return all(name in environ for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


# -- the worker (one per rank, under torchrun) --------------------------------------------------------------
def pick_backend(requested: str) -> str:
    """``auto``: HCCL when torch_npu imports, else NCCL when CUDA is there, else gloo on the CPU."""
    if requested != "auto":
        return requested
    try:
        import torch_npu  # noqa: F401
    except Exception:  # ImportError, or torch_npu failing without CANN
        pass
    else:
        return "hccl"
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def run_worker(backend: str, sizes: Sequence[int], ops: Sequence[str], iters: int, warmup: int,
               timeout_s: float = 300.0) -> Optional[Dict[str, Any]]:
    """Run every (op, size) on this rank; rank 0 returns the document, the other ranks None."""
    import datetime
    import socket

    import torch
    import torch.distributed as dist

    backend = pick_backend(backend)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if backend == "hccl":
        import torch_npu  # noqa: F401  (registers the npu device and the hccl backend)

        torch.npu.set_device(local_rank)  # type: ignore[attr-defined]
        device = torch.device(f"npu:{local_rank}")
        synchronize = torch.npu.synchronize  # type: ignore[attr-defined]
    elif backend == "nccl":
        torch.cuda.set_device(local_rank)
        device = torch.device(f"cuda:{local_rank}")
        synchronize = torch.cuda.synchronize
    else:
        device = torch.device("cpu")

        def synchronize() -> None:  # gloo on the CPU: every call has finished when it returns
            return None

    dist.init_process_group(backend=backend, timeout=datetime.timedelta(seconds=timeout_s))
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        hosts: List[Any] = [None] * world
        dist.all_gather_object(hosts, socket.gethostname())
        rows = []
        for op in ops:
            for size in sizes:
                rows.append(_measure(dist, torch, device, synchronize, op, size, rank, world,
                                     _iterations(size, iters), warmup))
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    return {
        "schema": SCHEMA, "backend": backend, "device": device.type, "world_size": world, "hosts": hosts,
        "iters": iters, "warmup": warmup, "results": rows,
    }


def _iterations(size: int, iters: int) -> int:
    """Fewer repetitions for big messages (a 1 GiB all_reduce takes tens of ms even on HCCS)."""
    return max(2, min(iters, (4 * UNITS["G"]) // size))


def _measure(dist: Any, torch: Any, device: Any, synchronize: Any, op: str, size: int, rank: int, world: int,
             iters: int, warmup: int) -> Dict[str, Any]:
    numel = max(world if op == "all_gather" else 1, size // 4)  # float32 elements
    chunk = max(1, numel // world)
    if op == "all_gather":
        numel = chunk * world

    def run_once(value: float) -> Any:
        if op == "all_reduce":
            tensor = torch.full((numel,), value, dtype=torch.float32, device=device)
            dist.all_reduce(tensor)
            return tensor
        if op == "all_gather":
            send = torch.full((chunk,), value, dtype=torch.float32, device=device)
            parts = [torch.empty(chunk, dtype=torch.float32, device=device) for _ in range(world)]
            dist.all_gather(parts, send)
            return parts
        tensor = torch.full((numel,), value if rank == 0 else 0.0, dtype=torch.float32, device=device)
        dist.broadcast(tensor, src=0)
        return tensor

    # Correctness first, on values every rank can predict.
    received = run_once(float(rank + 1) if op != "broadcast" else 7.0)
    synchronize()
    if op == "all_reduce":
        correct = bool(torch.all(received == world * (world + 1) / 2).item())
    elif op == "all_gather":
        correct = all(bool(torch.all(part == r + 1).item()) for r, part in enumerate(received))
    else:
        correct = bool(torch.all(received == 7.0).item())
    # Then the timing, on buffers allocated once.
    if op == "all_gather":
        send = torch.ones(chunk, dtype=torch.float32, device=device)
        parts = [torch.empty(chunk, dtype=torch.float32, device=device) for _ in range(world)]

        def call() -> None:
            dist.all_gather(parts, send)
    else:
        buffer = torch.ones(numel, dtype=torch.float32, device=device)

        def call() -> None:
            if op == "all_reduce":
                dist.all_reduce(buffer)
            else:
                dist.broadcast(buffer, src=0)
    for _ in range(warmup):
        call()
    synchronize()
    dist.barrier()
    started = time.perf_counter()
    for _ in range(iters):
        call()
    synchronize()
    mine_us = (time.perf_counter() - started) / iters * 1e6
    stats = torch.tensor([mine_us, 1.0 if correct else 0.0], dtype=torch.float64, device=device)
    gathered = [torch.zeros(2, dtype=torch.float64, device=device) for _ in range(world)]
    dist.all_gather(gathered, stats)
    per_rank = [(float(t[0].item()), bool(t[1].item())) for t in gathered]
    return row(op, numel * 4, world, [t for t, _ in per_rank], [ok for _, ok in per_rank], iters)


def row(op: str, size: int, world: int, rank_times_us: Sequence[float], rank_correct: Sequence[bool],
        iters: int) -> Dict[str, Any]:
    """One line of results from each rank's mean time and correctness (pure: also used by tests)."""
    slowest = max(range(world), key=lambda r: rank_times_us[r])
    time_us = rank_times_us[slowest]
    algbw = size / (time_us * 1e-6) / 1e9 if time_us > 0 else 0.0
    return {
        "op": op, "size_bytes": size, "iters": iters, "time_us": round(time_us, 2),
        "algbw_gbps": round(algbw, 3), "busbw_gbps": round(algbw * bus_factor(op, world), 3),
        "correct": all(rank_correct), "wrong_ranks": [r for r in range(world) if not rank_correct[r]],
        "slowest_rank": slowest, "rank_times_us": [round(t, 2) for t in rank_times_us],
    }


# -- findings ------------------------------------------------------------------------------------------------
def _finding(check_id: str, status: Status, subject: str, detail: str, evidence: Optional[Dict[str, Any]] = None,
             fix: str = "") -> Finding:
    return Finding(check_id, status, rulebook.REGISTRY[check_id].title, subject, detail, evidence or {}, fix,
                   stage="collective")


def failed_run(reason: str, output: str) -> List[Finding]:
    """ERROR findings for a run that did not finish, with the error codes in its output explained."""
    from npudoctor import install
    from npudoctor.logs.codes import explain, find_codes
    from npudoctor.parsers.child_output import first_error_line

    explained = [info for info in (explain(code) for code in find_codes(output)[:5]) if info is not None]
    detail = reason + "".join(f"; {i.code}: {i.title} ({i.meaning})" for i in explained)
    # a fix that fits the ranks' own error: a missing module is an install, not an HCCL setting
    fix = install.hint_for_error(first_error_line(output) or reason) or next(
        (i.fix for i in explained if i.fix), "") or (
        "run `npudoctor check` on every node first (HCCL stage: HCCL_IF_IP, HCCL_SOCKET_IFNAME, RoCE links)")
    tail = "\n".join(output.strip().splitlines()[-12:])
    return [_finding("COL001", Status.ERROR, "collective", detail, {"codes": [i.code for i in explained],
                                                                    "output_tail": tail}, fix)]


COL_SETTINGS = ("fleet.collective.busbw_gbps.all_reduce", "fleet.collective.busbw_gbps.all_gather",
                "fleet.collective.busbw_gbps.broadcast", "fleet.collective.min_busbw_fraction")
CollectiveCheck = Callable[[Mapping[str, Any], Any], List[Finding]]


def _collective_check(check_id: str, title: str, settings: Sequence[str] = ()) -> Callable[[CollectiveCheck],
                                                                                         CollectiveCheck]:
    """Register a check over a finished run's document in the rulebook (room "collective")."""
    return rulebook.check(check_id, "collective", title, "collective", settings=settings)


def findings(document: Mapping[str, Any], profile: Any) -> List[Finding]:
    """COL001-COL003 for a finished run."""
    return [finding for spec in rulebook.specs("collective") if spec.func is not None
            for finding in spec.func(document, profile)]


@_collective_check("COL001", "Collective results are correct")
def correct_results(document: Mapping[str, Any], profile: Any) -> List[Finding]:
    """Every rank checks the values a collective returned: all_reduce of rank+1 must sum to n(n+1)/2 on every
    rank, all_gather must return each rank's own chunk, broadcast the root's values.

    A run that fails to start or crashes is an ERROR; HCCL/CANN error codes in its output (EI0006, errNo
    0x0501...) are explained from the log doctor's code base, with their fix.

    Fix: a wrong value with no error is a hardware or driver fault (memory, a link corrupting data): run
    ``npu-smi info -t health`` on the nodes of the named ranks and ``npudoctor check``.
    """
    rows: List[Mapping[str, Any]] = document.get("results") or []
    world = int(document.get("world_size") or 1)
    wrong = [r for r in rows if not r["correct"]]
    out = [_finding("COL001", Status.FAIL, f"{r['op']}:{human_size(r['size_bytes'])}",
                    f"wrong values received on rank(s) {', '.join(map(str, r['wrong_ranks']))}",
                    {"wrong_ranks": r["wrong_ranks"]},
                    "a wrong result with no error is a hardware or driver fault: run `npu-smi info -t health`"
                    " on the node(s) of those ranks and `npudoctor check`") for r in wrong]
    if not wrong:
        out.append(_finding("COL001", Status.PASS, "collective",
                            f"{len(rows)} operation(s) on {world} rank(s) returned the expected values"))
    return out


@_collective_check("COL002", "Bus bandwidth as the profile expects", settings=COL_SETTINGS)
def bandwidth(document: Mapping[str, Any], profile: Any) -> List[Finding]:
    """Bus bandwidth (busbw, as nccl-tests and hccl_test compute it: all_reduce algbw x 2(n-1)/n, all_gather
    x (n-1)/n, broadcast x 1) at the largest message size reaches ``fleet.collective.min_busbw_fraction``
    (0.8) of ``fleet.collective.busbw_gbps.<op>`` in the profile.

    Without an expected value, or on gloo (the CPU says nothing about NPU links): SKIP with the measured
    figure.

    Fix: below expectation, check each NPU's RoCE link and speed (``hccn_tool -i N -link -g``,
    ``-speed -g``), PCIe widths (``npudoctor check --only PCI003,HCCL``) and that no other job shares the
    NPUs. Pin the figure a good node measures in the site profile.
    """
    rows: List[Mapping[str, Any]] = document.get("results") or []
    expected: Mapping[str, Any] = profile.get("fleet.collective.busbw_gbps", None) or {}
    fraction = float(setting(profile, "fleet.collective.min_busbw_fraction"))
    backend = document.get("backend")
    result = []
    for op in dict.fromkeys(r["op"] for r in rows):
        largest = max((r for r in rows if r["op"] == op), key=lambda r: r["size_bytes"])
        want = expected.get(op) if isinstance(expected, Mapping) else None
        subject = f"{op}:{human_size(largest['size_bytes'])}"
        if not isinstance(want, (int, float)) or isinstance(want, bool) or backend == "gloo":
            why = ("gloo on the CPU says nothing about the NPU links" if backend == "gloo" else
                   f"profile {profile.name} expects no bus bandwidth (fleet.collective.busbw_gbps.{op})")
            result.append(_finding("COL002", Status.SKIP, subject,
                                   f"measured {largest['busbw_gbps']:g} GB/s; {why}"))
            continue
        evidence = {"busbw_gbps": largest["busbw_gbps"], "expected_gbps": want, "min_fraction": fraction}
        if largest["busbw_gbps"] >= fraction * want:
            result.append(_finding("COL002", Status.PASS, subject,
                                   f"bus bandwidth {largest['busbw_gbps']:g} GB/s (expected {want:g})", evidence))
        else:
            result.append(_finding(
                "COL002", Status.FAIL, subject,
                f"bus bandwidth {largest['busbw_gbps']:g} GB/s, below {fraction:.0%} of the expected {want:g} GB/s",
                evidence, "check the links: `hccn_tool -i N -link -g` and `-speed -g` per NPU, PCIe widths "
                          "(`npudoctor check --only PCI003,HCCL`), and that no other job shares the NPUs"))
    return result


@_collective_check("COL003", "No rank much slower than the others",
                   settings=("fleet.collective.slow_rank_factor",))
def slow_rank(document: Mapping[str, Any], profile: Any) -> List[Finding]:
    """No rank's total time over all measured operations exceeds ``fleet.collective.slow_rank_factor``
    (1.5) times the median rank's; the slowest rank and its host are named either way.

    One slow rank stalls every step of a data-parallel job.

    Fix: check its node with ``npudoctor check`` (chip health, PCIe width, other processes holding the NPU).
    """
    return [_slowest(document.get("results") or [], int(document.get("world_size") or 1),
                     document.get("hosts") or [], profile)]


def _slowest(rows: Sequence[Mapping[str, Any]], world: int, hosts: Sequence[Any], profile: Any) -> Finding:
    if world < 2 or not rows:
        return _finding("COL003", Status.SKIP, "collective", "one rank: nothing to compare")
    totals = [sum(r["rank_times_us"][rank] for r in rows) for rank in range(world)]
    slowest = max(range(world), key=lambda rank: totals[rank])
    median = statistics.median(totals)
    factor = float(setting(profile, "fleet.collective.slow_rank_factor"))
    ratio = totals[slowest] / median if median > 0 else 1.0
    host = f" on {hosts[slowest]}" if slowest < len(hosts) and hosts[slowest] else ""
    evidence = {"slowest_rank": slowest, "host": hosts[slowest] if slowest < len(hosts) else None,
                "ratio_to_median": round(ratio, 3), "rank_totals_us": [round(t, 1) for t in totals]}
    detail = f"slowest rank {slowest}{host}: {ratio:.2f}x the median rank's total time"
    if ratio > factor:
        return _finding("COL003", Status.WARN, f"rank:{slowest}", detail, evidence,
                        "a rank much slower than the rest stalls every step of the job: check its node with "
                        "`npudoctor check` (chip health, PCIe width, other processes on the NPU)")
    return _finding("COL003", Status.PASS, f"rank:{slowest}", detail, evidence)


# -- output ---------------------------------------------------------------------------------------------------
def header(document: Mapping[str, Any]) -> str:
    """What ran, from what is known: a run that failed before rank 0 reported names what was asked for, never
    "None" or "0 node(s)".

    >>> header({"backend": "gloo", "world_size": 2, "hosts": ["a", "a"], "device": "cpu"})
    'npudoctor collective: backend gloo, 2 rank(s) on 1 node(s), device cpu'
    >>> header({"requested": {"backend": "gloo", "nproc_per_node": 2}, "error": "torchrun exited with code 1"})
    'npudoctor collective: backend gloo, 2 rank(s) on this node asked for; the run did not finish'
    """
    if document.get("world_size") is None:
        asked = document.get("requested") or {}
        parts = [f"backend {asked['backend']}" if asked.get("backend") else "",
                 f"{asked['nproc_per_node']} rank(s) on this node asked for" if asked.get("nproc_per_node") else ""]
        what = ", ".join(p for p in parts if p) or "no rank reported"
        return f"npudoctor collective: {what}; the run did not finish"
    parts = [f"backend {document.get('backend')}" if document.get("backend") else "",
             f"{document['world_size']} rank(s)"
             + (f" on {len(set(document['hosts']))} node(s)" if document.get("hosts") else ""),
             f"device {document['device']}" if document.get("device") else ""]
    return "npudoctor collective: " + ", ".join(p for p in parts if p)


def render_text(document: Mapping[str, Any], found: Sequence[Finding], width: int = 80) -> str:
    """The house style of `check`: the title line, what ran, the table, the findings with their fixes, the
    summary line and the verdict sentence last."""
    from npudoctor import __version__
    from npudoctor.report.console import summary, title_line, verdict, wrap
    from npudoctor.report.symbols import SYMBOL

    what = header(document).replace("npudoctor collective: ", "", 1)
    lines = [title_line("collective", __version__, started=time.time()).plain, *wrap(what, width)]
    rows = document.get("results") or []
    if rows:
        lines.append(f"{'op':<11}{'size':>6}{'time us':>12}{'algbw GB/s':>12}{'busbw GB/s':>12}  check  slowest")
        for r in rows:
            lines.append(f"{r['op']:<11}{human_size(r['size_bytes']):>6}{r['time_us']:>12.1f}{r['algbw_gbps']:>12.3f}"
                         f"{r['busbw_gbps']:>12.3f}  {'ok' if r['correct'] else 'WRONG':<5}  rank {r['slowest_rank']}")
    lines.append("")
    for finding in found:  # the check layout at 80 columns: the line, then the detail and fix indented
        lines.append(f"  {SYMBOL[finding.status]} {finding.id:<7} {finding.title}"
                     f"{f' [{finding.subject}]' if finding.subject else ''}")
        lines += textwrap.wrap(finding.detail, width, initial_indent=" " * 12, subsequent_indent=" " * 12)
        if finding.fix and finding.status in (Status.FAIL, Status.WARN, Status.ERROR):
            lines += textwrap.wrap(finding.fix, width, initial_indent=" " * 12 + "fix: ",
                                   subsequent_indent=" " * 17, break_on_hyphens=False)
    report = Report(findings=list(found))
    ranks = document.get("world_size")
    scope = f"in {ranks} rank{'s' * (ranks != 1)}" if isinstance(ranks, int) else "in the collective run"
    lines += ["", summary(report).plain, *wrap(verdict(report, scope=scope), width)]
    return clean("\n".join(lines)) + "\n"  # host and device names come from the ranks: data, never escapes


def to_json(document: Mapping[str, Any], found: Sequence[Finding]) -> str:
    """The run's document (rank output included when it failed: cleaned like every report) and findings."""
    from npudoctor.report import json_report

    return json_report.document_text(clean_value({**document, "schema": SCHEMA,
                                                  "findings": [f.to_dict() for f in found]}))


# -- launching torchrun on this node --------------------------------------------------------------------------
def launch(nproc: int, worker_args: Sequence[str], timeout_s: float) -> Dict[str, Any]:
    """Run ``python -m torch.distributed.run --standalone --nproc-per-node N -m npudoctor.collective ARGS`` and
    return rank 0's document, or ``{"error": reason, "output": text}`` when the run did not finish."""
    import shutil
    import sys

    from npudoctor.probes.proctree import private_folder, stop_on_sigterm

    # SIGTERM stops the ranks as Ctrl-C does; a folder a SIGKILLed run left is removed by the next run
    with stop_on_sigterm():
        tmp = private_folder("collective")
        try:
            return _launch_into(tmp, nproc, worker_args, timeout_s, sys.executable)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _launch_into(tmp: str, nproc: int, worker_args: Sequence[str], timeout_s: float, python: str) -> Dict[str, Any]:
    """:func:`launch` with its files in ``tmp``."""
    result_file = os.path.join(tmp, "result.json")
    argv = [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "npudoctor.collective", *worker_args, "--result-file", result_file]
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    returncode, output = run_group(argv, timeout_s, env)
    if returncode is None:
        return {"error": f"torchrun did not finish within {timeout_s:g} s and was stopped", "output": output}
    if returncode != 0 or not os.path.exists(result_file):
        # the ranks' own first error, not torchrun's last line (a row of "=" after ChildFailedError)
        from npudoctor.parsers.child_output import first_error_line

        last = next((line for line in reversed(output.strip().splitlines()) if line.strip()), "")
        said = first_error_line(output) or last[:200]
        return {"error": f"torchrun exited with code {returncode}: {said}", "output": output}
    with open(result_file, "rb") as handle:
        document: Dict[str, Any] = jsondoc.loads(handle.read(), result_file)
    return document


#: What is kept of torchrun's output (a rank may write GBs to stderr): the start, where the first error usually
#: is, and the end, where torchrun's summary is.
OUTPUT_HEAD_BYTES = 64 << 10
OUTPUT_TAIL_BYTES = 256 << 10
#: SIGTERM reaches torchrun and every worker at once (each in its own session); those still running after
#: this long get SIGKILL.
STOP_GRACE_S = 10.0
#: A run whose torchrun exited while a leftover process still holds the output pipe is answered after this.
PIPE_GRACE_S = 1.0


class OutputKeeper:
    """The first ``head`` and last ``tail`` bytes of a stream, and how many were left out between them."""

    def __init__(self, head: int = OUTPUT_HEAD_BYTES, tail: int = OUTPUT_TAIL_BYTES) -> None:
        self.head_size, self.tail_size = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.head_size - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > 2 * self.tail_size:  # trimmed in steps, not on every read
            cut = len(self.tail) - self.tail_size
            del self.tail[:cut]
            self.dropped += cut

    def text(self) -> str:
        if len(self.tail) > self.tail_size:
            cut = len(self.tail) - self.tail_size
            del self.tail[:cut]
            self.dropped += cut
        gap = f"\n[... {self.dropped} bytes of output not kept ...]\n".encode() if self.dropped else b""
        return (bytes(self.head) + gap + bytes(self.tail)).decode("utf-8", errors="replace")


def run_group(argv: Sequence[str], timeout_s: float, env: Mapping[str, str]) -> Tuple[Optional[int], str]:
    """Run ``argv`` in its own process group; its exit code (None when stopped at ``timeout_s``) and output
    (a bounded head and tail of it: :class:`OutputKeeper`).

    On a timeout or Ctrl-C the whole tree is stopped, not only torchrun: its workers (a rank hung in HCCL) run
    in sessions of their own and would otherwise run on, holding the devices. Whatever the run leaves behind
    after a normal exit is stopped too (:class:`npudoctor.probes.proctree.ProcessTree`).
    """
    import select
    import subprocess
    import time

    from npudoctor.probes.proctree import ProcessTree

    tree = ProcessTree()
    process = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(env),
                               start_new_session=True)
    tree.watch(process.pid)
    assert process.stdout is not None
    fd = process.stdout.fileno()
    kept = OutputKeeper()
    deadline = time.monotonic() + timeout_s
    exited_at: Optional[float] = None
    stopped = False
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                stopped = True
                break
            if exited_at is None and process.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at >= PIPE_GRACE_S:
                break  # torchrun is gone; a leftover holds the pipe: it is stopped below
            ready, _, _ = select.select([fd], [], [], min(0.5, deadline - now))
            if ready:
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                kept.add(data)
            else:
                tree.refresh()  # keeps sight of a detaching worker where no subreaper is possible
    except KeyboardInterrupt:
        tree.stop(grace_s=STOP_GRACE_S)
        process.wait()
        process.stdout.close()
        raise
    tree.stop(grace_s=STOP_GRACE_S)
    process.wait()
    _drain(fd, kept)
    process.stdout.close()
    return (None if stopped else process.returncode), kept.text()


def _drain(fd: int, kept: OutputKeeper) -> None:
    """What is left in the pipe once every writer is gone (bounded: the writers cannot write any more)."""
    import select

    while select.select([fd], [], [], 0)[0]:
        data = os.read(fd, 1 << 16)
        if not data:
            return
        kept.add(data)
