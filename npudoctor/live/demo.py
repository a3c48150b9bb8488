"""How the shipped demo recording (``npudoctor dashboard --demo``) is assembled from real npu-smi captures.

The chip table is a real ``npu-smi info`` of an 8 x 910B3 Atlas 800 A2 node (vllm-ascend issue 4256, npu-smi
24.1.0.3, idle); the process rows take the layout of a real 8-process capture (MindCluster FaultDiag guide).
Only the readings change over the minute: the job loads (HBM fills), trains (AI Core 80-99 %, power and
temperature up, short dips for the all-reduce), and NPU 5 turns Warning at 40 s. Every line keeps the
capture's layout, cell widths and column positions, so the parser reads it as it reads the node.

Rebuild: ``python -m npudoctor.live.demo OUT.tar.gz CHIPS.txt PROCESSES.txt`` with the two captures from
``tests/data/samples`` (a test checks the shipped file is what this makes).
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, Dict, List, Sequence, Tuple

from npudoctor.parsers.text import strip_header
from npudoctor.probes.sources import CommandResult

SECONDS = 60
WARNING_NPU, WARNING_AT_S = 5, 40
SOURCES = ("npu-smi-info_910B3_8card_24.1.0.3_no-processes_vllm-ascend-4256.txt (chip rows)",
           "npu-smi-info_8card_23.0.rc3_with-processes_mindcluster-doc.txt (process row layout)")
_TOKEN = re.compile(r"\S+(?:\s*/\s*\S+)?")


def _respell(cell: str, values: Sequence[str]) -> str:
    """``cell`` with its sub-fields replaced by ``values``, each starting where the original one started."""
    spans = [match.span() for match in _TOKEN.finditer(cell)]
    out = list(cell)
    for (start, _end), value in reversed(list(zip(spans, values))):
        following = next((s for s, _ in spans if s > start), len(cell))
        room = max(following - start - 1, len(value))
        out[start:start + room] = list(value.ljust(room)[:room])
    return "".join(out)[:len(cell)].ljust(len(cell))


def _set_cells(line: str, index: int, value_cells: Dict[int, str]) -> str:
    cells = line.split("|")
    for position, text in value_cells.items():
        width = len(cells[position])
        cells[position] = (" " + text).ljust(width)[:width]
    return "|".join(cells)


def _readings(second: int, npu: int) -> Dict[str, Any]:
    """Deterministic readings of one NPU at one second: load (0-5 s), then training with all-reduce dips."""
    phase = min(second / 5.0, 1.0)
    wave = math.sin(second / 3.0 + npu)
    dip = second % 10 in (7, 8)  # every 10 s the step waits on the all-reduce
    aicore = 0 if phase < 1 else int(62 + 8 * wave) if dip else int(91 + 6 * wave)
    hbm = int(3397 + phase * (48000 + 900 * npu) + (second * 6 if npu == WARNING_NPU else 0))
    return {
        "aicore": aicore, "hbm": hbm, "power": round(91.0 + phase * (180 + 25 * wave + (aicore / 2)), 1),
        "temp": int(33 + phase * (14 + 3 * wave) + second / 12),
        "health": "Warning" if npu == WARNING_NPU and second >= WARNING_AT_S else "OK",
    }


def assemble(chips_text: str, processes_text: str, seconds: int = SECONDS) -> List[Tuple[float, str]]:
    """(offset seconds, npu-smi info text) for each second of the demo."""
    chip_lines = strip_header(chips_text).splitlines()
    process_lines = strip_header(processes_text).splitlines()
    process_row = next(line for line in process_lines if re.match(r"^\|\s*\d+\s+\d+\s+\|\s*\d+", line))
    separator = next(line for line in process_lines if line.startswith("+====="))
    head_end = next(i for i, line in enumerate(chip_lines) if "Process id" in line) + 2
    samples = []
    for second in range(seconds):
        out: List[str] = []
        npu = None
        for line in chip_lines[:head_end]:
            cells = line.split("|")
            first = cells[1].split() if len(cells) > 3 else []
            if first and first[0].isdigit() and len(first) > 1:  # row 1 of a chip: "| 0     910B3 | OK | ..."
                npu = int(first[0])
                r = _readings(second, npu)
                line = _set_cells(line, 0, {2: r["health"]})
                cells = line.split("|")
                cells[3] = _respell(cells[3], [f"{r['power']}", f"{r['temp']}"])
                line = "|".join(cells)
            elif first and first[0].isdigit() and npu is not None:  # row 2: AI Core and HBM
                r = _readings(second, npu)
                cells[3] = _respell(cells[3], [str(r["aicore"]), "0    / 0", f"{r['hbm']:<5}/ 65536"])
                line = "|".join(cells)
            out.append(line)
        for npu_id in range(8):
            if second >= 3:  # the job's processes appear once it has loaded
                memory = _readings(second, npu_id)["hbm"] - 3397 + 310
                row = process_row.split("|")
                row = _set_cells(process_row, 0, {1: f"{npu_id}       0", 2: str(120460 + npu_id * 91),
                                                  3: "python3.10", 4: str(memory)}).split("|")
                out.append("|".join(row))
            else:
                text = f"| No running processes found in NPU {npu_id}"
                out.append(text.ljust(len(separator) - 1) + "|")
            out.append(separator)
        samples.append((float(second), "\n".join(out) + "\n"))
    return samples


def build_members(samples: Sequence[Tuple[float, str]]) -> Dict[str, bytes]:
    """The bundle members of the demo, as `npudoctor collect --samples` writes them."""
    from npudoctor.probes.bundle import build_bundle
    from npudoctor.probes.timeline import NPU_SMI_INFO, sample_key

    records: List[Tuple[str, Dict[str, Any]]] = []
    for index, (t_s, text) in enumerate(samples):
        result = CommandResult(NPU_SMI_INFO.argv, 0, text, "", 4.8, resolved_path="/usr/local/sbin/npu-smi")
        records.append((sample_key(index), {"kind": "command", "value": result, "t_s": t_s}))
    last = CommandResult(NPU_SMI_INFO.argv, 0, samples[-1][1], "", 4.8, resolved_path="/usr/local/sbin/npu-smi")
    records.append((NPU_SMI_INFO.key, {"kind": "command", "value": last}))
    members = build_bundle(records, {"hostname": "demo-atlas800t-a2", "arch": "aarch64"})
    manifest = json.loads(members["manifest.json"])
    manifest["created"] = "2026-12-01T00:00:00+0000"  # reproducible file
    manifest["note"] = ("demo recording ASSEMBLED from real npu-smi captures, readings varied over time: "
                        + "; ".join(SOURCES))
    members["manifest.json"] = json.dumps(manifest, indent=1, sort_keys=True).encode()
    return members


def main(argv: Sequence[str]) -> int:  # pragma: no cover - a maintainer's tool, run by hand
    import os

    from npudoctor.probes.bundle import write_bundle

    out, chips, processes = argv
    if os.path.exists(out):
        print(f"npudoctor: error: {out} already exists", file=sys.stderr)
        return 2
    with open(chips, encoding="utf-8") as a, open(processes, encoding="utf-8") as b:
        write_bundle(out, build_members(assemble(a.read(), b.read())))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
