"""Commands of the fleet room: `fleet`, `profile derive`, `onboard`, `collective`. Thin: the engines are in
``npudoctor.fleet``."""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence, Tuple

import click

from npudoctor.cli.common import EXIT_FINDINGS, FAIL_ON_HELP, PATH, FailOn, fail_usage


@click.command()
@click.argument("paths", nargs=-1, metavar="PATH...", type=PATH)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "csv"]), default="text", show_default=True)
@click.option("--demo", is_flag=True, help="Show a demo fleet made from the shipped scenarios.")
@click.option("--demo-nodes", type=click.IntRange(1, 100000), default=42, show_default=True, hidden=True)
def fleet(paths: Tuple[str, ...], fmt: str, demo: bool, demo_nodes: int) -> None:
    """Many reports or bundles at once: which nodes fail which checks, and version drift.

    PATH: `npudoctor check --format json` reports, bundles (.tar.gz or folders), tar archives of reports, or
    folders holding any of these. Exit 0 when no node fails, 1 when one does or an input could not be read,
    2 when nothing is readable.
    """
    from npudoctor.fleet import view

    if demo == bool(paths):
        raise fail_usage("give report/bundle PATHs, or --demo (not both)")
    if demo:
        from npudoctor.fleet.demo import fleet_documents

        result = view.from_documents(fleet_documents(demo_nodes))
    else:
        from npudoctor.report.progress import Progress

        error = None
        with Progress() as progress:  # the spinner line is gone before anything is printed
            progress.update("reading reports")
            try:
                result = view.build(paths, progress=lambda n: progress.update("reading reports", f"{n} read"))
            except view.FleetInputError as exc:
                error = str(exc)
        if error is not None:
            raise fail_usage(error)
    render = {"json": view.render_json, "csv": view.render_csv}.get(fmt, view.render_text)
    click.echo(render(result), nl=False)
    if result.errors:  # the text lists them too; stderr says so for every format (npudoctor.model.inputs)
        from npudoctor.model.inputs import warning_line
        from npudoctor.untrusted import clean, one_line

        click.echo(one_line(clean(warning_line(result.errors))), err=True)
    raise click.exceptions.Exit(result.exit_code())


@click.group()
def profile() -> None:
    """Node profiles: derive a site profile from a known-good node."""


@profile.command("derive")
@click.argument("source", metavar="BUNDLE|REPORT", type=PATH)
@click.option("-o", "--output", type=PATH, required=True, metavar="site.yaml",
              help="Where to write it (never overwritten).")
@click.option("--base", type=PATH, metavar="NAME|PATH",
              help="Profile whose thresholds it keeps (default: the report's).")
@click.option("--name", type=PATH, metavar="NAME", help="The profile's name (default: site-from-HOSTNAME).")
@click.option("--allow-failing", is_flag=True,
              help="Derive from a node whose report has FAIL/ERROR findings (refused by default: exit 1).")
def derive(source: str, output: str, base: Optional[str], name: Optional[str], allow_failing: bool) -> None:
    """Write a site profile pinning what SOURCE's node is: chips, link widths, versions, OS and kernel.

    `npudoctor check --profile site.yaml` on another node then reports every difference (SITE001). A node
    with FAIL/ERROR findings is not a reference: refused (exit 1) unless --allow-failing.
    """
    from npudoctor import api
    from npudoctor.fleet.derive import derive as derive_text
    from npudoctor.fleet.derive import failing_findings, load_source
    from npudoctor.fleet.textfile import write_new
    from npudoctor.untrusted import clean, one_line

    if base:
        api.load_profile(base)  # a bad base is a usage error now, not when the site profile is used
    document, described = load_source(source, base)
    failing = failing_findings(document)
    if failing and not allow_failing:  # pinning a broken node would make every other node "differ" from it
        shown = ", ".join(failing[:5]) + (f" and {len(failing) - 5} more" if len(failing) > 5 else "")
        click.echo(one_line(clean(f"npudoctor: error: {described}: the node is not accepted (FAIL/ERROR: "
                                  f"{shown}); fix it and derive again, or pass --allow-failing")), err=True)
        raise click.exceptions.Exit(EXIT_FINDINGS)
    text = derive_text(document, described, base=base, name=name)
    write_new(output, text)
    pins = sum(1 for line in text.splitlines() if line.startswith("  ") and not line.strip().startswith("#"))
    click.echo(f"wrote {output}: {pins} pinned value(s) from {described}")
    if failing:
        click.echo(f"npudoctor: warning: the node has FAIL/ERROR findings ({', '.join(failing[:5])})", err=True)
    click.echo(f"check another node with: npudoctor check --profile {output}")


@click.command()
@click.option("--backend", type=click.Choice(["auto", "hccl", "nccl", "gloo"]), default="auto", show_default=True,
              help="auto: hccl when torch_npu imports, else nccl with CUDA, else gloo on the CPU.")
@click.option("--sizes", metavar="LIST", help="Message sizes [default: 1K,1M,64M,1G; gloo: 1K,1M,16M].")
@click.option("--ops", default="all_reduce,all_gather,broadcast", show_default=True, metavar="LIST")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--nproc-per-node", type=click.IntRange(1, 128), metavar="N",
              help="Start torchrun with N processes on this node (default for gloo: 2).")
@click.option("--iters", type=click.IntRange(1, 100000), default=20, show_default=True)
@click.option("--warmup", type=click.IntRange(0, 10000), default=5, show_default=True)
@click.option("--profile", "profile_name", type=PATH, metavar="NAME|PATH",
              help="Expected bus bandwidth (fleet.collective).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(1, 86400), default=600, show_default=True,
              help="Seconds before the run is stopped.")
@click.option("--result-file", type=PATH, hidden=True, help="(internal) rank 0 writes its raw results here.")
def collective(backend: str, sizes: Optional[str], ops: str, fmt: str, nproc_per_node: Optional[int], iters: int,
               warmup: int, profile_name: Optional[str], timeout_s: float, result_file: Optional[str]) -> None:
    """Measure all_reduce / all_gather / broadcast like nccl-tests: latency, algbw, busbw, correctness.

    On one node: `npudoctor collective --nproc-per-node 8`. Across nodes, under your own torchrun:
    `torchrun --nnodes 2 --nproc-per-node 8 ... -m npudoctor.collective [OPTIONS]`.
    """
    import os

    from npudoctor import api
    from npudoctor.fleet import collective as probe
    from npudoctor.model.finding import Report

    try:
        op_list = probe.parse_ops(ops)
        profile = api.load_profile(profile_name)
        if probe.under_torchrun(os.environ):
            default = probe.DEFAULT_SIZES.get(backend, probe.DEFAULT_SIZES["hccl"])
            size_list = probe.parse_sizes(sizes if sizes is not None else default)  # '' is refused, not "unset"
        else:
            from npudoctor import install

            install.require("torch", "numpy")  # the ranks need both: one line now, not N failing ranks later
            backend = probe.pick_backend(backend)
            size_list = probe.parse_sizes(sizes if sizes is not None else probe.DEFAULT_SIZES[backend])
            if nproc_per_node is None and backend != "gloo":
                raise probe.CollectiveError(f"--nproc-per-node N is needed for {backend} (how many devices to use)")
    except (probe.CollectiveError, api.UsageError) as exc:
        raise fail_usage(str(exc)) from None
    if probe.under_torchrun(os.environ):
        try:
            document = probe.run_worker(backend, size_list, op_list, iters, warmup, timeout_s)
        except Exception as exc:  # HCCL/NCCL failures: torchrun reports the rank; the launcher explains codes
            click.echo(f"npudoctor collective: rank {os.environ.get('RANK')}: {exc.__class__.__name__}: {exc}",
                       err=True)
            raise click.exceptions.Exit(1) from None
        if document is None:  # not rank 0
            return
        if result_file:
            with open(result_file, "w", encoding="utf-8") as handle:
                json.dump(document, handle)
            return
    else:
        worker_args = ["--backend", backend, "--sizes", ",".join(map(str, size_list)), "--ops", ",".join(op_list),
                       "--iters", str(iters), "--warmup", str(warmup), "--timeout", str(timeout_s)]
        document = probe.launch(nproc_per_node or 2, worker_args, timeout_s + 60)
        if "error" in document:  # what was asked for, for the header of a run that did not finish
            document = {**document, "requested": {"backend": backend, "nproc_per_node": nproc_per_node or 2}}
    found = (probe.failed_run(document["error"], document.get("output", "")) if "error" in document
             else probe.findings(document, profile))
    click.echo(probe.to_json(document, found) if fmt == "json" else probe.render_text(document, found), nl=False)
    raise click.exceptions.Exit(Report(list(found)).exit_code())


@click.command()
@click.option("--profile", "profile_name", type=PATH, required=True, metavar="NAME|PATH",
              help="What this node must be.")
@click.option("-o", "--output", type=PATH, required=True, metavar="DIR", help="New or empty folder for the results.")
@click.option("--python", "python", type=PATH, metavar="PATH", help="The interpreter training runs with.")
@click.option("--root", type=PATH, metavar="DIR", help="Read system files under DIR.")
@click.option("--logs", "logs_dirs", type=PATH, multiple=True, metavar="DIR",
              help="Also diagnose the logs under DIR (LOG001, as `check --logs`: a job's folder, CANN plogs).")
@click.option("--collective-backend", type=click.Choice(["auto", "hccl", "nccl", "gloo"]), default="auto",
              show_default=True)
@click.option("--nproc-per-node", type=click.IntRange(1, 128), metavar="N",
              help="Processes for the collective probe (default: the node's NPU count).")
@click.option("--sizes", metavar="LIST", help="Collective message sizes (default 1K,1M,64M,1G).")
@click.option("--no-collective", is_flag=True, help="Do not run the collective probe.")
@click.option("--memlog", type=PATH, metavar="FILE.jsonl",
              help="Plot memory over steps from this npudoctor.memlog/1 or /2 file, and judge it for leaks.")
@click.option("--fail-on", type=FailOn(), default="fail", show_default=True, help=FAIL_ON_HELP)
def onboard(profile_name: str, output: str, python: Optional[str], root: Optional[str], logs_dirs: Tuple[str, ...],
            collective_backend: str, nproc_per_node: Optional[int], sizes: Optional[str], no_collective: bool,
            memlog: Optional[str], fail_on: str) -> None:
    """Acceptance run: checks, import probe, training step, collective probe; report.json, bundle, report.html.

    Exit codes as `check`: 0 accepted, 1 a FAIL or ERROR (or WARN under --fail-on warn), 2 usage error.
    """
    from npudoctor import api
    from npudoctor.fleet import onboard as engine
    from npudoctor.fleet.collective import CollectiveError
    from npudoctor.report.progress import Progress, ProgressListener

    collective_options = engine.CollectiveOptions(not no_collective, collective_backend, nproc_per_node, sizes)
    error = None
    with Progress() as progress:  # the spinner line is gone before anything is printed
        try:
            memory = engine.read_memory(memlog) if memlog else None
            options = {"python": python, "logs_dirs": logs_dirs}
            result = engine.onboard(output, profile_name, collective_options, options, root=root, memory=memory,
                                    listener=ProgressListener(progress), stage=progress.update, memlog_path=memlog)
        except (api.UsageError, CollectiveError) as exc:
            error = str(exc)
    if error is not None:
        raise fail_usage(error)
    from npudoctor.report.console import make_console

    code = result.report.exit_code(fail_on)
    engine.render_text(result, code, make_console())
    raise click.exceptions.Exit(code)


def check_fleet_options(demo: Optional[str], textfile: Optional[str], bundle: Optional[str], root: Optional[str],
                        profile_name: Optional[str], fmt: str) -> Tuple[Optional[str], Optional[str]]:
    """`check --demo` and `--textfile`: the bundle and profile to use; usage errors before any work."""
    from npudoctor.fleet.textfile import check_target

    if textfile:
        check_target(textfile)
    if demo is None:
        return bundle, profile_name
    from npudoctor.fleet import demo as demos

    if demo == "list":
        click.echo(demos.describe())
        raise click.exceptions.Exit(0)
    bundle, profile_name = demos.check_arguments(demo, bundle, root, profile_name)
    if fmt == "text":
        click.echo(demos.banner(demo), err=True)
    return bundle, profile_name


def write_textfile(path: str, report: Any, fail_on: str, age: Optional[Tuple[float, float]] = None) -> None:
    from npudoctor.fleet.textfile import write_atomically
    from npudoctor.report import prometheus

    write_atomically(path, prometheus.render(report, fail_on, age))


def judge_last_report(path: str, max_age: int, only: Sequence[str], skip: Sequence[str], scope: Optional[str],
                      fmt: str, fail_on: str, verbose: bool, textfile: Optional[str]) -> int:
    """`check --last-report`: the node's kept report said in ``fmt``; the exit code (2: stale or unreadable,
    the reader could not tell)."""
    from npudoctor.cli.common import emit_findings
    from npudoctor.fleet import lastreport
    from npudoctor.report import npd

    if textfile:
        check_fleet_options(None, textfile, None, None, None, fmt)
    try:
        last = lastreport.load(path)
        report = lastreport.select(last.report, only, skip, scope or "")
    except lastreport.LastReportError as exc:
        if fmt != "npd":
            raise
        reason = str(exc).split(": ", 1)[-1]  # NPD keeps 80 characters: the reason, not the path before it
        click.echo(npd.could_not_tell(reason))
        return npd.UNKNOWN
    stale = last.age_s > max_age
    if textfile:
        write_textfile(textfile, report, fail_on, (last.age_s, max_age))
    if fmt == "npd":
        code, line = (npd.UNKNOWN, npd.could_not_tell(lastreport.stale_reason(last.age_s, max_age))) if stale \
            else npd.verdict(report, fail_on)
        click.echo(line)
        return code
    code = 2 if stale else report.exit_code(fail_on)
    if stale:
        click.echo(f"npudoctor: note: {path} is {last.age_s:.0f} s old (--max-age {max_age}): its verdict is "
                   "stale, exit 2", err=True)
    if fmt == "prometheus":
        from npudoctor.report import prometheus

        click.echo(prometheus.render(report, fail_on, (last.age_s, max_age)), nl=False)
    elif fmt == "clusterd":  # the run before names what healed: ClusterD clears a fault only on its recover
        from npudoctor.report import clusterd

        previous = lastreport.load_previous(path)
        previous = lastreport.select(previous, only, skip, scope or "", strict=False) if previous else None
        click.echo(clusterd.render(report, fail_on, previous), nl=False)
    elif fmt == "text":
        from npudoctor.report import console

        listener = console.CheckConsole(console.make_console(), verbose=verbose)
        listener.started(report)
        for stage in dict.fromkeys(f.stage for f in report.findings):
            listener.stage_done(stage, [f for f in report.findings if f.stage == stage])
        listener.finished(report)
    else:
        emit_findings(fmt, report, "npudoctor check", fail_on, code)
    return code
