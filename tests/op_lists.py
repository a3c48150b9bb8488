"""Regenerate the shipped torch_npu operator lists (``checks/torch_npu_ops/<release>.yaml``) from wheels.

    python -m tests.op_lists WHEEL...        # writes one file per wheel (pip download --no-deps torch-npu==X)

The wheels are never installed: only ``torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml`` is read.
``tests/test_ops_lists.py`` regenerates the 2.14.0 list from the wheel the tests download and compares.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List

from npudoctor.ops import oplist


def render_from_wheel(wheel: str) -> str:
    _, data = oplist.read_wheel(wheel)
    source = f"{wheel}!{oplist.CODEGEN_MEMBER}"
    sections = oplist.parse_codegen_yaml(data.decode("utf-8"), source)
    release = oplist.wheel_release(wheel)
    if release is None:
        raise SystemExit(f"{wheel}: the file name names no torch_npu release")
    return oplist.render_shipped(sections, release, Path(wheel).name, oplist.file_sha256(wheel))


def main(argv: List[str]) -> int:
    folder = oplist.shipped_folder()
    for wheel in argv:
        text = render_from_wheel(wheel)
        release = oplist.wheel_release(wheel)
        (folder / f"{release}.yaml").write_text(text, encoding="utf-8")
        print(f"{release}: {folder / f'{release}.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
