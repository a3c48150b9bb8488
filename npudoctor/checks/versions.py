"""Checks of the versions stage: driver and firmware, CANN, Python, torch and torch_npu, against the official
compatibility matrix (``checks/compat_matrix.yaml``) and the known-bad list (``checks/known_bad.yaml``).

For readers from CUDA: the layers are the same as NVIDIA driver -> CUDA toolkit -> PyTorch build. Here the
Ascend driver and firmware come from one HDK release, CANN (``ascend-toolkit`` or the runtime-only ``nnae``)
is the toolkit, and torch_npu is a plug-in package built for exactly one PyTorch release and one CANN
release, so torch, torch_npu and CANN must be chosen together from the matrix.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from npudoctor import knowledge
from npudoctor.checks.npu_smi import npus_on_bus
from npudoctor.checks.registry import (
    NO_CANN,
    NOT_AN_ASCEND_NODE,
    CheckContext,
    Outcome,
    by_severity,
    cause_of,
    check,
    error,
    fail,
    not_installed,
    passed,
    skip,
    warn,
)
from npudoctor.parsers.versions import Version, in_range, parse_version, train_in_list

MATRIX_SOURCE = "checks/compat_matrix.yaml (Ascend/pytorch COMPATIBILITY.en.md)"


# --- the compatibility matrix as objects ---------------------------------------------------------------


@dataclass(frozen=True)
class Release:
    """One row of the matrix: a torch_npu package built for one PyTorch and one CANN release."""

    torch_npu: Version
    torch: Version
    cann: Version
    branch: str
    eol: bool = False
    note: str = ""


class Matrix:
    """Queries on ``checks/compat_matrix.yaml``.

    >>> m = matrix()
    >>> m.find(Version.parse("2.1.0.post12")).cann.text
    '8.1.RC1'
    >>> m.best_for(Version.parse("2.1.0+cpu"), Version.parse("8.0.0")).torch_npu.text
    '2.1.0.post10'
    >>> m.best_for(Version.parse("2.1.0")).torch_npu.text   # no CANN given: the newest for torch 2.1.0
    '2.1.0.post17'
    >>> m.python_for(Version.parse("2.2.0"))
    ['3.8', '3.9', '3.10']
    """

    def __init__(self, data: Mapping[str, Any], known_bad: Sequence[Version] = ()) -> None:
        # torch_npu versions never to recommend (checks/known_bad.yaml)
        self.known_bad = tuple(known_bad)
        self.releases: List[Release] = []
        for row in data["releases"]:
            self.releases.append(
                Release(
                    Version.parse(str(row["torch_npu"])),
                    Version.parse(str(row["torch"])),
                    Version.parse(str(row["cann"])),
                    str(row["branch"]),
                    bool(row.get("eol")),
                    str(row.get("note", "")),
                )
            )
        self.python: Dict[str, List[str]] = {str(k): [str(v) for v in vs] for k, vs in data["python"].items()}
        # parsed once: newest_supporting_python looks a key up for every release
        self._python_keys: List[Tuple[Version, str]] = [(Version.parse(key), key) for key in self.python]
        self.python_minimum: Dict[str, str] = {
            str(k): str(v) for k, v in (data.get("python_minimum") or {}).items()
        }

    def find(self, torch_npu: Version) -> Optional[Release]:
        return next((r for r in self.releases if r.torch_npu == torch_npu), None)

    def for_torch(self, torch: Version) -> List[Release]:
        """Releases built for this PyTorch release (``+cpu`` ignored), newest torch_npu first."""
        return sorted((r for r in self.releases if r.torch == torch), key=lambda r: r.torch_npu, reverse=True)

    def best_for(
        self, torch: Version, cann: Optional[Version] = None, avoid: Sequence[Version] = ()
    ) -> Optional[Release]:
        """The newest torch_npu for ``torch`` (built for ``cann`` when given), never a known-bad one."""
        for release in self.for_torch(torch):
            if release.torch_npu in avoid or release.torch_npu in self.known_bad:
                continue
            if cann is None or cann.same_release_as(release.cann):
                return release
        return None

    def _python_key(self, torch: Version) -> Optional[str]:
        exact = [key for version, key in self._python_keys if version == torch]
        if exact:
            return exact[0]
        same_minor = [key for version, key in self._python_keys if version.major_minor == torch.major_minor]
        return same_minor[0] if same_minor else None

    def python_for(self, torch: Version) -> Optional[List[str]]:
        key = self._python_key(torch)
        return self.python[key] if key else None

    def python_minimum_for(self, torch: Version) -> Optional[str]:
        key = self._python_key(torch)
        return self.python_minimum.get(key) if key else None

    def newest_supporting_python(self, python_minor: str) -> Optional[Release]:
        """The newest torch_npu whose PyTorch supports this Python minor version ("3.8")."""
        fitting = [r for r in self.releases if python_minor in (self.python_for(r.torch) or ())]
        return max(fitting, key=lambda r: r.torch_npu) if fitting else None


class KnownBad(NamedTuple):
    """An entry of ``checks/known_bad.yaml`` (package, versions, problem, source), its versions parsed."""

    entry: Mapping[str, Any]
    versions: Tuple[Version, ...]

    @property
    def package(self) -> str:
        return str(self.entry["package"])


@functools.cache
def known_bad() -> Tuple[KnownBad, ...]:
    return tuple(
        KnownBad(entry, tuple(Version.parse(str(version)) for version in entry["versions"]))
        for entry in knowledge.load("known_bad")["known_bad"]
    )


@functools.cache
def matrix() -> Matrix:
    bad = [version for known in known_bad() if known.package == "torch_npu" for version in known.versions]
    return Matrix(knowledge.load("compat_matrix"), bad)


# --- shared helpers ------------------------------------------------------------------------------------


def _python(ctx: CheckContext) -> Tuple[Any, Optional[Outcome]]:
    """The python facts, or the SKIP/ERROR outcome that replaces the verdict when they are missing."""
    facts = ctx.facts("python")
    if facts.error is None:
        return facts, None
    if "not-found" in facts.error:
        return facts, skip(
            f"no Python interpreter to ask: {facts.error}",
            subject="python",
            fix="activate the training environment (its python3 first on PATH) and run npudoctor again",
        )
    return facts, error(f"cannot read the packages of the target Python: {facts.error}", subject="python")


def _packages(ctx: CheckContext, *names: str) -> Tuple[Any, List[Version], Optional[Outcome]]:
    """The python facts and the versions of the installed packages ``names``, or the first outcome that
    replaces the verdict: no interpreter to ask (see :func:`_python`), a package not installed (SKIP) or
    with an unreadable version (ERROR)."""
    facts, problem = _python(ctx)
    if problem:
        return facts, [], problem
    versions = []
    for name in names:
        info = facts.package(name)
        if info is None:
            if name in facts.errors:
                return facts, [], skip(f"{name} {facts.errors[name]} in {facts.where}", subject=f"python:{name}")
            missing = not_installed(name, facts.where)
            return facts, [], skip(missing, subject=f"python:{name}", cause=missing)
        version = parse_version(info.version)
        if version is None:
            return facts, [], error(
                f"{name} reports an unreadable version {info.version!r}", subject=f"python:{name}"
            )
        versions.append(version)
    return facts, versions, None


def _active_cann(ctx: CheckContext) -> Optional[Any]:
    cann = ctx.facts_or_none("cann")
    return cann.active if cann is not None else None


def _active_cann_version(ctx: CheckContext) -> Optional[Version]:
    """The version of the CANN in use; None when there is none or its version is unreadable."""
    cann = _active_cann(ctx)
    return parse_version(cann.version) if cann else None


def _package_version(facts: Any, name: str) -> Optional[Version]:
    """The version of the installed package ``name``; None when it is not installed or its version is
    unreadable (checks that must tell these apart use :func:`_packages`)."""
    info = facts.package(name)
    return parse_version(info.version) if info else None


def _pip(*pins: str) -> str:
    return "pip install " + " ".join(pins)


def _cann_install_hint(cann: Version) -> str:
    return (
        f"install CANN {cann.text}: Ascend-cann-toolkit_{cann.text}_linux-$(uname -m).run --install, "
        f"then `source /usr/local/Ascend/ascend-toolkit/set_env.sh`"
    )


# --- checks --------------------------------------------------------------------------------------------


@check("VER001", stage="versions", title="Ascend driver and firmware installed and compatible")
def driver_and_firmware(ctx: CheckContext) -> Iterable[Outcome]:
    """Reads /usr/local/Ascend/driver/version.info and /usr/local/Ascend/firmware/version.info and checks
    that the firmware lies in the driver's ``compatible_version_fw`` range and the driver in the firmware's
    ``compatible_version_drv`` list.

    Driver and firmware ship together in one Ascend HDK release (like the NVIDIA driver and the GPU's
    VBIOS/GSP firmware). A firmware the driver does not support makes the card fail to initialise, or
    npu-smi report errors after a driver upgrade that was not followed by the firmware upgrade.

    The firmware's ``compatible_version_drv`` lists release trains (``[23.0.0,23.0.0.],[24.1,24.1.]``);
    real files pair firmware from HDK 23.0.7 with ``[23.0.0,23.0.0.]``, so npudoctor compares the driver's
    major.minor train (``23.0``) with each entry's, not the literal bounds.

    Fix: install the firmware package of the same HDK release as the driver
    (``Ascend-hdk-<chip>-npu-firmware_<driver version>.run --full``), or the driver matching the firmware;
    then reboot. Inside a container the firmware file is usually not mounted: that part is skipped.
    """
    facts = ctx.facts("ascend_driver")
    driver = facts.driver
    if not driver.present:
        npus = len(npus_on_bus(ctx) or ())
        if npus:
            yield fail(
                "driver",
                f"{npus} Ascend NPU(s) on the PCI bus but no driver: {driver.path} not found",
                {"npus_on_pci": npus},
                fix="install the Ascend driver of your HDK release: "
                "Ascend-hdk-<chip>-npu-driver_<version>_linux-$(uname -m).run --full, then reboot",
            )
        else:
            yield skip(
                f"no Ascend driver installed ({driver.path} not found) and no NPU on the PCI bus",
                subject="driver",
                cause=NOT_AN_ASCEND_NODE,
            )
        return
    if not driver.readable:
        yield error(f"cannot read {driver.path}: {driver.error}", subject="driver")
        return
    version = parse_version(facts.driver_version)
    if version is None:
        yield error(
            f"{driver.path} has no readable Version= line (got {facts.driver_version!r})", subject="driver"
        )
        return
    evidence = {
        "driver_version": version.text,
        "driver_innerversion": driver.get("Innerversion"),
        "compatible_version_fw": driver.get("compatible_version_fw"),
    }
    yield passed(
        "driver", f"driver {version.text} ({driver.get('Innerversion') or 'no Innerversion'})", evidence
    )

    firmware = facts.firmware
    if not firmware.present:
        yield skip(
            f"{firmware.path} not found (normal inside a container): firmware not checked",
            subject="firmware",
            evidence=evidence,
        )
        return
    if not firmware.readable:
        yield error(f"cannot read {firmware.path}: {firmware.error}", subject="firmware")
        return
    fw_version = parse_version(facts.firmware_version)
    if fw_version is None:
        yield error(f"{firmware.path} has no readable Version= line", subject="firmware")
        return
    evidence = {
        **evidence,
        "firmware_version": fw_version.text,
        "firmware_package_version": firmware.get("package_version"),
        "compatible_version_drv": firmware.get("compatible_version_drv"),
    }
    fix = (
        f"install the firmware of HDK {version.text} "
        f"(Ascend-hdk-<chip>-npu-firmware_{version.text}.run --full) "
        f"or a driver that supports firmware {fw_version.text}; then reboot"
    )
    ranges = [r for r in facts.firmware_ranges if len(r) == 2]
    if ranges and not any(in_range(fw_version, low, high) for low, high in ranges):
        wanted = ", ".join(f"{low}..{high}" for low, high in ranges)
        yield fail(
            "firmware",
            f"firmware {fw_version.text} is outside driver {version.text}'s supported range {wanted}",
            evidence,
            fix,
        )
        return
    lows = [parse_version(item[0]) for item in facts.firmware_driver_ranges]
    trains = {low.major_minor for low in lows if low is not None}
    if trains and version.major_minor not in trains:
        listed = ", ".join(sorted(f"{a}.{b}" for a, b in trains))
        yield fail(
            "firmware",
            f"firmware {fw_version.text} supports driver releases {listed}, not driver {version.text}",
            evidence,
            fix,
        )
        return
    if not ranges and not trains:
        yield skip(
            "neither file states a compatible range (compatible_version_fw / compatible_version_drv)",
            subject="firmware",
            evidence=evidence,
        )
        return
    yield passed("firmware", f"firmware {fw_version.text} is supported by driver {version.text}", evidence)


@check("VER002", stage="versions", title="CANN toolkit or nnae installed")
def cann_installed(ctx: CheckContext) -> Iterable[Outcome]:
    """Finds every installed CANN package (``ascend-toolkit``, the runtime-only ``nnae``, and the newer
    ``/usr/local/Ascend/cann-<version>`` layout) and says which one is in use.

    CANN is to the NPU what the CUDA toolkit is to a GPU: torch_npu loads its libraries at import time.
    Several versions side by side are normal; the one in use is the one ``ASCEND_HOME_PATH`` (set by
    ``set_env.sh``) points to, else what ``ascend-toolkit/latest`` links to. A variable pointing at a
    removed version makes every ``import torch_npu`` fail.

    Fix: install the CANN release the matrix names for your torch_npu
    (``Ascend-cann-toolkit_<version>_linux-<arch>.run --install``) and ``source
    /usr/local/Ascend/ascend-toolkit/set_env.sh`` in the training environment.
    """
    facts = ctx.facts("cann")
    for bad in facts.unreadable:
        yield error(f"cannot read {bad.path}: {bad.error}", subject=bad.path)
    evidence: Dict[str, Any] = {
        "installs": [f"{i.label} ({i.info_path})" for i in facts.installs],
        "links": dict(facts.latest),
        "environment": dict(facts.environment),
    }
    if not facts.installs:
        needed = _cann_needed_by_torch_npu(ctx)
        if needed is not None:
            yield fail(
                "cann",
                f"no CANN toolkit or nnae installed, but torch_npu {needed[0]} needs CANN {needed[1].text}",
                evidence,
                fix=_cann_install_hint(needed[1]),
            )
        elif ctx.facts("ascend_driver").driver.present:
            yield fail(
                "cann",
                "the Ascend driver is installed but no CANN toolkit or nnae",
                evidence,
                fix=_cann_install_hint(Version.parse(str(matrix_recommended("cann")))),
            )
        elif not facts.unreadable:
            yield skip(
                "no CANN toolkit or nnae installed (no Ascend software on this machine)",
                subject="cann",
                evidence=evidence,
                cause=NO_CANN,
            )
        return
    if facts.environment_broken:
        variable, value = facts.environment_broken
        fallback = f"; without it {facts.active.label} would be used" if facts.active else ""
        yield fail(
            "cann",
            f"{variable}={value} but no CANN is installed there{fallback}",
            evidence,
            fix="source the set_env.sh of an installed CANN, e.g. "
            "`source /usr/local/Ascend/ascend-toolkit/set_env.sh`, or unset " + variable,
        )
        return
    active = facts.active
    assert active is not None  # installs exist, so one is chosen
    others = [i.label for i in facts.installs if i is not active]
    detail = f"{active.label} in use (via {facts.active_reason})"
    if others:
        detail += "; also installed: " + ", ".join(others)
    if not facts.environment:
        detail += "; ASCEND_HOME_PATH is not set here: source set_env.sh in the training environment"
    yield passed("cann", detail, {**evidence, "active": active.label, "active_via": facts.active_reason})


def matrix_recommended(key: str) -> Any:
    return knowledge.load("compat_matrix")["recommended"][key]


def _cann_needed_by_torch_npu(ctx: CheckContext) -> Optional[Tuple[str, Version]]:
    facts = ctx.facts_or_none("python")
    version = _package_version(facts, "torch_npu") if facts is not None and facts.error is None else None
    release = matrix().find(version) if version else None
    return (version.text, release.cann) if version and release else None


@check("VER003", stage="versions", title="torch and torch_npu from the same PyTorch release",
       settings=("versions.python_timeout_s",))
def torch_and_torch_npu(ctx: CheckContext) -> Iterable[Outcome]:
    """torch_npu is built against one PyTorch release: ``torch_npu 2.1.0.post12`` needs ``torch 2.1.0``.
    torch and torch_npu must share major.minor, and the exact PyTorch release the matrix names.

    A mismatch shows up as ``import torch_npu`` failing with undefined symbols, or a warning that the
    versions do not match followed by crashes, much like a CUDA extension built for another torch.

    Fix: keep torch and install the matrix's torch_npu for it (``pip install torch_npu==<version>``; the
    fix names the release built for the CANN in use), or install the torch the torch_npu was built for.
    """
    facts, versions, problem = _packages(ctx, "torch", "torch_npu")
    if problem:
        yield problem
        return
    torch, torch_npu = versions
    m = matrix()
    cann_version = _active_cann_version(ctx)
    evidence = {
        "torch": torch.text,
        "torch_npu": torch_npu.text,
        "python": facts.where,
        "cann": cann_version.text if cann_version else None,
    }
    built_for = m.find(torch_npu)
    if torch.major_minor != torch_npu.major_minor:
        best = m.best_for(torch, cann_version) or m.best_for(torch)
        if best is not None:
            fix = (
                _pip(f"torch_npu=={best.torch_npu.text}")
                + f"   # built for torch {best.torch.text} and CANN {best.cann.text}"
            )
        elif built_for is not None:
            fix = (
                _pip(f"torch=={built_for.torch.text}")
                + f"   # the PyTorch torch_npu {torch_npu.text} was built for"
            )
        else:
            newest = m.releases[0]
            fix = (
                _pip(f"torch=={newest.torch.text}", f"torch_npu=={newest.torch_npu.text}")
                + f"   # with CANN {newest.cann.text}"
            )
        yield fail(
            "python:torch_npu",
            f"torch {torch.text} and torch_npu {torch_npu.text} are from different "
            f"PyTorch releases ({torch.major_minor[0]}.{torch.major_minor[1]} vs "
            f"{torch_npu.major_minor[0]}.{torch_npu.major_minor[1]})",
            evidence,
            fix,
        )
        return
    if built_for is not None and built_for.torch != torch:
        yield warn(
            "python:torch_npu",
            f"torch_npu {torch_npu.text} was built for torch {built_for.torch.text}, "
            f"torch {torch.text} is installed",
            evidence,
            fix=_pip(f"torch=={built_for.torch.text}"),
        )
        return
    yield passed("python:torch_npu", f"torch {torch.text} with torch_npu {torch_npu.text}", evidence)


@check("VER004", stage="versions", title="torch_npu built for the CANN in use",
       settings=("versions.cann_newer_than_matrix", "versions.python_timeout_s"))
def torch_npu_and_cann(ctx: CheckContext) -> Iterable[Outcome]:
    """Each torch_npu release is built and tested with one CANN release (the official matrix, shipped as
    ``checks/compat_matrix.yaml``): ``torch_npu 2.1.0.post10`` with CANN 8.0.0, ``2.1.0.post12`` with
    CANN 8.1.RC1, and so on.

    With an older CANN, torch_npu calls runtime functions that do not exist yet: ``import torch_npu`` fails
    with undefined symbols or operators fail with EZ9999 "cannot find bin of op". A newer CANN is usually
    fine but untested (the profile's ``versions.cann_newer_than_matrix`` sets WARN or FAIL).

    Fix: either install the torch_npu built for your torch and the CANN in use (``pip install
    torch_npu==<version>``), or install the CANN release the matrix names for your torch_npu; the finding
    names both.
    """
    facts, versions, problem = _packages(ctx, "torch_npu")
    if problem:
        yield problem
        return
    (torch_npu,) = versions
    cann = _active_cann(ctx)
    if cann is None:
        yield skip("no CANN installed to compare with (see VER002)", subject="python:torch_npu")
        return
    installed = parse_version(cann.version)
    if installed is None:
        yield error(f"CANN reports an unreadable version {cann.version!r} ({cann.info_path})", subject="cann")
        return
    m = matrix()
    release = m.find(torch_npu)
    torch = _package_version(facts, "torch")
    evidence = {
        "torch_npu": torch_npu.text,
        "cann": installed.text,
        "cann_package": cann.package,
        "cann_in_use_via": ctx.facts("cann").active_reason,
        "torch": torch.text if torch else None,
    }
    if release is None:
        official = [r.torch_npu.text for r in m.for_torch(torch)] if torch else []
        yield warn(
            "python:torch_npu",
            f"torch_npu {torch_npu.text} is not in the official compatibility matrix: "
            f"cannot tell which CANN it needs",
            evidence,
            fix=(
                f"official releases for torch {torch.text}: {', '.join(official)}"
                if official and torch
                else "use an official release listed in " + MATRIX_SOURCE
            ),
        )
        return
    evidence = {**evidence, "cann_required": release.cann.text, "branch": release.branch}
    if installed.same_release_as(release.cann):
        if release.eol:
            newer = m.best_for(release.torch)
            yield warn(
                "python:torch_npu",
                f"torch_npu {torch_npu.text} with CANN {installed.text} matches the "
                f"matrix but is end of life",
                evidence,
                fix=(_pip(f"torch_npu=={newer.torch_npu.text}") + f"   # with CANN {newer.cann.text}")
                if newer and not newer.eol
                else "move to a maintained PyTorch release from the matrix",
            )
            return
        yield passed(
            "python:torch_npu",
            f"torch_npu {torch_npu.text} was built for CANN {release.cann.text}, which is in use",
            evidence,
        )
        return
    alternative = m.best_for(torch or release.torch, installed)
    other_installed = [
        i
        for i in ctx.facts("cann").installs
        if (v := parse_version(i.version)) is not None and v.same_release_as(release.cann)
    ]
    fixes = []
    if alternative is not None:
        fixes.append(
            _pip(f"torch_npu=={alternative.torch_npu.text}")
            + f"   # built for torch {alternative.torch.text} and CANN {installed.text}"
        )
    if other_installed:
        home = other_installed[0].found_via[0]
        fixes.append(
            f"use the installed CANN {release.cann.text} at {home} "
            f"(source its set_env.sh / export ASCEND_HOME_PATH={home})"
        )
    else:
        fixes.append(_cann_install_hint(release.cann))
    fix = "\nor ".join(fixes)
    if installed < release.cann:
        yield fail(
            "python:torch_npu",
            f"torch_npu {torch_npu.text} needs CANN {release.cann.text}; the CANN in use "
            f"is {cann.label} (older)",
            evidence,
            fix,
        )
    else:
        yield by_severity(ctx, "versions.cann_newer_than_matrix")(
            "python:torch_npu",
            f"torch_npu {torch_npu.text} was built for CANN {release.cann.text}; the CANN in use is "
            f"{cann.label} (newer, untested combination)",
            evidence,
            fix,
        )


@check("VER005", stage="versions", title="Python version supported by this PyTorch release",
       settings=("versions.python_timeout_s",))
def python_supported(ctx: CheckContext) -> Iterable[Outcome]:
    """torch and torch_npu wheels exist only for the Python versions the matrix lists per PyTorch release
    (torch 2.1.0: 3.8 to 3.11; torch 2.9.0: 3.10 to 3.13; ...).

    pip then refuses the torch_npu wheel ("is not a supported wheel on this platform") or resolves an
    unrelated torch_npu; a source build is not what you want either.

    Fix: create the environment with a listed Python (``python3.10 -m venv ...``), or move to a PyTorch
    release that supports your Python; the finding names both.
    """
    facts, versions, problem = _packages(ctx, "torch")
    if problem:
        yield problem
        return
    (torch,) = versions
    python = parse_version(facts.version)
    if python is None:
        yield error(f"{facts.where} reports an unreadable Python version {facts.version!r}", subject="python")
        return
    m = matrix()
    supported = m.python_for(torch)
    evidence = {"python": python.text, "torch": torch.text, "interpreter": facts.where}
    if supported is None:
        yield skip(
            f"torch {torch.text} is not in the matrix's PyTorch/Python table",
            subject="python",
            evidence=evidence,
        )
        return
    minor = f"{python.major_minor[0]}.{python.major_minor[1]}"
    minimum = m.python_minimum_for(torch)
    evidence = {**evidence, "python_supported": supported}
    if minor in supported and (minimum is None or python >= Version.parse(minimum)):
        yield passed("python", f"Python {python.text} is supported by torch {torch.text}", evidence)
        return
    fixes = [f"use Python {supported[-1]} (supported by torch {torch.text}: {', '.join(supported)})"]
    if minimum and minor in supported:
        fixes = [f"use Python {minimum} or newer in the {minor} series, or Python {supported[-1]}"]
    other = m.newest_supporting_python(minor)
    if other is not None:
        fixes.append(
            "or "
            + _pip(f"torch=={other.torch.text}", f"torch_npu=={other.torch_npu.text}")
            + f"   # supports Python {minor}; needs CANN {other.cann.text}"
        )
    yield fail(
        "python",
        f"Python {python.text} is not supported by torch {torch.text} "
        f"(supported: {', '.join(supported)}{'; at least ' + minimum if minimum else ''})",
        evidence,
        "\n".join(fixes),
    )


@check("VER006", stage="versions", title="No known-bad package versions", settings=("versions.python_timeout_s",))
def known_bad_versions(ctx: CheckContext) -> Iterable[Outcome]:
    """Compares installed packages with ``checks/known_bad.yaml``: versions with a known defect, whatever
    the matrix says (e.g. torch_npu 2.8.0 leaks device memory).

    Such a defect shows up as slow memory growth until "out of memory" after hours of training, which no
    version matrix explains.

    Fix: install the next release for the same torch from the matrix (the finding names it, with the CANN it
    needs).
    """
    facts, problem = _python(ctx)
    if problem:
        yield problem
        return
    names = sorted({known.package for known in known_bad()})
    installed = {name: info for name in names if (info := facts.package(name)) is not None}
    if not installed:
        cause = not_installed(names[0], facts.where) if len(names) == 1 else ""
        yield skip(f"none of {', '.join(names)} is installed in {facts.where}", subject="python", cause=cause)
        return
    bad_found = False
    for known in known_bad():
        name, entry = known.package, known.entry
        info = installed.get(name)
        version = parse_version(info.version) if info else None
        if version is None or version not in known.versions:
            continue
        bad_found = True
        evidence = {"package": name, "version": version.text, "source": entry.get("source", "")}
        yield fail(
            f"python:{name}",
            f"{name} {version.text} {entry['problem']} ({entry.get('source', '')})",
            evidence,
            _known_bad_fix(ctx, facts, name, version, known.versions),
        )
    if not bad_found:
        listed = ", ".join(f"{name} {installed[name].version}" for name in sorted(installed))
        yield passed("python", f"{listed}: not on the known-bad list", {"checked": sorted(installed)})


def _known_bad_fix(ctx: CheckContext, facts: Any, name: str, version: Version, bad: Sequence[Version]) -> str:
    if name != "torch_npu":
        return f"install another {name} release than {version.text}"
    m = matrix()
    release = m.find(version)
    torch = release.torch if release else _package_version(facts, "torch")
    if torch is None:
        return f"install another torch_npu release than {version.text}"
    cann_version = _active_cann_version(ctx)
    best = m.best_for(torch, cann_version, avoid=bad) or m.best_for(torch, None, avoid=bad)
    if best is None:
        return f"install another torch_npu release than {version.text}"
    fix = (
        _pip(f"torch_npu=={best.torch_npu.text}")
        + f"   # for torch {best.torch.text}, built for CANN {best.cann.text}"
    )
    if cann_version is not None and not cann_version.same_release_as(best.cann):
        fix += f"\n{_cann_install_hint(best.cann)}"
    return fix


@check("VER007", stage="versions", title="CANN release supports the installed driver",
       settings=("versions.driver_cann_mismatch",))
def cann_and_driver(ctx: CheckContext) -> Iterable[Outcome]:
    """Driver and CANN each carry a Huawei inner version (``V100R001C15SPC012B220``: release train C15) and a
    ``compatible_version`` list of the other side's trains. The newer package knows about the older one, so
    the pair is compatible when either lists the other's train.

    Like running a CUDA toolkit newer than the driver supports: an unsupported pair fails at device open
    (``aclInit`` errors, drvMngGetConsoleLogLevel or halGetDeviceInfo failures) or behaves unpredictably.

    Fix: upgrade the driver and firmware to the HDK release documented for your CANN version, or install a
    CANN whose ``compatible_version`` lists the driver's train (the finding shows both lists). The
    profile's ``versions.driver_cann_mismatch`` sets WARN or FAIL.
    """
    driver = ctx.facts("ascend_driver")
    cann = _active_cann(ctx)
    if not driver.driver.readable:
        yield skip(
            f"driver version not available ({driver.driver.path}: {driver.driver.error}); see VER001",
            subject="driver",
            cause=cause_of("VER001", ctx),
        )
        return
    if cann is None:
        yield skip("no CANN installed (see VER002)", subject="cann", cause=NO_CANN)
        return
    driver_inner, cann_inner = driver.driver_inner, cann.inner
    if driver_inner is None or cann_inner is None:
        missing = (
            "driver Innerversion" if driver_inner is None else f"{cann.label} innerversion ({cann.info_path})"
        )
        yield skip(f"no {missing} to compare", subject="cann")
        return
    evidence = {
        "driver": driver.driver_version,
        "driver_train": driver_inner.train_code,
        "driver_compatible_version": driver.driver.get("compatible_version"),
        "cann": cann.label,
        "cann_train": cann_inner.train_code,
        "cann_compatible_version": cann.compatible_version,
    }
    if train_in_list(driver_inner, cann.compatible_drivers) or train_in_list(
        cann_inner, driver.driver_compatible_cann
    ):
        yield passed(
            "cann",
            f"{cann.label} ({cann_inner.train_code}) supports driver {driver.driver_version} "
            f"({driver_inner.train_code})",
            evidence,
        )
        return
    yield by_severity(ctx, "versions.driver_cann_mismatch")(
        "cann",
        f"{cann.label} ({cann_inner.train_code}) does not list driver {driver.driver_version} "
        f"({driver_inner.train_code}), nor does the driver list it",
        evidence,
        fix=f"upgrade the driver and firmware to the HDK release documented for CANN {cann.version}, "
        f"or install a CANN whose compatible_version lists {driver_inner.train_code}",
    )
