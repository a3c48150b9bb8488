"""``logs scan --format json``: the versioned ``npudoctor.logs/2`` document.

``/2`` keeps every key of ``/1`` (files, summary, findings, skipped, fail_on, exit_code) and adds the job
layer: ``incidents`` (one per failure: id, kind, role root / consequence / independent, title, node, rank,
device, pid, first_time, codes, op, sources, caused_by, count), ``diagnosis`` (root_cause, verdict, ranks
seen / failed / waiting / silent, confidence, why), ``units`` (what each rank or file logged and when it
stopped) and ``leftover`` (findings no incident holds). A document is itself an input of ``logs scan``:
per-node documents merge into the job's verdict (:mod:`npudoctor.logs.job`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence

from npudoctor import __version__
from npudoctor.logs.model import ScanResult
from npudoctor.untrusted import clean_value

if TYPE_CHECKING:
    from npudoctor.logs.job import JobScan

SCHEMA = "npudoctor.logs/2"


def to_dict(result: ScanResult, fail_on: Sequence[str] = ("error",), exit_code: int = 0,
            job: Optional[JobScan] = None) -> Dict[str, Any]:
    if job is None:
        from npudoctor.logs.job import diagnose_result

        job = diagnose_result(result)
    files = result.files
    return clean_value({
        "schema": SCHEMA,
        "tool": {"name": "npudoctor", "version": __version__},
        "files": [f.to_dict() for f in files],
        "summary": {
            "files": len(files),
            "unreadable": sum(1 for f in files if f.status == "unreadable"),
            "skipped": len(result.skipped),
            "lines": sum(f.lines for f in files),
            "records": sum(f.records for f in files),
            "levels": dict(result.levels.most_common()),
            "modules": dict(result.modules.most_common()),
            "codes": dict(result.codes.most_common()),
            "findings": result.severity_counts(),
        },
        "findings": [f.to_dict() for f in result.findings],
        "skipped": [{"path": path, "reason": reason} for path, reason in result.skipped],
        "fail_on": list(fail_on),
        "exit_code": exit_code,
        "diagnosis": job.diagnosis.to_dict(),
        "incidents": [incident.to_dict() for incident in job.incidents],
        "units": [unit.to_dict() for unit in job.units],
        "leftover": sorted({f"{f.kind} {f.subject}" for f in job.leftover}),
    })

