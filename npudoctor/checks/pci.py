"""Checks of the pci stage."""

from __future__ import annotations
