"""Fake nodes for tests: a file tree read through ``--root`` plus small scripts on PATH that print samples.

    node = FakeNode(tmp_path)
    node.command("npu-smi", stdout=sample_text("npu-smi-info_910B3_8card_...txt"))
    node.file("/usr/local/Ascend/driver/version.info", "Version=23.0.7\\n")
    report = api.run_checks(node.runner())

The runner is the same LiveRunner users get from ``npudoctor check --root DIR``; only PATH and the
environment are the fake node's own.
"""

from __future__ import annotations

import os
import shlex
import stat
from pathlib import Path
from typing import Dict, List, Optional, Union

from npudoctor.probes.runner import LiveRunner

# The AER counters a kernel 5.4+ prints for a device that saw no error (names: drivers/pci/pcie/aer.c).
_UNCORRECTABLE = ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF", "MalfTLP",
                  "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr")
AER_ZERO = {
    "aer_dev_correctable": ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr",
                            "HeaderOF", "TOTAL_ERR_COR"),
    "aer_dev_nonfatal": (*_UNCORRECTABLE, "TOTAL_ERR_NONFATAL"),
    "aer_dev_fatal": (*_UNCORRECTABLE, "TOTAL_ERR_FATAL"),
}


class FakeNode:
    def __init__(self, tmp_path: Path) -> None:
        self.base = Path(tmp_path)
        self.root = self.base / "root"
        self.bin = self.base / "bin"
        self.outputs = self.base / "outputs"
        for folder in (self.root, self.bin, self.outputs):
            folder.mkdir(parents=True, exist_ok=True)
        # Only the fake bin folder and the basic system tools the scripts need.
        self.env: Dict[str, str] = {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.base / "home")}
        # The host's network interfaces (name -> addresses); None = this machine's real ones.
        self.interfaces: Optional[Dict[str, List[str]]] = None

    def path(self, system_path: str) -> Path:
        return self.root / system_path.lstrip("/")

    def file(self, system_path: str, content: Union[str, bytes] = "") -> Path:
        """A file at ``system_path`` on the node: text (written as UTF-8) or raw bytes."""
        target = self.path(system_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
        return target

    def symlink(self, system_path: str, target: str) -> Path:
        link = self.path(system_path)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        return link

    def mkdir(self, system_path: str) -> Path:
        folder = self.path(system_path)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def command(self, name: str, stdout: str = "", stderr: str = "", rc: int = 0, sleep_s: float = 0.0,
                by_args: Optional[Dict[str, str]] = None) -> Path:
        """A script ``name`` on PATH printing ``stdout``/``stderr`` and exiting ``rc``.

        ``by_args`` maps the joined argument string (e.g. ``"info -t board -i 0"``) to a different stdout.
        """
        out = self.outputs / f"{name}.out"
        err = self.outputs / f"{name}.err"
        out.write_text(stdout, encoding="utf-8")
        err.write_text(stderr, encoding="utf-8")
        lines: List[str] = []
        if sleep_s:
            lines.append(f"sleep {sleep_s}")
        for index, (args, text) in enumerate((by_args or {}).items()):
            variant = self.outputs / f"{name}.{index}.out"
            variant.write_text(text, encoding="utf-8")
            lines.append(f'if [ "$*" = {shlex.quote(args)} ]; then cat {shlex.quote(str(variant))}; exit 0; fi')
        lines += [f"cat {shlex.quote(str(out))}", f"cat {shlex.quote(str(err))} >&2", f"exit {rc}"]
        return self.script(name, "\n".join(lines) + "\n")

    def script(self, name: str, body: str, folder: Optional[Path] = None) -> Path:
        """An executable shell script ``name`` running ``body``, on PATH (or in ``folder``)."""
        target = (folder or self.bin) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("#!/bin/sh\n" + body, encoding="utf-8")
        target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        return target

    def pci_device(self, bdf: str, device_id: str = "d802", vendor_id: str = "19e5", class_code: str = "0x120000",
                   driver: Optional[str] = "devdrv_device_driver", width: int = 16, max_width: int = 16,
                   speed: str = "16.0 GT/s PCIe", max_speed: str = "16.0 GT/s PCIe") -> Path:
        """A PCI function under /sys/bus/pci/devices/<bdf>, as sysfs shows it (driver as a symlink)."""
        base = f"/sys/bus/pci/devices/{bdf}"
        for name, value in (("vendor", f"0x{vendor_id}"), ("device", f"0x{device_id}"), ("class", class_code),
                            ("current_link_width", str(width)), ("max_link_width", str(max_width)),
                            ("current_link_speed", speed), ("max_link_speed", max_speed), ("numa_node", "0")):
            self.file(f"{base}/{name}", value + "\n")
        if driver:
            self.mkdir(f"/sys/bus/pci/drivers/{driver}")
            self.symlink(f"{base}/driver", f"../../drivers/{driver}")
        for name, counters in AER_ZERO.items():  # a kernel 4.19+ keeps AER counters of every PCIe function
            self.file(f"{base}/{name}", "".join(f"{counter} 0\n" for counter in counters))
        return self.path(base)

    def npu_node(self, count: int = 8, device_id: str = "d802", with_dev: bool = True) -> None:
        """A healthy node's PCI side: ``count`` NPUs bound to the driver, and their /dev nodes."""
        for index in range(count):
            self.pci_device(f"0000:{0xc1 + index:02x}:00.0", device_id=device_id)
            if with_dev:
                self.file(f"/dev/davinci{index}")
        if with_dev:
            for name in ("davinci_manager", "devmm_svm", "hisi_hdc"):
                self.file(f"/dev/{name}")

    def setenv(self, **variables: str) -> None:
        self.env.update(variables)

    def runner(self) -> LiveRunner:
        return FakeNodeRunner(str(self.root), dict(self.env), self.interfaces)


class FakeNodeRunner(LiveRunner):
    """The LiveRunner of ``--root``, with the fake node's network interfaces when it names them."""

    def __init__(self, root: str, environ: Dict[str, str], interfaces: Optional[Dict[str, List[str]]]) -> None:
        super().__init__(root, environ)
        self._interfaces = interfaces

    def net_interfaces(self) -> Dict[str, List[str]]:
        if self._interfaces is None:
            return super().net_interfaces()
        return {name: list(addresses) for name, addresses in self._interfaces.items()}


def env_without(*names: str) -> Dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}
