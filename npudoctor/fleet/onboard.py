"""The acceptance run (``npudoctor onboard --profile NAME|PATH -o DIR``): the whole ladder on one node.

Level-1 checks and the level-2 import probe (recorded into a bundle as ``collect`` does), the level-3 training
step when the training feature is installed (SKIP with that reason otherwise), and the collective probe on
this node's devices; then DIR gets ``report.json`` (the ``npudoctor.report/1`` document plus the collective's
results), ``bundle.tar.gz`` and ``report.html``. DIR must be new or empty: nothing is ever overwritten.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from npudoctor import api
from npudoctor.fleet.textfile import write_new
from npudoctor.model.finding import Finding, Report, Status

OUTPUTS = ("report.json", "bundle.tar.gz", "report.html")
TRAINING_ID = "TRN001"
MAX_PLOTTED_RECORDS = 512


@dataclass
class CollectiveOptions:
    run: bool = True
    backend: str = "auto"
    nproc_per_node: Optional[int] = None
    sizes: Optional[str] = None
    iters: int = 20
    warmup: int = 5
    timeout_s: float = 900.0


@dataclass
class OnboardResult:
    report: Report
    document: Dict[str, Any]
    paths: Dict[str, str]


def prepare(directory: str) -> None:
    """DIR is created, or must be an empty folder (an acceptance record is never overwritten)."""
    if os.path.lexists(directory):
        if not os.path.isdir(directory) or os.path.islink(directory):
            raise api.UsageError(f"-o {directory}: exists and is not a folder")
        if os.listdir(directory):
            raise api.UsageError(f"-o {directory}: not empty; choose a new folder (nothing was overwritten)")
        return
    parent = os.path.dirname(os.path.abspath(directory))
    if not os.path.isdir(parent):
        raise api.UsageError(f"-o {directory}: no such directory {parent}")
    try:
        os.mkdir(directory)
    except OSError as exc:  # a read-only or virtual parent (/proc): one line, not a traceback
        raise api.UsageError(f"-o {directory}: cannot create it ({exc.strerror or exc})") from None


def training_supported() -> bool:
    from npudoctor.checks import ordered_specs

    return any(spec.level >= 3 for spec in ordered_specs())


def _skip(check_id: str, title: str, stage: str, subject: str, detail: str, fix: str = "") -> Finding:
    return Finding(check_id, Status.SKIP, title, subject, detail, {}, fix, stage)


def run_collective(options: CollectiveOptions, inventory: Mapping[str, Any],
                   profile: Any) -> Tuple[Optional[Dict[str, Any]], List[Finding]]:
    """The collective probe on this node, or a SKIP saying why it could not run here."""
    from npudoctor.fleet import collective as probe

    title = probe.rulebook.REGISTRY["COL001"].title
    if not options.run:
        return None, [_skip("COL001", title, "collective", "collective", "not run (--no-collective)")]
    from npudoctor import install

    try:
        install.require("torch", "numpy")  # the ranks need both
        backend = probe.pick_backend(options.backend)
    except ImportError as exc:
        missing = exc.name or "torch"
        return None, [_skip("COL001", title, "collective", "collective",
                            f"{missing} is not installed for npudoctor's interpreter: the collective probe needs it",
                            fix=install.missing_module_hint(missing) or "")]
    if backend == "gloo" and options.backend == "auto":
        return None, [_skip("COL001", title, "collective", "collective",
                            "no NPU or GPU backend here (torch_npu does not import, no CUDA); "
                            "--collective-backend gloo tests the plumbing on the CPU")]
    count = (inventory.get("chips") or {}).get("count")
    nproc = options.nproc_per_node or (count if backend != "gloo" and isinstance(count, int) and count else 2)
    sizes = probe.parse_sizes(options.sizes if options.sizes is not None else probe.DEFAULT_SIZES[backend])
    worker_args = ["--backend", backend, "--sizes", ",".join(map(str, sizes)), "--iters", str(options.iters),
                   "--warmup", str(options.warmup), "--timeout", str(options.timeout_s)]
    document = probe.launch(nproc, worker_args, options.timeout_s + 60)
    if "error" in document:
        return None, probe.failed_run(document["error"], document.get("output", ""))
    return document, probe.findings(document, profile)


def onboard(directory: str, profile_name: str, collective: CollectiveOptions,
            options: Optional[Mapping[str, Any]] = None, root: Optional[str] = None,
            memory: Optional[Sequence[Mapping[str, Any]]] = None,
            environ: Optional[Mapping[str, str]] = None, listener: Any = None,
            stage: Optional[Callable[[str], None]] = None, memlog_path: Optional[str] = None) -> OnboardResult:
    """The acceptance run into ``directory``; ``listener`` hears the checks (a spinner), ``stage(label)`` the
    steps after them. ``memlog_path``: a training memory log judged as ``leak analyze`` judges it (TRN003)."""
    from npudoctor.report import html, json_report

    profile = api.load_profile(profile_name)
    if collective.run and collective.sizes is not None:  # a usage error now, not after the checks and bundle
        from npudoctor.fleet.collective import parse_sizes

        parse_sizes(collective.sizes)
    prepare(directory)
    paths = {name: os.path.join(directory, name) for name in OUTPUTS}
    level = 3 if training_supported() else 2
    report = api.collect(paths["bundle.tar.gz"], root=root, level=level, options=options, profile=profile,
                         environ=environ, listener=listener)
    if level < 3:
        report.findings.append(_skip(TRAINING_ID, "a training step runs on the device", "workload", "train-step",
                                     "training feature not installed (level 3 needs npudoctor's training "
                                     "checks)"))
    if stage is not None and collective.run:
        stage("collective probe (torchrun)")
    results, found = run_collective(collective, report.inventory, profile)
    report.findings.extend(found)
    if memlog_path:
        report.findings.extend(judge_memlog(memlog_path, profile))
    document = report.to_dict()
    document["tool"]["command"] = "onboard"
    # An acceptance record says when it was made (check's JSON leaves times out so replays are byte-stable).
    document["run"] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(report.started or time.time())),
                       "duration_s": report.duration_s}
    if results is not None:
        document["collective"] = results
    # Both texts before either file: a page that cannot be drawn must not leave report.json without it.
    page = html.render(document, memory)
    # prepare() found no output here; one that appeared since (another run into the same folder) is kept
    advice = "it appeared while onboard ran (another run into the same folder?): use a new folder"
    write_new(paths["report.json"], json_report.dumps(document), advice)
    write_new(paths["report.html"], page, advice)
    return OnboardResult(report, document, paths)


def judge_memlog(path: str, profile: Any) -> List[Finding]:
    """The TRN003 finding ``leak analyze`` gives ``path`` under ``profile``'s train.leak settings."""
    from npudoctor.workload import leak, memlog
    from npudoctor.workload.findings import leak_report

    try:
        verdict, _ = leak.analyze_file(path, leak.LeakSettings.from_mapping(profile.get("train.leak")))
    except memlog.MemlogError as exc:
        raise api.UsageError(f"--memlog {exc}") from None
    return leak_report(verdict.to_dict(), verdict.device or "?", path).findings


def read_memory(path: str) -> List[Mapping[str, Any]]:
    """Memory records of a ``npudoctor.memlog/1`` file (the training feature's torch-free reader)."""
    from npudoctor.workload import memlog

    try:  # the tail leak analyze judges, thinned: the plot has ~1000 points at most whatever the log's size
        return list(memlog.last_run(memlog.read_records(path, memlog.TAIL_BYTES, max_records=MAX_PLOTTED_RECORDS)))
    except memlog.MemlogError as exc:
        raise api.UsageError(f"--memlog {exc}") from None


def render_text(result: OnboardResult, code: int, console: Any) -> None:
    """The run in the house style of ``check``: the title and what was judged, what is wrong with its fixes,
    the files written, the summary line and the verdict last ("ACCEPTED: ..." or "NOT ACCEPTED: ...")."""
    from rich.text import Text

    from npudoctor import __version__
    from npudoctor.report.console import CheckConsole, context_lines, summary, title_line, verdict, wrap
    from npudoctor.untrusted import clean, one_line

    report = result.report
    out = CheckConsole(console)
    host = one_line(clean(str(report.inventory.get("hostname") or "?")))  # the node's text, on its line
    lines = [title_line("onboard", __version__, host, report.started or time.time()),
             *context_lines(f"profile {report.tool.get('profile', '?')}, record in "
                            f"{os.path.dirname(next(iter(result.paths.values()), '')) or '.'}", console.width)]
    shown = [f for f in report.findings if f.status in (Status.FAIL, Status.ERROR, Status.WARN)]
    if shown:
        lines.append(Text(""))
        for finding in shown:
            lines += out.finding_lines(finding)
    lines.append(Text(""))
    lines += [Text(line) for path in result.paths.values() for line in wrap(f"wrote {path}", console.width, "", "  ")]
    sentence = f"{'ACCEPTED' if code == 0 else 'NOT ACCEPTED'}: {verdict(report)}"
    lines += [Text(""), summary(report), *[Text(line, style="bold") for line in wrap(sentence, console.width)]]
    out.print(lines)
