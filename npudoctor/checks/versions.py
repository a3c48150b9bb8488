"""Checks of the versions stage."""

from __future__ import annotations
