"""Will it run on the NPU? The operator audit (``npudoctor ops audit``): what a model dispatches, judged against
the operator list of a torch_npu release. The core never imports this room; torch loads only while recording.

    from npudoctor.ops import OpAudit
    with OpAudit() as audit:
        model(batch).sum().backward()
    print(audit.result(torch_npu="2.1.0.post10").verdict_line())
"""

from npudoctor.ops.recorder import OpAudit

__all__ = ["OpAudit"]
