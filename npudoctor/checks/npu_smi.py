"""Checks of the npu-smi stage."""

from __future__ import annotations
