"""The real torch-npu wheel and an installed CPU torch, for the tests that check real libraries against
``ldd -r`` and the compiled resolver. The wheel is downloaded once (never installed: without CANN it breaks
``import torch``) into ~/.cache/npudoctor-tests; whatever is not available skips the test asking for it."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("NPUDOCTOR_TEST_CACHE", Path.home() / ".cache" / "npudoctor-tests"))
WHEEL_VERSION = "2.14.0"


def torch_npu_wheel_file() -> Path:
    """The real torch-npu wheel file (downloaded on first use, never installed), or skip."""
    return _download_wheel()


def torch_npu_wheel_dir() -> Path:
    """torch_npu/ of the extracted wheel (downloaded on first use), or skip."""
    target = CACHE / f"torch_npu-{WHEEL_VERSION}"
    lib = target / "torch_npu" / "lib" / "libtorch_npu.so"
    if lib.exists():
        return target / "torch_npu"
    wheel = _download_wheel()
    with zipfile.ZipFile(wheel) as archive:
        members = [
            m for m in archive.namelist() if m.startswith(("torch_npu/lib/", "torch_npu/_C"))
        ]
        archive.extractall(target, members)
    return target / "torch_npu"


def _download_wheel() -> Path:
    CACHE.mkdir(parents=True, exist_ok=True)
    wheels = sorted(CACHE.glob(f"torch_npu-{WHEEL_VERSION}-*manylinux*x86_64.whl"))
    if not wheels:
        try:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary=:all:",
                    "--platform",
                    "manylinux_2_28_x86_64",
                    "--python-version",
                    "311",
                    f"torch-npu=={WHEEL_VERSION}",
                    "-d",
                    str(CACHE),
                ],
                check=True,
                capture_output=True,
                timeout=600,
            )
        except (subprocess.SubprocessError, OSError) as exc:
            pytest.skip(f"torch-npu wheel not downloadable: {exc}")
        wheels = sorted(CACHE.glob(f"torch_npu-{WHEEL_VERSION}-*manylinux*x86_64.whl"))
        if not wheels:
            pytest.skip("torch-npu wheel not downloadable")
    return wheels[0]


def torch_lib_dir() -> Path:
    """torch/lib of an installed (CPU) torch, found without importing torch; or skip."""
    from importlib.util import find_spec

    spec = find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "lib"
