"""Probes of the versions stage: driver and firmware, installed CANN packages, the target Python's packages.

For readers from CUDA: the driver (``/usr/local/Ascend/driver``) is the kernel driver plus its user-space
HAL, like the NVIDIA driver; the firmware runs on the card; CANN (``ascend-toolkit``, or the smaller runtime
``nnae``) plays the role of the CUDA toolkit; torch_npu is the PyTorch plug-in built for one PyTorch and one
CANN release.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from npudoctor.knowledge import setting
from npudoctor.parsers.keyvalue import cann_version_from_cfg, parse_bracket_list, parse_key_values
from npudoctor.parsers.python_packages import PackageInfo, PythonFacts, PythonReportError, parse_python_report
from npudoctor.parsers.versions import InnerVersion, Version, parse_inner_version, parse_version
from npudoctor.probes import prefetches, provides
from npudoctor.probes.ascend_layout import ASCEND, CANN_INSTALL_RECORD, HOME_VARIABLES, INFO_FILES, PACKAGE_FOLDERS
from npudoctor.probes.sources import Command

__all__ = ["CannFacts", "CannInstall", "DriverFacts", "PackageInfo", "PythonFacts", "VersionFile"]

DRIVER_INFO = f"{ASCEND}/driver/version.info"
FIRMWARE_INFO = f"{ASCEND}/firmware/version.info"
# Version files are small; anything bigger is not one.
MAX_VERSION_FILE_BYTES = 64 * 1024


@dataclass(frozen=True)
class VersionFile:
    """One ``key=value`` version file; ``error`` is "not-found", "permission", "binary", or "garbled: ..."."""

    path: str
    values: Mapping[str, str] = field(default_factory=dict)
    error: Optional[str] = None

    @property
    def present(self) -> bool:
        return self.error != "not-found"

    @property
    def readable(self) -> bool:
        return self.error is None

    def get(self, key: str) -> Optional[str]:
        return self.values.get(key) or None


def read_version_file(runner: Any, path: str) -> VersionFile:
    content = runner.read_text(path, max_bytes=MAX_VERSION_FILE_BYTES)
    if content.text is None:
        return VersionFile(path, {}, content.error or "unreadable")
    if content.truncated:
        return VersionFile(
            path, {}, f"garbled: larger than {MAX_VERSION_FILE_BYTES} bytes, not a version file"
        )
    parsed = parse_key_values(content.text)
    if parsed.empty:
        return VersionFile(path, {}, "garbled: no key=value lines")
    return VersionFile(path, parsed.values)


@dataclass(frozen=True)
class DriverFacts:
    """``driver/version.info`` and ``firmware/version.info``."""

    driver: VersionFile
    firmware: VersionFile

    @property
    def driver_version(self) -> Optional[str]:
        return self.driver.get("Version")

    @property
    def driver_inner(self) -> Optional[InnerVersion]:
        return parse_inner_version(self.driver.get("Innerversion"))

    @property
    def driver_compatible_cann(self) -> List[Tuple[str, ...]]:
        """The CANN release trains this driver supports (``compatible_version=[V100R001C13],...``)."""
        return parse_bracket_list(self.driver.get("compatible_version") or "")

    @property
    def firmware_ranges(self) -> List[Tuple[str, ...]]:
        """Firmware versions this driver works with (``compatible_version_fw=[7.0.0,7.1.99]``)."""
        return parse_bracket_list(self.driver.get("compatible_version_fw") or "")

    @property
    def firmware_version(self) -> Optional[str]:
        return self.firmware.get("Version")

    @property
    def firmware_driver_ranges(self) -> List[Tuple[str, ...]]:
        """Driver releases this firmware works with (``compatible_version_drv=[23.0.rc3,23.0.rc3.],...``)."""
        return parse_bracket_list(self.firmware.get("compatible_version_drv") or "")


@dataclass(frozen=True)
class CannInstall:
    """One installed CANN package (toolkit or nnae) of one version."""

    package: str  # "toolkit" or "nnae"
    version: str  # "8.0.RC3", "8.5.0"
    info_path: str  # the file the version was read from
    source: str  # "install.info" or "version.cfg"
    found_via: Tuple[str, ...]  # folders (and $VARIABLES) through which it was found
    innerversion: Optional[str] = None
    compatible_version: str = ""  # driver trains this CANN supports, e.g. "[V100R001C15],[V100R001C18]"
    arch: Optional[str] = None
    install_path: Optional[str] = None  # `path=` in the install.info

    @property
    def inner(self) -> Optional[InnerVersion]:
        return parse_inner_version(self.innerversion)

    @property
    def compatible_drivers(self) -> List[Tuple[str, ...]]:
        return parse_bracket_list(self.compatible_version)

    @property
    def label(self) -> str:
        return f"{self.package} {self.version}"


@dataclass(frozen=True)
class CannFacts:
    """Every CANN install found, which one is in use, and version files that could not be read."""

    installs: Tuple[CannInstall, ...]
    active: Optional[CannInstall]
    active_reason: str  # "ASCEND_HOME_PATH=...", "/usr/local/Ascend/ascend-toolkit/latest", ...
    latest: Mapping[str, str]  # a `latest`/`cann` link -> its target
    environment: Mapping[str, str]  # HOME_VARIABLES that are set -> their value
    # A HOME_VARIABLE that points where no CANN install was found: (variable, value).
    environment_broken: Optional[Tuple[str, str]] = None
    unreadable: Tuple[VersionFile, ...] = ()


@provides("ascend_driver")
def driver_facts(ctx: Any) -> DriverFacts:
    """Equivalent to ``cat /usr/local/Ascend/driver/version.info /usr/local/Ascend/firmware/version.info``."""
    return DriverFacts(
        read_version_file(ctx.runner, DRIVER_INFO), read_version_file(ctx.runner, FIRMWARE_INFO)
    )


def _ascend_bases(runner: Any) -> List[str]:
    bases = [ASCEND]
    record = read_version_file(runner, CANN_INSTALL_RECORD)
    install_path = (record.get("Install_Path") or "").rstrip("/")
    if install_path and install_path not in bases:
        bases.append(install_path)
    return bases


def _candidate_homes(runner: Any, environ: Mapping[str, str]) -> Tuple[List[Tuple[str, str]], Dict[str, str]]:
    """(folder, default package kind) pairs to look into, each once, and `latest`/`cann` link -> target."""
    homes: List[Tuple[str, str]] = []
    links: Dict[str, str] = {}
    for base in _ascend_bases(runner):
        for folder, kind in PACKAGE_FOLDERS.items():
            root = f"{base}/{folder}"
            for entry in runner.list_dir(root).entries:
                path = f"{root}/{entry}"
                info = runner.path_info(path)
                if info.kind != "dir":
                    continue  # set_env.sh, broken links
                if info.link_target is not None:
                    links[path] = info.link_target
                homes.append((path, kind))
        # CANN 8.5 and later: <base>/cann-<version>/<arch>-linux, with a <base>/cann link to the one in use.
        for entry in runner.list_dir(base).entries:
            if entry == "cann" or entry.startswith("cann-"):
                path = f"{base}/{entry}"
                info = runner.path_info(path)
                if info.kind == "dir":
                    if info.link_target is not None:
                        links[path] = info.link_target
                    homes.append((path, "toolkit"))
    for variable in HOME_VARIABLES:
        value = environ.get(variable, "").rstrip("/")
        if value:
            homes.append((value, "toolkit"))
    # ascend-toolkit/latest is usually listed and named by both HOME_VARIABLES: read each home once.
    return list(dict.fromkeys(homes)), links


def _read_home(
    runner: Any, home: str, kind: str, host_arch: str
) -> Tuple[List[Dict[str, Any]], List[VersionFile]]:
    """The CANN installs in one home folder (from install.info files, else version.cfg)."""
    arch_dirs = [entry for entry in runner.list_dir(home).entries if entry.endswith("-linux")]
    if host_arch and f"{host_arch}-linux" not in arch_dirs:
        arch_dirs.append(f"{host_arch}-linux")
    folders = [home, *(f"{home}/{arch}" for arch in arch_dirs)]
    info_files = [(f"{folder}/{name}", package) for folder in folders for package, name in INFO_FILES.items()]
    found: List[Dict[str, Any]] = []
    unreadable: List[VersionFile] = []
    for path, package in info_files:
        info = read_version_file(runner, path)
        if not info.present:
            continue
        if not info.readable or not info.get("version"):
            unreadable.append(
                info if not info.readable else VersionFile(path, {}, "garbled: no version= line")
            )
            continue
        found.append(
            {
                "package": package,
                "version": info.values["version"],
                "info_path": path,
                "source": "install.info",
                "innerversion": info.get("innerversion"),
                "compatible_version": info.get("compatible_version") or "",
                "arch": info.get("arch"),
                "install_path": info.get("path"),
            }
        )
    if found:
        return found, unreadable
    cfg = read_version_file(runner, f"{home}/version.cfg")
    if cfg.present and not cfg.readable:
        unreadable.append(cfg)
    version = cann_version_from_cfg(cfg.values, kind)
    if version:
        found.append({"package": kind, "version": version, "info_path": cfg.path, "source": "version.cfg"})
    return found, unreadable


@provides("cann")
def cann_facts(ctx: Any) -> CannFacts:
    """Equivalent to ``ls -l /usr/local/Ascend/{ascend-toolkit,nnae,cann*}``, then ``cat`` of each
    ``[<arch>-linux/]ascend_{toolkit,nnae}_install.info`` (or ``version.cfg``), and
    ``echo $ASCEND_HOME_PATH``."""
    runner = ctx.runner
    environ = runner.environ()
    host_arch = str(runner.host().get("arch") or "")
    homes, links = _candidate_homes(runner, environ)
    merged: Dict[Tuple[Any, ...], Dict[str, Any]] = {}
    unreadable: Dict[str, VersionFile] = {}
    reached: Dict[str, bool] = {}
    for home, kind in homes:
        found, bad = _read_home(runner, home, kind, host_arch)
        reached[home] = bool(found)
        for bad_file in bad:
            unreadable.setdefault(bad_file.path, bad_file)
        for item in found:
            key = (
                item["package"],
                item["version"],
                item.get("innerversion"),
                item.get("arch"),
                item.get("install_path"),
            )
            entry = merged.setdefault(key, {**item, "found_via": []})
            if home not in entry["found_via"]:
                entry["found_via"].append(home)
    installs = tuple(
        CannInstall(**{**item, "found_via": tuple(item["found_via"])}) for item in merged.values()
    )
    environment = {v: environ[v].rstrip("/") for v in HOME_VARIABLES if environ.get(v, "").strip()}
    active, reason, broken = _active(installs, environment, reached)
    return CannFacts(installs, active, reason, links, environment, broken, tuple(unreadable.values()))


def _active(
    installs: Tuple[CannInstall, ...], environment: Mapping[str, str], reached: Mapping[str, bool]
) -> Tuple[Optional[CannInstall], str, Optional[Tuple[str, str]]]:
    """The install the runtime will load: the one set_env.sh selected, else what `latest` points to."""
    broken = None
    for variable, value in environment.items():
        chosen = [i for i in installs if value in i.found_via]
        if chosen:
            return chosen[0], f"{variable}={value}", None
        if not reached.get(value):
            broken = broken or (variable, value)
    for home in (f"{ASCEND}/ascend-toolkit/latest", f"{ASCEND}/cann", f"{ASCEND}/nnae/latest"):
        chosen = [i for i in installs if home in i.found_via]
        if chosen:
            return chosen[0], home, broken
    if installs:
        zero = Version.parse("0")
        best = max(installs, key=lambda i: (i.package == "toolkit", parse_version(i.version) or zero))
        return best, "the only/newest install found (no latest link, no ASCEND_HOME_PATH)", broken
    return None, "", broken


# The script the target interpreter runs. It reads package metadata only: importing torch_npu without a
# working CANN raises or hangs, and this stage must report versions even then. It finds distributions the way
# importlib.metadata's path finder does (``<name>-<version>.dist-info`` or ``.egg-info`` in each sys.path
# entry) without importing importlib.metadata, which costs a third of this script's time. Python 3.6-safe.
PYTHON_SCRIPT = r"""
import json, os, platform, re, sys
SO_FILES_FOR = ("torch", "torch_npu")
result = {"python": {"version": platform.python_version(), "executable": os.path.realpath(sys.executable),
          "implementation": platform.python_implementation()}, "packages": {}, "missing": [], "errors": {}}
def norm(name):
    return re.sub(r"[-_.]+", "_", name).lower()
wanted = dict((norm(n), n) for n in sys.argv[1:])
found = {}
for entry in sys.path:
    try:
        names = sorted(os.listdir(entry or "."))
    except OSError:
        continue
    for item in names:
        if item.endswith((".dist-info", ".egg-info")):
            name = wanted.get(norm(item.rsplit(".", 1)[0].split("-", 1)[0]))
            if name and name not in found:
                found[name] = (entry or ".", os.path.join(entry or ".", item))
def header(meta, key):
    files = [meta] if os.path.isfile(meta) else [os.path.join(meta, "METADATA"), os.path.join(meta, "PKG-INFO")]
    for path in files:
        try:
            with open(path, "rb") as handle:
                for raw in handle:
                    line = raw.decode("utf-8", "replace")
                    if not line.strip():
                        break
                    if line.startswith(key + ":"):
                        return line.split(":", 1)[1].strip()
        except (IOError, OSError):
            continue
    return None
for name in sys.argv[1:]:
    if name not in found:
        result["missing"].append(name)
        continue
    location, meta = found[name]
    version = header(meta, "Version")
    if not version:
        result["errors"][name] = "no Version in the metadata of " + meta
        continue
    info = {"version": version, "location": os.path.abspath(location), "so_files": []}
    if name in SO_FILES_FOR:
        try:
            with open(os.path.join(meta, "RECORD"), "rb") as handle:
                paths = [raw.decode("utf-8", "replace").split(",", 1)[0] for raw in handle]
            info["so_files"] = sorted(p for p in paths if re.search(r"\.so(\.\d+)*$", p))
        except (IOError, OSError) as exc:
            result["errors"][name] = "cannot list the files of %s: %s" % (name, exc)
    result["packages"][name] = info
print(json.dumps(result))
"""
# What the matrix needs (torch, torch_npu), and neighbours whose versions explain many failures.
PYTHON_PACKAGES = ("torch", "torch_npu", "torchvision", "torchaudio", "numpy", "apex")


def python_command(ctx: Any) -> Tuple[str, Command]:
    """The interpreter to ask (``--python``, else ``python3`` on PATH, else npudoctor's own), and how."""
    interpreter = ctx.options.get("python") or ("python3" if ctx.runner.which("python3") else sys.executable)
    timeout_s = float(setting(ctx.profile, "versions.python_timeout_s"))
    command = Command((interpreter, "-c", PYTHON_SCRIPT, *PYTHON_PACKAGES), timeout_s=timeout_s, in_process_ok=True)
    return interpreter, command


@prefetches("versions")
@prefetches("libraries")
def python_facts_command(ctx: Any) -> Command:
    return python_command(ctx)[1]


@provides("python")
def python_facts(ctx: Any) -> PythonFacts:
    """Equivalent to ``python3 -c 'import importlib.metadata as m; print(m.version("torch_npu"))'`` for torch,
    torch_npu and their neighbours, plus the interpreter's own version. Never imports torch."""
    interpreter, command = python_command(ctx)
    result = ctx.runner.run(command)
    if result.error == "timeout":
        return PythonFacts(interpreter, error=f"{interpreter} did not answer within {command.timeout_s:g} s")
    if result.error == "output-limit":
        return PythonFacts(interpreter, error=f"{interpreter} printed far more than the package report and was "
                                              "killed")
    if result.error:
        return PythonFacts(interpreter, error=f"cannot run {interpreter}: {result.error}")
    try:
        facts = parse_python_report(result.stdout, interpreter)
    except PythonReportError as exc:
        last = (result.stderr.strip().splitlines() or [""])[-1]
        return PythonFacts(interpreter, error=f"{exc} (exit {result.rc}{': ' + last if last else ''})")
    return replace(facts, found_at=result.resolved_path) if result.resolved_path else facts
