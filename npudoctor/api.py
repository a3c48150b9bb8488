"""One front door for the CLI, the TUI, tests and library users. No printing, no exit codes here."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence

from npudoctor import __version__
from npudoctor.checks.registry import STAGES, CheckContext, CheckSpec, ordered_specs, run_check, select
from npudoctor.knowledge import KnowledgeError, data_dir, load_yaml_file, profile_names, profile_path
from npudoctor.model.finding import Finding, Report
from npudoctor.model.profile import NodeProfile, deep_merge
from npudoctor.probes import prefetch
from npudoctor.probes.runner import LiveRunner, RecordingRunner, Runner

DEFAULT_PROFILE = "default"


class UsageError(Exception):
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


def load_profile(name_or_path: Optional[str] = None) -> NodeProfile:
    """A shipped profile by name or a site profile by path, merged over the default profile."""
    try:
        base = load_yaml_file(data_dir("profiles") / f"{DEFAULT_PROFILE}.yaml") or {}
        if not name_or_path or name_or_path == DEFAULT_PROFILE:
            return NodeProfile(DEFAULT_PROFILE, base)
        path = profile_path(name_or_path)
        if path is None:
            raise UsageError(f"unknown profile {name_or_path!r}; shipped profiles: {', '.join(profile_names())}")
        data = load_yaml_file(path)
    except KnowledgeError as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(data, dict):
        raise UsageError(f"{name_or_path}: a profile must be a YAML mapping")
    name = str(data.get("name", path.stem))
    parent = data.get("extends", DEFAULT_PROFILE)
    if parent not in (DEFAULT_PROFILE, None):
        base = load_profile(str(parent)).data
    return NodeProfile(name, deep_merge(base, data))


def list_checks(level: int = 3) -> List[CheckSpec]:
    return [spec for spec in ordered_specs() if spec.level <= level]


def find_check(check_id: str) -> Optional[CheckSpec]:
    wanted = check_id.upper()
    return next((spec for spec in ordered_specs() if spec.id == wanted), None)


def run_checks(
    runner: Runner,
    profile: Optional[NodeProfile] = None,
    only: Sequence[str] = (),
    skip: Sequence[str] = (),
    level: int = 1,
    options: Optional[Mapping[str, Any]] = None,
) -> Report:
    """Run the selected checks in stage order and return the report."""
    import time

    started, clock = time.time(), time.perf_counter()
    profile = profile or load_profile()
    ctx = CheckContext(runner, profile, options)
    if not only:
        # Slow commands start before the check modules load; narrowed runs start only their own.
        prefetch([stage for stage in STAGES if stage not in skip], ctx)
    specs = select(ordered_specs(), only, skip, level)
    if only and not specs:
        raise UsageError(f"--only {' '.join(only)} matches no check; see `npudoctor list-checks`")
    if only:
        prefetch(dict.fromkeys(spec.stage for spec in specs), ctx)
    try:
        for spec in specs:
            ctx.findings.extend(run_check(spec, ctx))
        inventory = _inventory(ctx)
    finally:
        runner.close()
    return Report(
        findings=list(ctx.findings),
        tool={"name": "npudoctor", "version": __version__, "python": ".".join(map(str, sys.version_info[:3])),
              "profile": profile.name, "level": level},
        host=_host(runner),
        source=runner.description,
        inventory=inventory,
        run={"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
             "duration_s": round(time.perf_counter() - clock, 3)},
    )


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
            environ: Optional[Mapping[str, str]] = None, options: Optional[Mapping[str, Any]] = None,
            profile: Optional[NodeProfile] = None) -> Report:
    """Run every check against the live node, recording each raw answer, and write the bundle to ``output``.

    The file is written under a temporary name and renamed, and an existing ``output`` is never replaced.
    """
    from npudoctor.probes.bundle import build_bundle, write_bundle

    if os.path.exists(output):
        raise UsageError(f"{output} already exists; choose another name (nothing was overwritten)")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise UsageError(f"{parent}: no such directory")
    recorder = RecordingRunner(make_runner(root=root, environ=environ))
    recorder.environ()  # always recorded: the replay needs the environment even if no check asked
    report = run_checks(recorder, profile, level=level, options=options)
    write_bundle(output, build_bundle(recorder.records, _host(recorder)))
    return report


def findings_by_id(report: Report, check_id: str) -> List[Finding]:
    return [f for f in report.findings if f.id == check_id]
