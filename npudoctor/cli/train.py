"""``npudoctor train-step`` and ``npudoctor leak analyze``: thin commands over ``npudoctor.workload``."""

from __future__ import annotations

import os
import platform
import time
from typing import Any, Optional

import click

from npudoctor.cli.common import EXIT_FINDINGS, EXIT_INTERRUPTED, EXIT_OK, PATH, fail_usage
from npudoctor.report.progress import Progress
from npudoctor.untrusted import clean_value


@click.command("train-step")
@click.option("--device", "device_name", type=click.Choice(["auto", "npu", "cuda", "cpu"]), default="auto",
              show_default=True, help="auto: npu (torch_npu), then cuda, then cpu.")
@click.option("--model", type=click.Choice(["tiny", "vit-b-32"]), default="tiny", show_default=True,
              help="tiny trains on a CPU in seconds; vit-b-32 is OpenAI's ViT-B/32.")
@click.option("--batch", type=click.IntRange(2, 65536), default=32, show_default=True)
@click.option("--steps", type=click.IntRange(1, 10_000_000), default=50, show_default=True)
@click.option("--precision", type=click.Choice(["fp32", "bf16", "fp16"]), default="fp32", show_default=True)
@click.option("--workers", type=click.IntRange(0, 256), default=0, show_default=True, help="DataLoader workers.")
@click.option("--log", "log_path", type=PATH, metavar="FILE.jsonl",
              help="Append one npudoctor.memlog/2 line per step (never truncated).")
@click.option("--weights", type=PATH, metavar="FILE", help="Load a CLIP state dict (OpenAI parameter names).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--lr", type=click.FloatRange(0, 1, min_open=True), default=5e-4, show_default=True)
@click.option("--inject-leak", "inject_leak", metavar="BYTES|graph",
              help="Prove the leak detector: keep BYTES (e.g. 1MiB) per step, or the loss with its graph.")
@click.option("--compare-cpu", is_flag=True, help="Also compare one seeded step (loss, gradients) with the CPU.")
@click.option("--ops", is_flag=True, help="Also compare single operators with a float64 CPU reference.")
@click.option("--profile", "profile_name", type=PATH, metavar="NAME|PATH", help="Profile with train.* thresholds.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-v", "--verbose", is_flag=True, help="Show evidence.")
def train_step(device_name: str, model: str, batch: int, steps: int, precision: str, workers: int,
               log_path: Optional[str], weights: Optional[str], seed: int, lr: float, inject_leak: Optional[str],
               compare_cpu: bool, ops: bool, profile_name: Optional[str], fmt: str, verbose: bool) -> None:
    """Train a real CLIP for a few steps: does the device run, does the loss fall, does memory leak?"""
    from npudoctor import api, install
    from npudoctor.workload import session

    install.require("numpy")  # beside torch (TorchMissing names both): without it torch warns, DataLoader fails
    from npudoctor.model.inputs import NAMED_LINK, is_named_link

    if weights and is_named_link(weights):  # the one link rule (npudoctor.model.inputs)
        raise fail_usage(f"--weights {weights}: {NAMED_LINK}")
    if weights and not os.path.isfile(weights):
        raise fail_usage(f"--weights {weights}: not a regular file")
    if log_path:
        if os.path.exists(log_path) and not os.path.isfile(log_path):
            raise fail_usage(f"--log {log_path}: not a regular file")
        parent = os.path.dirname(os.path.abspath(log_path))
        if not os.path.isdir(parent):
            raise fail_usage(f"--log {log_path}: no such directory {parent}")
        from npudoctor.workload.memlog import check_appendable

        check_appendable(log_path)  # refuses FIFOs and files that are not memlog logs
    profile = api.load_profile(profile_name)
    request = session.StepRequest(
        session.TrainOptions(device=device_name, model=model, batch=batch, steps=steps, precision=precision,
                             workers=workers, log=log_path, weights=weights, seed=seed, lr=lr, inject_leak=inject_leak),
        ops=ops, compare_cpu=compare_cpu)
    started = time.time()
    out = None
    progress = Progress()

    def header(device: Any) -> None:
        """The header at once, as `check` prints it; the findings when the run ends."""
        nonlocal out
        if fmt != "text":
            return
        from npudoctor import __version__
        from npudoctor.report import console as consoles
        from npudoctor.report import train_console

        out = consoles.make_console()
        with progress.hidden():
            for line in train_console.train_header(__version__, platform.node(), started, model, precision, steps,
                                                   device.name, profile.name, out.width):
                out.print(line)

    progress.start()
    try:
        document, report = session.run(request, profile, progress, on_device=header)
    except session.StepUnusable as exc:
        raise fail_usage(str(exc)) from None
    except KeyboardInterrupt:  # before training started (importing torch, choosing the device): nothing recorded
        click.echo("npudoctor: interrupted before training started; nothing was recorded", err=True)
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    finally:
        progress.stop()
    report.started = started
    trained = document.get("train") or {}
    if trained.get("interrupted"):  # Ctrl-C while training: what was recorded is judged, as `prof run` does
        click.echo(f"npudoctor: interrupted after {trained.get('steps', 0)} of {steps} steps; the findings judge "
                   "the steps recorded", err=True)
    if fmt == "json":
        from npudoctor.report import json_report

        json_report.emit(clean_value({**document, "report": report.to_dict()}))
    else:
        from npudoctor.report import train_console

        train_console.render(report, document, verbose=verbose, console=out, header=False)
    raise click.exceptions.Exit(EXIT_INTERRUPTED if trained.get("interrupted") else report.exit_code())


@click.group()
def leak() -> None:
    """Judge training memory logs (npudoctor.memlog/1 or /2) for leaks."""


@leak.command("analyze")
@click.argument("path", metavar="FILE.jsonl", type=PATH)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--warmup", type=click.IntRange(0), default=None, help="Steps to skip (default: found per series).")
@click.option("--profile", "profile_name", type=PATH, metavar="NAME|PATH", help="Profile with train.leak.* thresholds.")
@click.option("-v", "--verbose", is_flag=True, help="Show evidence.")
def leak_analyze(path: str, fmt: str, warmup: Optional[int], profile_name: Optional[str], verbose: bool) -> None:
    """Leak verdict for a recorded log: exit 1 on a leak, 2 on unreadable input."""
    from npudoctor import api
    from npudoctor.workload import leak as leaks
    from npudoctor.workload.memlog import TAIL_BYTES, last_run

    try:
        profile = api.load_profile(profile_name)
        settings = leaks.LeakSettings.from_mapping(profile.get("train.leak"))
    except (TypeError, ValueError) as exc:
        raise fail_usage(f"profile train.leak: {exc}") from None
    verdict, records = leaks.analyze_file(path, settings, **({"warmup_steps": warmup} if warmup is not None else {}))
    runs = len({r["run"] for r in records})
    if fmt == "json":
        from npudoctor.report import json_report

        json_report.emit(clean_value({**verdict.to_dict(), "file": path, "runs": runs}))
    else:
        from npudoctor.report import train_console

        train_console.render_leak(verdict, path, runs, len(last_run(records)),
                                  tail_only=os.path.getsize(path) > TAIL_BYTES, verbose=verbose)
    raise click.exceptions.Exit(EXIT_FINDINGS if verdict.leak else EXIT_OK)
