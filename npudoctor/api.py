"""One front door for the CLI, the TUI, tests and library users. No printing, no exit codes here."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from npudoctor import __version__
from npudoctor.errors import InputError
from npudoctor.knowledge import KnowledgeError, data_dir, load_yaml_file, profile_names, profile_path
from npudoctor.model.finding import Finding, Report
from npudoctor.model.listener import RunListener, SilentListener
from npudoctor.model.profile import NodeProfile, ProfileError, deep_merge, flatten, validate_profile
from npudoctor.model.rulebook import Spec
from npudoctor.probes import prefetch
from npudoctor.probes.runner import LiveRunner, RecordingRunner, Runner

if TYPE_CHECKING:
    # The node checks load with the commands that run them: `prof analyze` needs only the profile loader.
    from npudoctor.checks.registry import CheckContext, CheckSpec

DEFAULT_PROFILE = "default"
MAX_EXTENDS_DEPTH = 16


class UsageError(InputError):
    """Bad arguments or unreadable input: one line for the user, exit code 2."""


def make_runner(root: Optional[str] = None, bundle: Optional[str] = None,
                environ: Optional[Mapping[str, str]] = None) -> Runner:
    """A live runner (optionally under ``root``), or a replay of ``bundle``."""
    if bundle and root:
        raise UsageError("--from and --root cannot be used together")
    if bundle:
        from npudoctor.probes.bundle import BundleError, ReplayRunner

        try:
            return ReplayRunner(bundle)
        except BundleError as exc:
            raise UsageError(str(exc)) from None
    if root is not None and not os.path.isdir(root):
        raise UsageError(f"--root {root}: not a directory")
    return LiveRunner(root or "/", environ)


def check_python_option(runner: Runner, python: Optional[str]) -> None:
    """``--python PATH`` must name an interpreter that can be run, like ``--root DIR`` a directory."""
    if python and runner.description.startswith(("live", "root:")) and runner.which(python) is None:
        raise UsageError(f"--python {python}: no such interpreter (not found on PATH, or not executable)")


def python_facts(runner: Runner, python: Optional[str] = None) -> Any:
    """The target interpreter's package facts (``--python``, else ``python3`` on PATH), through ``runner``: where
    its torch and torch_npu are installed (``ops audit`` reads the installed torch_npu's operator list)."""
    from npudoctor.checks.registry import CheckContext

    return CheckContext(runner, load_profile(), {"python": python} if python else {}).facts("python")


def load_profile(name_or_path: Optional[str] = None) -> NodeProfile:
    """A shipped profile by name or a site profile by path, merged over the profiles it extends and the
    default profile. Every file is checked against the schema (``model.profile.PROFILE_SCHEMA``); a bad
    value, an unknown key or an ``extends`` cycle is a :class:`UsageError` naming the file and the key."""
    try:
        default_path = data_dir("profiles") / f"{DEFAULT_PROFILE}.yaml"
        defaults = load_yaml_file(default_path) or {}
        base = validate_profile(defaults, str(default_path), defaults)
        if not name_or_path or name_or_path == DEFAULT_PROFILE:
            return NodeProfile(DEFAULT_PROFILE, base)
        chain: List[Tuple[str, Dict[str, Any]]] = []  # (file, its data), the profile asked for first
        wanted: Optional[str] = name_or_path
        seen: List[str] = []
        while wanted not in (None, DEFAULT_PROFILE):
            path = profile_path(wanted, relative_to=os.path.dirname(chain[-1][0]) if chain else None)
            if path is None:
                where = f"{chain[-1][0]}: extends: " if chain else ""
                raise UsageError(f"{where}unknown profile {wanted!r}; shipped profiles: {', '.join(profile_names())}")
            real = os.path.realpath(path)
            if real in seen:
                cycle = " -> ".join([*(os.path.basename(p) for p in seen), os.path.basename(real)])
                raise UsageError(f"{chain[-1][0]}: extends: cycle ({cycle})")
            if len(seen) >= MAX_EXTENDS_DEPTH:
                raise UsageError(f"{chain[-1][0]}: extends: more than {MAX_EXTENDS_DEPTH} profiles deep")
            seen.append(real)
            data = validate_profile(load_yaml_file(path), str(path), defaults)
            chain.append((str(path), data))
            wanted = data.get("extends", DEFAULT_PROFILE)
    except (KnowledgeError, ProfileError) as exc:
        raise UsageError(str(exc)) from None
    merged = base
    for _path, data in reversed(chain):
        merged = deep_merge(merged, data)
    first_path, first = chain[0]
    return NodeProfile(str(first.get("name", Path(first_path).stem)), merged)


def rulebook(rules_files: Sequence[str] = ()) -> List[Spec]:
    """Every ID npudoctor can report, in report order: the node checks by stage, the profiling checks
    (``check --prof``, ``prof analyze``), the collective probe's (``collective``, ``onboard``), then the log rules
    (shipped, and the site rules of ``rules_files``)."""
    import npudoctor.fleet.collective
    import npudoctor.prof.checks  # noqa: F401  (registers the PROF checks; no pandas at import)
    from npudoctor.checks import ordered_specs
    from npudoctor.logs.rules import RulesError, load_rules, rule_specs
    from npudoctor.model import rulebook as book

    try:
        rules = load_rules(tuple(rules_files))
    except RulesError as exc:
        raise UsageError(str(exc)) from None
    return [*ordered_specs(), *book.specs("prof", by_id=True), *book.specs("collective", by_id=True),
            *rule_specs(rules)]


def find_check(check_id: str, rules_files: Sequence[str] = ()) -> Optional[Spec]:
    """The spec of ``check_id`` (any room, any case), or None."""
    wanted = check_id.lower()
    return next((spec for spec in rulebook(rules_files) if spec.id.lower() == wanted), None)


def explain_topic(topic: str, rules_files: Sequence[str] = (),
                  installed: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Optional[Any]:
    """What ``npudoctor explain TOPIC`` shows: the spec with that ID, else the error code's entry (a CodeInfo:
    ``EZ9999``, ``507011``, ``-8005``, ``0x05000004``), else None. ``installed``: CANN's own registry texts
    read on the node (:func:`npudoctor.probes.cann_codes.texts_on_node`), preferred for a code they have."""
    spec = find_check(topic, rules_files)
    if spec is not None:
        return spec
    from npudoctor.logs.codes import explain

    return explain(topic, installed)


def explain_topics(topics: Sequence[str], root: Optional[str] = None, bundle: Optional[str] = None,
                   rules_files: Sequence[str] = ()) -> Tuple[List[Any], List[str]]:
    """(entries, unknown topics) for ``npudoctor explain``: checks, and codes in the text of the node's CANN
    install where it has one (live, ``root`` or ``bundle``; :func:`npudoctor.probes.cann_codes.texts_on_node`,
    which ``logs explain`` uses alone)."""
    from npudoctor.probes.cann_codes import texts_on_node

    installed = texts_on_node(root, bundle)
    found = [(topic, explain_topic(topic, rules_files, installed)) for topic in topics]
    return [entry for _topic, entry in found if entry is not None], [t for t, entry in found if entry is None]


def installed_code_texts(runner: Runner) -> Dict[str, Dict[str, str]]:
    """CANN's error registry as the node's install ships it (code -> title, message, cause, solution,
    source), read through ``runner``; {} where no install has one."""
    from npudoctor.probes.cann_codes import read_installed_registry

    registry = read_installed_registry(runner)
    return registry.codes if registry else {}


def run_checks(
    runner: Runner,
    profile: Optional[NodeProfile] = None,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    level: Optional[int] = None,
    options: Optional[Mapping[str, Any]] = None,
    listener: Optional[RunListener] = None,
    scope: Optional[str] = None,
) -> Report:
    """Run the selected checks in stage order and return the report; ``listener`` hears each stage as it ends.
    ``level`` and ``options`` not given come from the bundle being replayed (what ``collect`` was given), else
    level 1."""
    from npudoctor.checks.registry import STAGES, CheckContext, run_check

    level_given = level is not None
    level, options = replay_options(runner, level, options or {})
    missing = [path for path in options.get("prof_dirs") or () if not os.path.lexists(path)]
    if missing:  # a mistyped --prof is a usage error before the checks, not after them
        raise UsageError(f"--prof {missing[0]}: no such file or directory")
    profile = profile or load_profile()
    listener = listener or SilentListener()
    running = getattr(listener, "running", None)
    ctx = CheckContext(_Announcing(runner, running) if running else runner, profile, options)
    if not only and scope is None:
        # Slow commands start before the check modules load; narrowed runs start only their own.
        prefetch([stage for stage in STAGES if stage not in skip], ctx)
    selection = _selection(only, skip, level, level_given, bool(options.get("prof_dirs")))
    specs = selection.node
    if scope is not None:  # a node agent judges only the node (npudoctor.model.scope); the job checks the job
        from npudoctor.model.scope import scope_of

        specs = [spec for spec in specs if scope_of(spec.id) == scope]
        if not specs:
            chosen = f"--only {' '.join(only)}" if only else f"--skip {' '.join(skip)}"
            raise UsageError(f"{chosen} leaves no check of --scope {scope}")
        if scope == "node":
            selection = type(selection)(specs, None)  # profiler output is the job's
    if not only and not any(v is not None for v in flatten(profile.get("inventory") or {}).values()):
        # The site stage compares the node with a site profile's pins; like a level-2 check at level 1, it
        # is left out where there is nothing to compare (`--only site` still runs it and says so).
        specs = [spec for spec in specs if spec.stage != "site"]
    if only or scope is not None:
        prefetch(dict.fromkeys(spec.stage for spec in specs), ctx)
    report = Report(
        findings=[],
        tool={"name": "npudoctor", "version": __version__, "python": ".".join(map(str, sys.version_info[:3])),
              "profile": profile.name, "level": level, **({"scope": scope} if scope else {})},
        host=_host(runner),
        source=runner.description,
        started=time.time(),
        expects=_expectations(profile),
        recorded=str((getattr(runner, "manifest", None) or {}).get("created", "")),
    )
    listener.started(report)
    try:
        stage_start = 0
        for index, spec in enumerate(specs):
            listener.checking(spec)
            ctx.findings.extend(_explain_replay_gap(spec, run_check(spec, ctx), runner))
            if index + 1 == len(specs) or specs[index + 1].stage != spec.stage:
                listener.stage_done(spec.stage, ctx.findings[stage_start:])
                stage_start = len(ctx.findings)
        report.inventory = _inventory(ctx)
    finally:
        runner.close()
    prof_dirs = tuple((options or {}).get("prof_dirs") or ())
    if prof_dirs and selection.prof is not None:
        kept = selection.prof
        prof = [f for f in _prof_findings(prof_dirs, profile, (options or {}).get("logs_dirs") or ()) if f.id in kept]
        ctx.findings.extend(prof)
        listener.stage_done("prof", prof)
    report.findings = list(ctx.findings)
    report.duration_s = round(time.time() - (report.started or time.time()), 3)
    return report


def _selection(only: Sequence[str], skip: Sequence[str], level: int, level_given: bool, prof_given: bool) -> Any:
    """The node checks and PROF IDs ``--only``/``--skip`` leave (see ``checks.registry.select``). The other rooms
    load only when a pattern names no node check (their IDs are accepted or refused with where they run)."""
    from npudoctor.checks import ordered_specs
    from npudoctor.checks.registry import SelectionError, select

    node_only = ordered_specs()
    patterns = [*only, *skip]
    known = all(any(spec.id.lower().startswith(p.lower()) or spec.stage == p.lower() for spec in node_only)
                for p in patterns)
    specs = node_only if known and not prof_given else rulebook()
    try:
        return select(specs, only, skip, level, level_given, prof_given)
    except SelectionError as exc:
        raise UsageError(str(exc)) from None


def _explain_replay_gap(spec: CheckSpec, findings: List[Finding], runner: Runner) -> List[Finding]:
    """A level-2 check replayed from a bundle collected at level 1 finds its command not recorded: say so,
    and how to get a bundle that has it, instead of "cannot run python3: not-recorded"."""
    if spec.level < 2 or not runner.description.startswith("bundle:"):
        return findings
    if not any("not-recorded" in f.detail for f in findings):
        return findings
    bundle = runner.description.split(":", 1)[1]
    from dataclasses import replace

    from npudoctor.model.finding import Status

    return [replace(f, status=Status.SKIP, detail=f"{bundle} holds no level-{spec.level} run (collected "
                    f"without --level {spec.level}): {f.detail}",
                    fix=f"re-collect on the node with --level {spec.level}: "
                        f"npudoctor collect --level {spec.level} -o NEW-BUNDLE.tar.gz")
            for f in findings]


class _Announcing:
    """The runner as checks see it, telling the listener which command they wait for (a spinner names it)."""

    def __init__(self, runner: Runner, running: Any) -> None:
        self._runner = runner
        self._running = running

    def run(self, command: Any) -> Any:
        self._running(command.argv)
        return self._runner.run(command)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)


def _expectations(profile: NodeProfile) -> str:
    """What the profile expects of the node, for people ("8x 910B"); empty when it expects nothing."""
    count, family = profile.get("node.npu_count"), profile.get("node.chip_family")
    if count and family:
        return f"{count}x {family}"
    if count:
        return f"{count} NPUs"
    return f"{family} NPUs" if family else ""


def _prof_findings(prof_dirs: Sequence[str], profile: NodeProfile, logs_dirs: Sequence[str]) -> List[Finding]:
    """``check --prof DIR``: the profiling doctor's findings (stage "prof"); pandas loads only here."""
    from npudoctor.prof.engine import ProfInputError, analyze

    try:
        return analyze(list(prof_dirs), profile, logs_dirs=tuple(logs_dirs)).findings
    except ProfInputError as exc:
        raise UsageError(str(exc)) from None


def _inventory(ctx: CheckContext) -> Dict[str, Any]:
    """The report's inventory from the facts the checks gathered (nothing slow is started for it)."""
    from npudoctor.probes.inventory import build_inventory

    try:
        return build_inventory(ctx)
    except Exception as exc:  # the inventory is a summary; never lose a report over it
        return {"error": f"{exc.__class__.__name__}: {exc}"}


def _host(runner: Runner) -> Dict[str, Any]:
    try:
        return dict(runner.host())
    except Exception:  # host facts are decoration; never lose a report over them
        return {}


def collect(output: str, root: Optional[str] = None, level: int = 1,
            environ: Optional[Mapping[str, Any]] = None, options: Optional[Mapping[str, Any]] = None,
            listener: Optional[RunListener] = None, samples: int = 0, interval_s: float = 1.0,
            profile: Optional[NodeProfile] = None) -> Report:
    """Run every check against the live node, recording each raw answer, and write the bundle to ``output``.

    With ``samples``, ``npu-smi info`` is also recorded that many times, ``interval_s`` apart, for
    ``npudoctor dashboard --replay``. The bundle is written under a temporary name created exclusively beside
    it and linked into place; an existing ``output`` (or ``output.partial``) is never replaced, and a failure
    leaves nothing behind. ``level`` and ``options`` (python, logs_dirs) are stored in the bundle: ``check
    --from`` uses them.
    """
    from npudoctor.probes.bundle import build_bundle, write_bundle

    if not output or not os.path.basename(output.rstrip(os.sep)):
        raise UsageError("-o: the output name is empty")
    if os.path.lexists(output):
        raise UsageError(f"{output} already exists; choose another name (nothing was overwritten)")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise UsageError(f"{parent}: no such directory")
    recorder = RecordingRunner(make_runner(root=root, environ=environ))
    recorder.environ()  # always recorded: the replay needs the environment even if no check asked
    report = run_checks(recorder, profile, level=level, options=options, listener=listener)
    installed_code_texts(recorder)  # recorded: `explain --from BUNDLE` shows the node's own CANN texts
    _record_torch_npu_op_list(recorder, (options or {}).get("python"))
    if samples > 0:
        from npudoctor.probes.timeline import record_samples

        recorder.records.extend(record_samples(recorder.inner, samples, interval_s,
                                               on_sample=getattr(listener, "sampling", None)))
    write_bundle(output, build_bundle(recorder.records, _host(recorder), {**(options or {}), "level": level}))
    return report


def _record_torch_npu_op_list(recorder: RecordingRunner, python: Optional[str]) -> None:
    """Put the installed torch_npu's own operator list into the bundle (250 KB for 2.14.0), so that ``npudoctor
    ops audit --from BUNDLE`` judges a model against the node's release. Nothing when torch_npu is absent."""
    from npudoctor.ops.oplist import CODEGEN_MEMBER, MAX_LIST_BYTES

    try:
        facts = python_facts(recorder, python)  # the metadata answer was recorded already; asked once more
        package = facts.package("torch_npu") if not facts.error else None
    except Exception:  # a broken interpreter is the versions stage's finding, not a reason to lose the bundle
        return
    if package is not None and package.location:
        recorder.read_text(os.path.join(package.location, CODEGEN_MEMBER), max_bytes=MAX_LIST_BYTES)


def replay_options(runner: Runner, level: Optional[int], options: Mapping[str, Any]) -> Tuple[int, Dict[str, Any]]:
    """The level and options a check runs with: what was given, else (replaying a bundle) what ``collect``
    was given, so that a bundle replays on its own."""
    recorded: Mapping[str, Any] = getattr(runner, "collect_options", None) or {}
    merged = dict(options)
    for name in ("python", "logs_dirs"):
        if not merged.get(name) and recorded.get(name):
            merged[name] = tuple(recorded[name]) if name == "logs_dirs" else recorded[name]
    return (level if level is not None else int(recorded.get("level") or 1)), merged


def findings_by_id(report: Report, check_id: str) -> List[Finding]:
    return [f for f in report.findings if f.id == check_id]
