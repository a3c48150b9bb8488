"""Probes of the hccl stage."""

from __future__ import annotations
