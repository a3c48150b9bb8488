"""Checks of the workload stage (``--level 3``): does this node really train?

The facts are the ``npudoctor.trainresult/1`` document of a reference CLIP run (a tiny CLIP trained for a
few dozen steps in a child interpreter, its memory log judged for leaks, operators and one whole step compared
with a CPU reference). ``npudoctor train-step`` renders the same checks for its own, in-process run.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional

from npudoctor import install
from npudoctor.checks.registry import CheckContext, Outcome, check, error, fail, passed, setting, skip, warn
from npudoctor.model.units import percent
from npudoctor.parsers.child_output import first_error_line


def _document(ctx: CheckContext) -> Optional[Dict[str, Any]]:
    trial = ctx.facts("train_selftest")
    return trial.result if trial.ran and isinstance(trial.result, dict) else None


def _judge_trained(ctx: CheckContext, outcomes: Callable[[Dict[str, Any]], Iterable[Outcome]]) -> Iterable[Outcome]:
    """``outcomes`` of the training result, or SKIP when the run gave none (TRN001 says why)."""
    document = _document(ctx)
    if document is None or not document.get("train"):
        yield skip("no training result (see TRN001)")
        return
    yield from outcomes(document)


@check("TRN001", stage="workload", title="a CLIP training step runs on the device", level=3,
       settings=("train.timeout_s", "train.steps", "train.batch"))
def device_trains(ctx: CheckContext) -> Iterable[Outcome]:
    """A tiny CLIP (ViT image tower, causal text tower, InfoNCE) trains for a few dozen steps on the best
    device (NPU through torch_npu, else CUDA, else the CPU) in a child interpreter with a timeout.

    Static checks say a node *should* train; this one shows it does: kernels compile and run, the allocator
    works, the optimizer steps. It fails when the step crashes or hangs (the stage it was in is named), and
    is skipped, with the install hint, when the training interpreter has no torch.

    Fix: for a crash, the error text and CANN error codes are in the evidence (see ``npudoctor logs scan
    ~/ascend/log``); for a hang, ``npu-smi info`` and other processes on the NPU; for a missing torch, a CPU
    build of torch (or, on an NPU node, the torch its torch_npu was built for), then ``pip install -e
    '.[train]'`` in a checkout or ``pip install 'npudoctor[train]'`` (numpy); the fix names both.
    """
    trial = ctx.facts("train_selftest")
    evidence: Dict[str, Any] = {"python": trial.python, "stage": trial.last_stage}
    if not trial.ran:
        if trial.error == "timeout":
            yield fail("train-step", f"the training child did not finish within {trial.timeout_s:.0f} s "
                       f"(stuck in: {trial.last_stage or 'start-up'})", evidence,
                       fix="look for a hung device (npu-smi info) or a lock; raise train.timeout_s in the profile")
        else:
            yield skip(f"cannot run {trial.python}: {trial.error}", "train-step", evidence)
        return
    document = trial.result
    if not isinstance(document, dict):
        evidence["output_tail"] = trial.output_tail
        said = first_error_line(trial.output_tail or "")  # the child's own words, not only its exit code
        yield fail("train-step", f"the training child exited ({trial.rc}) without a result, in stage "
                   f"{trial.last_stage or 'start-up'}" + (f": {said}" if said else ""), evidence,
                   fix=install.hint_for_error(said or "") or "see the output in the evidence")
        return
    if document.get("error"):
        evidence["output_tail"] = trial.output_tail
    yield from device_outcome(document, evidence, trial.python)


def device_outcome(document: Dict[str, Any], evidence: Optional[Dict[str, Any]] = None,
                   python: str = "this interpreter") -> Iterable[Outcome]:
    """TRN001 from a trainresult document: torch missing (SKIP), the run broke (FAIL), or it ran (PASS)."""
    evidence = dict(evidence or {})
    if document.get("torch_missing"):
        yield skip(f"torch is not installed for {python}", "train-step", evidence,
                   fix=f"into {python}: {install.train_hint()}")
        return
    evidence.update(device=document.get("device"), device_reason=document.get("device_reason"),
                    torch=document.get("torch"))
    if document.get("error"):
        yield fail(document.get("device") or "train-step",
                   f"{document.get('stage')}: {document['error']}", evidence,
                   fix=install.hint_for_error(str(document["error"]))
                   or "see the error in the evidence; `npudoctor check --level 2` tests the import alone; "
                      "a device out of memory: lower --batch")
        return
    train = document.get("train") or {}
    evidence.update(steps=train.get("steps"),
                    step_ms_median=round(train["step_s_median"] * 1000, 2) if train.get("step_s_median") else None)
    if not train:
        yield error("no training result in the document")
        return
    yield passed(document.get("device") or "?",
                 f"{train.get('steps')} steps of a {train.get('model')} CLIP in {train.get('precision')} "
                 f"({evidence['step_ms_median']} ms/step); chosen because: {document.get('device_reason')}",
                 evidence)


@check("TRN002", stage="workload", title="the training loss falls", level=3, requires=("TRN001",),
       settings=("train.loss_drop_min",))
def loss_falls(ctx: CheckContext) -> Iterable[Outcome]:
    """The InfoNCE loss of the reference run falls below chance (ln of the batch size) on learnable synthetic
    data, and stays finite.

    A loss that does not fall on data a model must learn means the backward pass or the optimizer is broken
    on this stack (a wrong gradient kernel, a silently failing all-reduce, an optimizer that does not update
    parameters); a non-finite loss means an overflow, named with its cause.

    Fix: compare with ``npudoctor train-step --compare-cpu`` (which gradient differs from the CPU's) and
    ``--ops`` (which operator is off); for overflows in fp16, train in bf16.
    """
    yield from _judge_trained(ctx, loss_outcome)


def loss_outcome(document: Dict[str, Any]) -> Iterable[Outcome]:
    train = document["train"]
    losses = [v for v in train.get("losses") or [] if v is not None]
    evidence = {"loss_first": train.get("loss_first"), "loss_last": train.get("loss_last"),
                "steps": train.get("steps"), "overflows": train.get("overflows")[:5] if train.get("overflows") else []}
    subject = document.get("device") or "?"
    overflows = train.get("overflows") or []
    if overflows:
        first = overflows[0]
        yield fail(subject, f"{len(overflows)} step(s) with inf/nan, first at step {first['step']} in "
                   f"{first['tensor']}: {first['cause']}", evidence,
                   fix="train in bf16 (--precision bf16), or keep fp16 with a GradScaler and the logit scale "
                       "clamped at 100")
        return
    if train.get("loss_fell") is None:
        yield skip(f"{train.get('steps')} steps are too few to judge whether the loss falls (20 or more)",
                   subject, evidence, fix="run more steps: --steps 50")
        return
    if train.get("loss_fell"):
        yield passed(subject, f"loss {losses[0]:.3f} -> {losses[-1]:.3f} over {train.get('steps')} steps", evidence)
    else:
        first = f"{losses[0]:.3f}" if losses else "?"
        last = f"{losses[-1]:.3f}" if losses else "?"
        yield fail(subject, f"loss does not fall: {first} -> {last} over {train.get('steps')} steps", evidence,
                   fix="run `npudoctor train-step --compare-cpu` and `--ops` to find the operator or gradient "
                       "that differs from the CPU")


@check("TRN003", stage="workload", title="device and host memory do not leak", level=3, requires=("TRN001",),
       settings=("train.leak.warmup_fraction", "train.leak.alpha", "train.leak.min_device_slope_bytes_per_step",
                 "train.leak.min_host_slope_bytes_per_step", "train.leak.min_growth_bytes",
                 "train.leak.min_exact_growth_bytes", "train.leak.oom_horizon_steps"))
def memory_does_not_leak(ctx: CheckContext) -> Iterable[Outcome]:
    """After its warm-up (found from the series), the allocator's ``allocated`` bytes, the process's RSS and
    malloc in-use bytes, and the DataLoader workers' RSS stay flat from step to step.

    The verdict is a robust trend (Theil-Sen slope, Mann-Kendall test) after a change point, reported as
    bytes/step and over the window with its confidence and the step at which memory would run out; a
    one-time rise is a step, not a leak; growth that slows down is "may still be warm-up" (SKIP). The cause is
    named from the counters: kept tensors, host objects, worker processes; ``reserved`` growing while
    ``allocated`` is flat, or RSS growing through malloc's held bytes while in-use is flat, is fragmentation
    (WARN), which ends in an OOM too.

    Fix: for a leak, something keeps tensors or objects alive across steps (a loss kept with its graph, a
    list of outputs, a cache in the Dataset); for reserved growth,
    ``PYTORCH_NPU_ALLOC_CONF=expandable_segments:True`` (CUDA: ``PYTORCH_CUDA_ALLOC_CONF``) or
    ``empty_cache()`` between phases; for host fragmentation ``MALLOC_ARENA_MAX=2``, ``malloc_trim(0)`` or
    jemalloc. ``npudoctor leak analyze LOG`` judges a log of the user's own job
    (``npudoctor.monitor.MemoryMonitor``).
    """
    yield from _judge_trained(ctx, leak_outcome)


def leak_outcome(document: Dict[str, Any], injected: Any = None) -> Iterable[Outcome]:
    verdict = (document.get("train") or {}).get("verdict") or {}
    subject = document.get("device") or "?"
    keys = ("leak", "kind", "cause", "slope_bytes_per_step", "confidence", "growth_bytes", "projected_oom_step",
            "reserved_growth", "reserved_slope_bytes_per_step", "rss_slope_bytes_per_step",
            "workers_slope_bytes_per_step", "malloc_in_use_slope_bytes_per_step", "malloc_held_slope_bytes_per_step",
            "step_change_bytes", "step_change_at", "warmup_steps", "steps_analyzed", "alloc_retries", "ooms", "notes")
    evidence = {key: verdict.get(key) for key in keys if key in verdict}
    advice = "\n".join(verdict.get("advice") or [])
    summary = verdict.get("summary") or "no verdict"
    if verdict.get("kind") in ("insufficient-data", "warm-up") and injected is None:
        yield skip(summary, subject, evidence, fix=advice)
    elif verdict.get("kind") == "insufficient-data":
        yield skip(summary, subject, evidence)
    elif verdict.get("leak"):
        if injected is not None:
            yield passed(subject, f"the injected leak ({injected}) was found: {summary}", evidence)
        else:
            yield fail(subject, summary, evidence, fix=advice)
    elif injected is not None:
        yield fail(subject, f"a leak was injected ({injected}) but not found: {summary}", evidence,
                   fix="run more steps (--steps), or report this: the detector missed a known leak")
    elif verdict.get("reserved_growth") or verdict.get("host_fragmentation"):
        yield warn(subject, summary, evidence, fix=advice)
    else:
        yield passed(subject, summary, evidence)


@check("TRN004", stage="workload", title="numerics match a CPU reference", level=3, requires=("TRN001",),
       settings=("train.ops_tolerance", "train.compare_cpu.loss_rtol", "train.compare_cpu.grad_norm_rtol"))
def numerics_match(ctx: CheckContext) -> Iterable[Outcome]:
    """Single operators on the device (LayerNorm, GELU erf and tanh, softmax, matmul, logsumexp, bilinear
    interpolation with and without ``align_corners``, edge pixels included) against float64 on the CPU,
    and one whole CLIP step (loss and gradient norm) against the CPU in fp32; on the CPU itself, fp32
    against float64. Tolerances come from the profile (``train.ops_tolerance``, ``train.compare_cpu``).

    A device kernel that is wrong but does not crash (an approximate GELU where the exact one was asked,
    an interpolation that treats the border differently) trains worse without any error message.

    Fix: pin the CANN/torch_npu versions that pass; report the operator with the evidence to the vendor;
    meanwhile run that operator on the CPU or in fp32.
    """
    yield from _judge_trained(ctx, numerics_outcomes)


def numerics_outcomes(document: Dict[str, Any]) -> Iterable[Outcome]:
    subject = document.get("device") or "?"
    ops = document.get("ops")
    compare = document.get("compare_cpu")
    if ops is None and compare is None:
        yield skip("no operator or CPU comparison was run", subject)
        return
    bad: List[str] = []
    evidence: Dict[str, Any] = {}
    for op in ops or []:
        evidence[f"{op['op']}_error"] = op.get("error")
        if op.get("edge_error") is not None:
            evidence[f"{op['op']}_edge_error"] = op.get("edge_error")
        if not op.get("ok"):
            shown = op.get("problem") or f"error {_fmt(op.get('error'))}, edges {_fmt(op.get('edge_error'))} " \
                                         f"> {op.get('tolerance'):g}"
            bad.append(f"{op['op']} ({shown})")
    if compare:
        evidence.update({key: compare.get(key) for key in ("reference", "loss_rel_diff", "grad_norm_rel_diff",
                                                           "worst_param", "worst_param_rel_diff")})
        if not compare.get("ok"):
            bad.append(f"whole step vs {compare.get('reference')}: loss differs by {_fmt(compare.get('loss_rel_diff'))}"
                       f" (tolerance {compare.get('loss_tolerance'):g}), gradient norm by "
                       f"{_fmt(compare.get('grad_norm_rel_diff'))} (tolerance {compare.get('grad_tolerance'):g}); "
                       f"worst parameter {compare.get('worst_param')}")
    if bad:
        yield fail(subject, "; ".join(bad), evidence,
                   fix="report the operator with this evidence; meanwhile run it in fp32 or on the CPU")
        return
    parts = []
    if ops:
        worst = max(ops, key=lambda op: max(op.get("error") or 0, op.get("edge_error") or 0))
        parts.append(f"{len(ops)} operators within {worst['tolerance']:g} (worst {worst['op']} "
                     f"{_fmt(max(worst.get('error') or 0, worst.get('edge_error') or 0))})")
    if compare:
        parts.append(f"whole step vs {compare['reference']}: loss {_fmt(compare['loss_rel_diff'])}, "
                     f"grad norm {_fmt(compare['grad_norm_rel_diff'])}")
    yield passed(subject, "; ".join(parts), evidence)


def _fmt(value: Any) -> str:
    return f"{value:.1e}" if isinstance(value, (int, float)) else "?"


@check("TRN005", stage="workload", title="the input pipeline keeps the device busy", level=3, requires=("TRN001",),
       settings=("train.data_wait_max_fraction",))
def input_keeps_up(ctx: CheckContext) -> Iterable[Outcome]:
    """The share of step time spent waiting for the next batch (DataLoader) stays below
    ``train.data_wait_max_fraction`` of the profile.

    An input-bound node (too few CPU cores or workers, slow storage, a cgroup CPU limit) wastes the device
    however healthy it is.

    Fix: more DataLoader workers (``num_workers``), ``pin_memory=True``, faster storage, or check the
    container's CPU limit.
    """
    limit = float(setting(ctx, "train.data_wait_max_fraction"))
    yield from _judge_trained(ctx, lambda document: data_wait_outcome(document, limit))


def data_wait_outcome(document: Dict[str, Any], limit: float) -> Iterable[Outcome]:
    train = document["train"]
    fraction = train.get("data_wait_fraction")
    subject = document.get("device") or "?"
    if fraction is None:
        yield skip("too few steps to measure the data wait", subject)
        return
    evidence = {"data_wait_fraction": round(fraction, 4), "limit_fraction": limit}
    text = f"{percent(fraction)} of step time waiting for data"
    if fraction > limit:
        yield warn(subject, f"{text} (over {percent(limit, 0)}): input-bound", evidence,
                   fix="raise DataLoader num_workers, pin_memory=True, or check the CPU limit of the container")
    else:
        yield passed(subject, text, evidence)


@check("TRN006", stage="workload", title="no operator falls back to the CPU", level=3, requires=("TRN001",))
def no_cpu_fallback(ctx: CheckContext) -> Iterable[Outcome]:
    """No operator of the reference step runs on the host CPU instead of the NPU: neither one whose
    CPU-fallback warning the run printed (``Warning: CAUTION: The operator 'aten::...' is not currently supported
    on the NPU backend and will fall back to run on the CPU``) nor one that the operator audit predicts from
    the installed torch_npu's own operator list (``npudoctor ops audit --model tiny``).

    A fallback copies the operator's inputs to the host and its outputs back at every call: the step slows
    down by far more than the operator's own time, and the device waits.

    Fix: a torch_npu release that has the operator (``npudoctor ops audit --torch-npu VERSION`` compares
    releases without an NPU), or replace the operator in the model (or move it out of the training step).
    """
    yield from _judge_trained(ctx, fallback_outcomes)


def fallback_outcomes(document: Dict[str, Any]) -> Iterable[Outcome]:
    """TRN006 from the run's recorded warnings (``train.cpu_fallbacks``) and the audit (``ops_audit``)."""
    train = document.get("train") or {}
    seen = [e for e in train.get("cpu_fallbacks") or [] if isinstance(e, dict) and e.get("op")]
    audit = document.get("ops_audit") if isinstance(document.get("ops_audit"), dict) else None
    fix = ("npudoctor ops audit --model tiny --torch-npu VERSION compares torch_npu releases; use one that has "
           "the operator, or replace it in the model")
    for entry in seen:
        yield warn(str(entry["op"]), f"fell back to the CPU while training (first at step {entry.get('first_step')}, "
                   f"warned {entry.get('count')} time(s))", {"first_step": entry.get("first_step"),
                                                             "count": entry.get("count")}, fix=fix)
    printed = {str(e["op"]) for e in seen}
    predicted = [p for p in (audit or {}).get("fallbacks") or [] if isinstance(p, dict) and p.get("name")]
    release = (audit or {}).get("list") or "this torch_npu"
    for op in predicted:
        if str(op["name"]) in printed:
            continue
        yield warn(str(op["name"]), f"falls back to the CPU on {release} (predicted by the operator audit; "
                   f"x{op.get('count')} per step)", {"count": op.get("count")}, fix=fix)
    if seen or predicted:
        return
    device = document.get("device") or "?"
    if audit is None and "cpu_fallbacks" not in train:
        yield skip("this run recorded no CPU-fallback warnings and no operator audit"
                   + (f" ({document['ops_audit_error']})" if document.get("ops_audit_error") else ""), device)
        return
    parts = [f"no CPU-fallback warning in {train.get('steps') or 0} steps"]
    if audit is not None:
        parts.append(f"none of {audit.get('operators')} operators falls back on {audit.get('list')}")
    elif document.get("ops_audit_error"):
        parts.append(f"operator audit not run: {document['ops_audit_error']}")
    yield passed(device, "; ".join(parts), {"audited_operators": (audit or {}).get("operators")})
