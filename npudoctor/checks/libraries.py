"""Checks of the libraries stage."""

from __future__ import annotations
