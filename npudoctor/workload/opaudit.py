"""The reference CLIP training step (``train-step --model tiny|vit-b-32``) under the audit.

``python -m npudoctor.workload.opaudit RECORDING --model tiny --steps 1`` builds the model and a batch first
(construction and data preparation run on the host in a real run too), then records the training step alone:
forward, CLIP loss, backward, gradient clipping, AdamW step, as ``train.run`` does them.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Dict, List, Optional

from npudoctor.ops.child import write_recording
from npudoctor.probes.proctree import guard_parent


def audit_reference_step(model_name: str = "tiny", steps: int = 1, batch: int = 4,
                         recording_path: Optional[str] = None) -> Dict[str, Any]:
    """The recording of ``steps`` reference training steps, with plain-step and audited-step seconds."""
    import torch

    from npudoctor.ops.recorder import OpAudit, warm_up
    from npudoctor.workload import clip, train
    from npudoctor.workload.data import SyntheticPairs

    options = train.TrainOptions(device="cpu", model=model_name, batch=batch, steps=steps)
    model, config = train.make_model(options)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=options.lr, betas=(0.9, 0.98), eps=1e-6,
                                  weight_decay=0.0)
    data = SyntheticPairs(config, length=batch, seed=0, classes=max(64, batch))
    pairs = [data[i] for i in range(batch)]
    images = torch.stack([p[0] for p in pairs])
    tokens = torch.stack([p[1] for p in pairs])

    def step() -> None:
        logits, _image, _text, _scale = model(images, tokens)
        loss = clip.clip_loss(logits)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), train.CLIP_GRAD_NORM)
        optimizer.step()
        clip.clamp_logit_scale(model)
        float(loss.detach().item())

    if recording_path:  # the audit runs: the parent's timeout counts from here
        write_recording(recording_path, {"ops": {}, "calls": 0, "run": {"ended": "running"}})
    step()  # warm: the optimizer's state is created in its first step, as in training
    plain = []
    for _ in range(3):  # the fastest of three: a loaded machine adds noise, never speed
        started = time.perf_counter()
        step()
        plain.append(time.perf_counter() - started)
    warm_up()  # the first dispatch under a mode imports dynamo's wrappers: start-up, not the audit's cost
    audit = OpAudit()
    audited = []
    with audit:
        for _ in range(steps):
            started = time.perf_counter()
            step()
            audited.append(time.perf_counter() - started)
    plain_s, audited_s = min(plain), min(audited)
    return {**audit.recording, "timing": {"plain_step_s": round(plain_s, 4), "audited_step_s": round(audited_s, 4)}}


def installed_op_list() -> Any:
    """The operator list of the torch_npu installed beside this interpreter, found without importing it."""
    from importlib.util import find_spec

    from npudoctor.ops import oplist

    try:
        spec = find_spec("torch_npu")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise oplist.OpListError("torch_npu is not installed in this interpreter")
    return oplist.read_folder(next(iter(spec.submodule_search_locations)))


def audit_summary(op_list: Any = None) -> Dict[str, Any]:
    """The reference step's audit in a few fields (``check --level 3``'s TRN006 reads them): which list, how many
    operators, which fall back. Raises ``OpListError`` when there is no list to judge against."""
    from npudoctor.ops import judge

    op_list = op_list if op_list is not None else installed_op_list()
    result = judge.judge(audit_reference_step("tiny", steps=1, batch=2), op_list)
    return {"list": op_list.describe(), "release": op_list.release, "operators": len(result.ops),
            "fallbacks": [{"name": op.name, "count": op.calls} for op in result.fallbacks]}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npudoctor.workload.opaudit")
    parser.add_argument("recording")
    parser.add_argument("--model", default="tiny", choices=("tiny", "vit-b-32"))
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args(argv)
    guard_parent()  # dies with npudoctor (a SIGKILL of it included)
    started = time.time()
    document = audit_reference_step(args.model, args.steps, args.batch, args.recording)
    document["run"] = {"ended": "returned", "exit_code": 0, "error": None, "forks": 0, "started": started}
    write_recording(args.recording, document)
    return 0


if __name__ == "__main__":
    sys.exit(main())
