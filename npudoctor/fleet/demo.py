"""Demo scenarios shipped with npudoctor: bundles assembled from real captures (``check --demo NAME``) and a
demo fleet made from them (``fleet --demo``), so a newcomer sees on any laptop what the doctor says on a node.

The bundles live in ``npudoctor/fleet/scenarios/<name>.tar.gz`` (ordinary bundles, as ``collect`` writes them);
``tests/demo_scenarios.py`` builds them, and each manifest's ``demo`` entry says what it was assembled from.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from npudoctor.errors import InputError

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
DEMO_PROFILE = "atlas800t-a2-8x910b"
SUFFIX = ".tar.gz"


class DemoError(InputError):
    """An unknown scenario or a conflicting option: one line for the user."""


def names() -> List[str]:
    if not SCENARIO_DIR.is_dir():
        return []
    return sorted(p.name[: -len(SUFFIX)] for p in SCENARIO_DIR.glob(f"*{SUFFIX}"))


def about(name: str) -> Dict[str, Any]:
    """The manifest's ``demo`` entry: description, samples it was assembled from, a note."""
    from npudoctor.probes.bundle import read_bundle

    manifest = json.loads(read_bundle(scenario_path(name))["manifest.json"])
    return dict(manifest.get("demo", {}))


# Demo text is for people at a terminal: 80 columns, like every report.
WIDTH = 80


def describe() -> str:
    lines = ["Demo scenarios (npudoctor check --demo NAME), assembled from real captures:"]
    for name in names():
        lines += textwrap.wrap(about(name).get("description", ""), WIDTH, initial_indent=f"  {name:<20} ",
                               subsequent_indent=" " * 23)
    return "\n".join(lines)


def banner(name: str) -> str:
    """A few lines for people: this is a replayed demo, and what it was made from (80 columns)."""
    return "\n".join(textwrap.wrap(f"demo scenario {name}: {about(name).get('description', '')} (assembled from "
                                   "real captures, not this machine; `--demo list` shows all)", WIDTH))


def scenario_path(name: str) -> str:
    if name not in names():
        raise DemoError(f"unknown demo scenario {name!r}; choose one of: {', '.join(names()) or '(none shipped)'}")
    return str(SCENARIO_DIR / f"{name}{SUFFIX}")


def check_arguments(name: str, bundle: Optional[str], root: Optional[str],
                    profile: Optional[str]) -> Tuple[str, str]:
    """The bundle and profile ``check --demo NAME`` replays (the demo node's own profile unless one is given).

    Raises the API's UsageError so the CLI reports it like any bad argument."""
    from npudoctor.api import UsageError

    if bundle or root:
        raise UsageError("--demo replays a shipped scenario; it cannot be combined with --from or --root")
    try:
        return scenario_path(name), profile or DEMO_PROFILE
    except DemoError as exc:
        raise UsageError(str(exc)) from None


# The demo fleet: mostly healthy nodes, every scenario somewhere, and a few nodes whose versions drifted.
FLEET_PATTERN = ("healthy",) * 14 + ("chip-warning", "version-mismatch", "setenv-not-sourced", "unbound-device",
                                     "dcmi-8005", "no-dev-davinci", "whitelist-no-file", "driver-not-reloaded",
                                     "hbm-ecc", "old-firmware", "throttled-chip")
DRIFT = (  # (every Nth node, offset, inventory field, value): deterministic, so the demo reads the same each run
    (50, 7, "driver", "23.0.7"),  # an older HDK: the driver and firmware of the real 23.0.7 node
    (50, 7, "firmware", "7.1.0.11.220"),
    (97, 3, "torch_npu", "2.1.0.post8"),
    (200, 11, "kernel", "5.10.0-216.0.0.115.oe2203sp4.x86_64"),
    (9, 4, "cann_toolkit", "8.0.RC3"),
)


def scenario_reports() -> Dict[str, Dict[str, Any]]:
    """Each scenario's report document, replayed once."""
    from npudoctor import api

    return {name: api.run_checks(api.make_runner(bundle=scenario_path(name)),
                                 api.load_profile(DEMO_PROFILE)).to_dict() for name in names()}


def fleet_documents(count: int, reports: Optional[Dict[str, Dict[str, Any]]] = None
                    ) -> Iterator[Tuple[Dict[str, Any], str]]:
    """``count`` node reports made from the scenarios, with host names ``atlas-00000``... and varied versions.

    Documents share their findings lists (read-only); only the inventory and host are copied per node."""
    reports = reports or scenario_reports()
    for index in range(count):
        base = reports[FLEET_PATTERN[index % len(FLEET_PATTERN)]]
        name = f"atlas-{index:05d}"
        inventory = dict(base["inventory"], hostname=name)
        for every, offset, key, value in DRIFT:
            if index % every == offset:
                inventory[key] = value
        yield dict(base, inventory=inventory, host=dict(base["host"], hostname=name)), f"demo:{name}"
