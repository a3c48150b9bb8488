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
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

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
from npudoctor.probes.versions import VersionFile

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
    >>> [r.torch.text for r in m.pairs_for_cann(Version.parse("8.0.0"), "3.11")]
    ['2.4.0', '2.3.1', '2.1.0']
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
        # parsed once: pairs_for_cann looks a key up for every release
        self._python_keys: List[Tuple[Version, str]] = [(Version.parse(key), key) for key in self.python]
        self.python_minimum: Dict[str, str] = {
            str(k): str(v) for k, v in (data.get("python_minimum") or {}).items()
        }

    def find(self, torch_npu: Version) -> Optional[Release]:
        return next((r for r in self.releases if r.torch_npu == torch_npu), None)

    def for_torch(self, torch: Version) -> List[Release]:
        """Releases built for this PyTorch release (``+cpu`` ignored), newest torch_npu first."""
        return sorted((r for r in self.releases if r.torch == torch), key=lambda r: r.torch_npu, reverse=True)

    def pairs_for_cann(
        self, cann: Version, python_minor: Optional[str] = None, avoid: Sequence[Version] = ()
    ) -> List[Release]:
        """The torch/torch_npu pairs built for ``cann`` (the CANN in place, the hardest layer to change after
        the driver) that support ``python_minor`` ("3.10") when given, never a known-bad or avoided one:
        maintained releases first, then the newest torch_npu.

        >>> [r.torch_npu.text for r in matrix().pairs_for_cann(Version.parse("8.0.0"), "3.10")]
        ['2.4.0.post2', '2.3.1.post4', '2.1.0.post10']
        >>> matrix().pairs_for_cann(Version.parse("9.9.0"))
        []
        """
        fitting = [
            r
            for r in self.releases
            if cann.same_release_as(r.cann)
            and r.torch_npu not in avoid
            and r.torch_npu not in self.known_bad
            and (python_minor is None or python_minor in (self.python_for(r.torch) or ()))
        ]
        return sorted(fitting, key=lambda r: (not r.eol, r.torch_npu), reverse=True)

    def pairs_supporting(self, python_minor: Optional[str], avoid: Sequence[Version] = ()) -> List[Release]:
        """Every pair (whatever its CANN) supporting ``python_minor``, never known-bad or avoided: maintained
        first, then the newest torch_npu."""
        fitting = [
            r
            for r in self.releases
            if r.torch_npu not in avoid
            and r.torch_npu not in self.known_bad
            and (python_minor is None or python_minor in (self.python_for(r.torch) or ()))
        ]
        return sorted(fitting, key=lambda r: (not r.eol, r.torch_npu), reverse=True)

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


def _python_minor(facts: Any) -> Optional[str]:
    """The target interpreter's minor version ("3.10"), None when unreadable."""
    python = parse_version(getattr(facts, "version", "") or "")
    return f"{python.major_minor[0]}.{python.major_minor[1]}" if python else None


def _install_pair(release: Release, torch: Optional[Version], torch_npu: Optional[Version], why: str) -> str:
    """``pip install`` of what must change to reach ``release``'s pair (an installed package already at its
    version is not pinned again), with ``why`` as the comment."""
    pins = []
    if torch is None or torch != release.torch:
        pins.append(f"torch=={release.torch.text}")
    if torch_npu is None or torch_npu != release.torch_npu:
        pins.append(f"torch_npu=={release.torch_npu.text}")
    return _pip(*pins) + f"   # {why}" + (" (end of life)" if release.eol else "")


def pair_fixes(
    ctx: CheckContext,
    facts: Any,
    torch: Optional[Version],
    torch_npu: Optional[Version],
    avoid: Sequence[Version] = (),
    maintained: bool = False,
) -> List[str]:
    """The fixes for a torch/torch_npu pair that does not fit the node, chosen from the whole matrix at once,
    best first. The driver and the CANN in place are the hardest layers to change, so the pairs built for
    the CANN in place (and the target Python) come first: the one that changes the fewest packages (keep
    torch, else keep torch_npu), then the newest. Only when no pair fits that CANN does a fix change CANN,
    and it says so. ``maintained``: end-of-life pairs are left out. Each fix, applied, leaves no new VER
    finding behind (tests/test_versions_converge.py applies them)."""
    m = matrix()
    cann = _active_cann_version(ctx)
    python_minor = _python_minor(facts)
    if cann is not None:
        fitting = [r for r in m.pairs_for_cann(cann, python_minor, avoid) if not (maintained and r.eol)]
        if fitting:
            fewest = (
                [r for r in fitting if torch is not None and r.torch == torch]
                or [r for r in fitting if torch_npu is not None and r.torch_npu == torch_npu]
                or fitting
            )[0]
            fixes = [_install_pair(fewest, torch, torch_npu, f"built for torch {fewest.torch.text} and "
                                   f"CANN {fewest.cann.text} (in use)")]
            newest = fitting[0]
            if newest != fewest:
                fixes.append(_install_pair(newest, torch, torch_npu,
                                           f"the newest pair built for CANN {cann.text} (in use)"))
            return fixes
    candidates = [r for r in m.pairs_supporting(python_minor, avoid) if not (maintained and r.eol)]
    same_torch = [r for r in candidates if torch is not None and r.torch == torch]
    if not candidates:
        return ["no torch/torch_npu pair in " + MATRIX_SOURCE + f" supports Python {python_minor}"]
    target = (same_torch or candidates)[0]
    if cann is None:
        return [_install_pair(target, torch, torch_npu, f"built for CANN {target.cann.text}") + "\n"
                + _cann_install_hint(target.cann)]
    direction = "a downgrade" if target.cann < cann else "an upgrade"
    which = f"the one for torch {torch.text}" if same_torch and torch is not None else "the newest"
    return [
        f"no torch/torch_npu pair in the matrix is built for CANN {cann.text} (in use)"
        + (f" and Python {python_minor}" if python_minor else "")
        + f"; {which} needs CANN {target.cann.text} ({direction}):\n"
        + _install_pair(target, torch, torch_npu, f"built for CANN {target.cann.text}")
        + "\n"
        + _cann_install_hint(target.cann)
    ]


def _cann_install_hint(cann: Version) -> str:
    return (
        f"install CANN {cann.text}: Ascend-cann-toolkit_{cann.text}_linux-$(uname -m).run --install, "
        f"then `source /usr/local/Ascend/ascend-toolkit/set_env.sh`"
    )


# --- checks --------------------------------------------------------------------------------------------


def _driver_in_use(ctx: CheckContext, info_path: str, installed: Version) -> Iterable[Outcome]:
    """The driver npu-smi reports (the one loaded, through DCMI) against the one version.info records (the
    package on disk): they differ after a driver upgrade or rollback without a reboot."""
    smi = ctx.facts_or_none("npu_smi")
    table = getattr(smi, "table", None)
    reported = parse_version(table.driver_version) if table is not None and table.driver_version else None
    if reported is None:
        return  # npu-smi did not run or printed no version: SMI001 says why
    evidence = {"version_info": installed.text, "npu_smi_driver": reported.text, "version_info_path": info_path}
    if reported.same_release_as(installed) or installed.same_release_as(reported):
        yield passed("driver:in-use", f"npu-smi reports driver {reported.text}, as {info_path} records", evidence)
        return
    yield warn(
        "driver:in-use",
        f"npu-smi reports driver {reported.text} but {info_path} records {installed.text}: the driver package "
        f"was changed without a reboot (or the container mounts another driver's files)",
        evidence,
        fix=f"reboot the node so that the installed driver {installed.text} is the one loaded; afterwards "
        f"`npu-smi info` and `cat {info_path}` must show the same version (in a container: mount the "
        f"host's /usr/local/Ascend/driver)",
    )


def _installed_version(info: VersionFile, text: Optional[str], subject: str,
                       shown: str = "") -> Union[Version, Outcome]:
    """The Version= of a version.info file that is there, or the ERROR saying why it cannot be read."""
    if not info.readable:
        return error(f"cannot read {info.path}: {info.error}", subject=subject)
    version = parse_version(text)
    if version is None:
        return error(f"{info.path} has no readable Version= line{shown}", subject=subject)
    return version


@check("VER001", stage="versions", title="Ascend driver and firmware installed and compatible",
       settings=("commands.npu_smi_timeout_s", "npu_smi.health_detail_max_chips"))  # the driver npu-smi reports
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

    The driver npu-smi reports (the one loaded) is compared with the one version.info records (the package
    on disk): after a driver upgrade without a reboot they differ, the new user-space libraries talk to the
    old kernel module, and device open or HCCL fail in ways no version file explains.

    Fix: install the firmware package of the same HDK release as the driver
    (``Ascend-hdk-<chip>-npu-firmware_<driver version>.run --full``), or the driver matching the firmware;
    then reboot. Inside a container the firmware file is usually not mounted: that part is skipped. A
    driver in use that is not the installed one: reboot.
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
    version = _installed_version(driver, facts.driver_version, "driver", f" (got {facts.driver_version!r})")
    if not isinstance(version, Version):
        yield version
        return
    evidence = {
        "driver_version": version.text,
        "driver_innerversion": driver.get("Innerversion"),
        "compatible_version_fw": driver.get("compatible_version_fw"),
    }
    yield passed(
        "driver", f"driver {version.text} ({driver.get('Innerversion') or 'no Innerversion'})", evidence
    )
    yield from _driver_in_use(ctx, driver.path, version)

    firmware = facts.firmware
    if not firmware.present:
        yield skip(
            f"{firmware.path} not found (normal inside a container): firmware not checked",
            subject="firmware",
            evidence=evidence,
        )
        return
    fw_version = _installed_version(firmware, facts.firmware_version, "firmware")
    if not isinstance(fw_version, Version):
        yield fw_version
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
    # The matrix row decides where there is one (it pairs torch_npu 1.5.0.post3 with torch 1.8.1)
    if torch.major_minor != torch_npu.major_minor and (built_for is None or built_for.torch != torch):
        fix = "\nor ".join(pair_fixes(ctx, facts, torch, torch_npu))
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
            yield warn(
                "python:torch_npu",
                f"torch_npu {torch_npu.text} with CANN {installed.text} matches the "
                f"matrix but is end of life",
                evidence,
                fix="\nor ".join(pair_fixes(ctx, facts, torch, torch_npu, maintained=True)),
            )
            return
        yield passed(
            "python:torch_npu",
            f"torch_npu {torch_npu.text} was built for CANN {release.cann.text}, which is in use",
            evidence,
        )
        return
    other_installed = [
        i
        for i in ctx.facts("cann").installs
        if (v := parse_version(i.version)) is not None and v.same_release_as(release.cann)
    ]
    # A maintained pair built for the CANN in place first; then the CANN torch_npu was built for, when that is
    # maintained and an upgrade (or nothing maintained fits the CANN in place); an end-of-life pair for the
    # CANN in place last; else pair_fixes names the nearest maintained pair and its CANN.
    python_minor = _python_minor(facts)
    keep_cann = m.pairs_for_cann(installed, python_minor)
    maintained_here = [r for r in keep_cann if not r.eol]
    fixes = pair_fixes(ctx, facts, torch, torch_npu, maintained=True) if maintained_here else []
    if not release.eol and (installed < release.cann or not maintained_here):
        # keep the packages, change CANN to the one torch_npu was built for; said plainly when it goes back
        lead = (
            ""
            if installed < release.cann
            else f"no maintained torch/torch_npu pair in the matrix is built for CANN {installed.text} (in use); "
            f"keeping torch_npu {torch_npu.text} means going back to CANN {release.cann.text} (a downgrade): "
        )
        if other_installed:
            home = other_installed[0].found_via[0]
            fixes.append(
                lead + f"use the installed CANN {release.cann.text} at {home} "
                f"(source its set_env.sh / export ASCEND_HOME_PATH={home})"
            )
        else:
            fixes.append(lead + _cann_install_hint(release.cann))
    if keep_cann and not maintained_here:
        fixes.extend(pair_fixes(ctx, facts, torch, torch_npu))
    if not maintained_here:
        fixes.extend(fix for fix in pair_fixes(ctx, facts, torch, torch_npu, maintained=True) if fix not in fixes)
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
    fixes.extend("or " + fix for fix in pair_fixes(ctx, facts, torch, _package_version(facts, "torch_npu")))
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
    the matrix says (e.g. torch_npu 2.8.0 leaks memory: vllm-ascend issue 6299).

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
    torch = _package_version(facts, "torch") or (release.torch if release else None)
    if torch is None:
        return f"install another torch_npu release than {version.text}"
    return "\nor ".join(pair_fixes(ctx, facts, torch, version, avoid=bad))


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
