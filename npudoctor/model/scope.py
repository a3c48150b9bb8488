"""Whose problem a check finds: the node's (``node``) or the job's (``job``).

A node agent (Slurm prolog and HealthCheckProgram, NPD, the DaemonSet, ClusterD's public faults) acts on the
node: it drains it, taints it or isolates a chip. It must judge only what belongs to the node: the hardware,
the driver and firmware, the device files, npu-smi and the chips' health, the NPUs' RoCE ports. The job's
Python, torch / torch_npu, CANN environment (``set_env.sh``), HCCL variables, plogs and training run are the
job's: slurmd and a DaemonSet pod have none of them, so they are checked in the job (``--scope job``, an init
container, the job's first step), never used to drain a node.
"""

from __future__ import annotations

from typing import Tuple

SCOPES: Tuple[str, ...] = ("node", "job")
# Check-ID prefixes that are the node's, whatever stage they run in (the PCI bus, npu-smi and chip health).
NODE_PREFIXES: Tuple[str, ...] = ("PCI", "SMI")
# Single checks of mixed stages that are the node's: driver/firmware install, hccn_tool and the RoCE ports.
NODE_IDS: Tuple[str, ...] = ("VER001", "HCCL006", "HCCL010", "HCCL011", "HCCL012", "HCCL013")


def scope_of(check_id: str) -> str:
    """``node`` or ``job`` for a check ID (an unknown ID is the job's: it never drains a node).

    >>> scope_of("SMI002"), scope_of("VER001"), scope_of("LIB001"), scope_of("HCCL003")
    ('node', 'node', 'job', 'job')
    """
    upper = check_id.upper()
    return "node" if upper.startswith(NODE_PREFIXES) or upper in NODE_IDS else "job"
