"""Pure rules, one module per stage. Importing this package registers every check."""

from typing import List

from npudoctor.checks import hccl, libraries, logs, npu_smi, pci, site, versions, workload  # noqa: F401  (registration)
from npudoctor.checks.registry import REGISTRY, STAGES, CheckSpec


def ordered_specs() -> List[CheckSpec]:
    """All registered checks in stage order, then by id."""
    return sorted((spec for spec in REGISTRY.values() if spec.room == "node"),
                  key=lambda spec: (STAGES.index(spec.stage), spec.id))
