"""Node profiles: what a node is expected to be, and the thresholds checks use.

Thresholds live here (and in ``profiles/*.yaml``), never as constants in checks. A site profile names
only what it changes; everything else comes from ``profiles/default.yaml`` (``extends: default``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> Dict[str, Any]:
    merged: Dict[str, Any] = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class NodeProfile:
    name: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def get(self, dotted: str, default: Any = None) -> Any:
        """``profile.get("hccl.connect_timeout_s.min", 120)``"""
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def expected_chip_count(self) -> Optional[int]:
        value = self.get("node.npu_count")
        return int(value) if value is not None else None
