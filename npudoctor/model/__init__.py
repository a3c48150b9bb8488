"""Plain data types shared by every layer (stdlib only, no I/O)."""

from npudoctor.model.finding import STATUS_ORDER, Finding, Report, Status, Summary

__all__ = ["STATUS_ORDER", "Finding", "Report", "Status", "Summary"]
