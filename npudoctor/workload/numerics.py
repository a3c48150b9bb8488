"""Numerics on the device against a CPU reference: single operators (float64) and one whole CLIP step (fp32).

On the CPU the device *is* the CPU, so the comparisons still run: fp32 kernels against float64 ones.
The error measure is the largest elementwise relative difference, with a floor of 1% of the largest reference
value (:func:`normalised_error`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from npudoctor.workload.device import Device


@dataclass
class OpResult:
    op: str
    error: Optional[float]  # normalised max error over the whole output
    edge_error: Optional[float]  # same, border pixels only (interpolate), else None
    tolerance: float
    ok: bool
    problem: str = ""  # an exception text when the op failed to run on the device


def normalised_error(value: Any, reference: Any) -> float:
    """max |value - reference| / (|reference| + 1% of max |reference|), in float64 on the CPU; inf when
    ``value`` holds inf/nan.

    Relative per element, so a small systematic error where the values are small (GELU's tanh approximation
    for x < 0) shows; the 1% floor keeps values near zero (matmul cancellations) from blowing it up.
    """
    import torch

    value = value.detach().to("cpu", torch.float64)
    reference = reference.detach().to("cpu", torch.float64)
    if not bool(torch.isfinite(value).all()):
        return math.inf
    floor = 0.01 * (float(reference.abs().max()) or 1.0)
    return float(((value - reference).abs() / (reference.abs() + floor)).max())


def _border(tensor: Any) -> Any:
    """The outermost pixel ring of an NCHW tensor, flattened."""
    import torch

    return torch.cat([tensor[..., 0, :].flatten(), tensor[..., -1, :].flatten(),
                      tensor[..., :, 0].flatten(), tensor[..., :, -1].flatten()])


def _op_cases() -> List[Tuple[str, Callable[..., Any], Callable[[Any], Tuple[Any, ...]], bool]]:
    """(name, function of inputs, input maker from a generator, has spatial edges)."""
    import torch
    import torch.nn.functional as F

    def rand(gen: Any, *shape: int, scale: float = 1.0) -> Any:
        return torch.randn(*shape, generator=gen, dtype=torch.float64) * scale

    return [
        ("layer_norm", lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5),
         lambda g: (rand(g, 64, 768, scale=3.0) + 5.0, rand(g, 768), rand(g, 768)), False),
        ("gelu_erf", lambda x: F.gelu(x), lambda g: (rand(g, 4096, scale=4.0),), False),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), lambda g: (rand(g, 4096, scale=4.0),), False),
        ("softmax", lambda x: torch.softmax(x, dim=-1), lambda g: (rand(g, 64, 77, scale=20.0),), False),
        ("matmul", lambda a, b: a @ b, lambda g: (rand(g, 128, 512), rand(g, 512, 256)), False),
        ("logsumexp", lambda x: torch.logsumexp(x, dim=-1), lambda g: (rand(g, 64, 1000, scale=30.0),), False),
        ("interpolate_bilinear_align_corners", lambda x: F.interpolate(x, size=(37, 29), mode="bilinear",
                                                                        align_corners=True),
         lambda g: (rand(g, 2, 3, 16, 12),), True),
        ("interpolate_bilinear", lambda x: F.interpolate(x, size=(37, 29), mode="bilinear", align_corners=False),
         lambda g: (rand(g, 2, 3, 16, 12),), True),
        ("interpolate_bilinear_down", lambda x: F.interpolate(x, size=(7, 5), mode="bilinear", align_corners=False),
         lambda g: (rand(g, 2, 3, 16, 12),), True),
    ]


def _gelu_tanh_reference(x: Any) -> Any:
    """GELU's tanh approximation written out, so a device that quietly uses erf for it (or the reverse)
    shows as a difference of ~1e-3."""
    import torch

    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.pow(3))))


def compare_ops(device: Device, tolerance: float, seed: int = 0) -> List[OpResult]:
    """Each operator in fp32 on ``device`` against float64 on the CPU (GELU tanh against its written formula);
    ``tolerance``: the profile's ``train.ops_tolerance``."""
    import torch

    results: List[OpResult] = []
    dev = device.torch_device()
    for name, fn, make, spatial in _op_cases():
        inputs = make(torch.Generator().manual_seed(seed))
        reference = _gelu_tanh_reference(*inputs) if name == "gelu_tanh" else fn(*inputs)
        try:
            value = fn(*(x.to(dev, torch.float32) for x in inputs))
            device.synchronize()
        except Exception as exc:
            results.append(OpResult(name, None, None, tolerance, False, f"{type(exc).__name__}: {exc}"[:300]))
            continue
        error = normalised_error(value, reference)
        edge = None
        if spatial:
            edge = normalised_error(_border(value.cpu()), _border(reference))
        if not math.isfinite(error):
            results.append(OpResult(name, None, None, tolerance, False, "non-finite values on the device"))
            continue
        worst = max(error, edge or 0.0)
        results.append(OpResult(name, error, edge, tolerance, worst <= tolerance))
    return results


@dataclass
class StepComparison:
    reference: str  # "cpu fp32", or "cpu float64" when the device is the CPU
    loss_device: float
    loss_reference: float
    loss_rel_diff: float
    grad_norm_device: float
    grad_norm_reference: float
    grad_norm_rel_diff: float
    worst_param: str
    worst_param_rel_diff: float
    loss_tolerance: float
    grad_tolerance: float
    ok: bool


def compare_step(device: Device, config: Any, batch: int = 8, seed: int = 0, loss_tolerance: float = 1e-4,
                 grad_tolerance: float = 1e-3, weights: Optional[Dict[str, Any]] = None) -> StepComparison:
    """One seeded forward and backward of the same CLIP on ``device`` (fp32) and on the CPU (fp32; float64
    when the device is the CPU), same weights and batch; loss and gradient-norm differences."""
    import torch

    from npudoctor.workload import clip
    from npudoctor.workload.data import SyntheticPairs

    torch.manual_seed(seed)
    base = clip.build_model(config)
    if weights is not None:
        base.load_state_dict(weights)
    data = SyntheticPairs(config, length=batch, seed=seed, classes=max(64, batch))
    images = torch.stack([data[i][0] for i in range(batch)])
    tokens = torch.stack([data[i][1] for i in range(batch)])
    on_cpu = device.kind == "cpu"
    ref_dtype = torch.float64 if on_cpu else torch.float32

    def one_step(target: Any, dtype: Any) -> Tuple[float, Dict[str, Any]]:
        import copy

        model = copy.deepcopy(base).to(target, dtype)
        logits = model(images.to(target, dtype), tokens.to(target))[0]
        loss = clip.clip_loss(logits)
        loss.backward()
        grads = {n: p.grad.detach().to("cpu", torch.float64) for n, p in model.named_parameters()
                 if p.grad is not None}
        return float(loss.detach().to("cpu", torch.float64)), grads

    loss_ref, grads_ref = one_step(torch.device("cpu"), ref_dtype)
    loss_dev, grads_dev = one_step(device.torch_device(), torch.float32)
    device.synchronize()

    def norm(grads: Dict[str, Any]) -> float:
        return math.sqrt(sum(float(g.pow(2).sum()) for g in grads.values()))

    worst, worst_diff = "", 0.0
    for name, ref in grads_ref.items():
        diff = normalised_error(grads_dev[name], ref) if name in grads_dev else math.inf
        if diff > worst_diff or not worst:
            worst, worst_diff = name, diff
    norm_dev, norm_ref = norm(grads_dev), norm(grads_ref)
    loss_rel = abs(loss_dev - loss_ref) / max(abs(loss_ref), 1e-12)
    grad_rel = abs(norm_dev - norm_ref) / max(norm_ref, 1e-12)
    ok = (math.isfinite(loss_dev) and loss_rel <= loss_tolerance and grad_rel <= grad_tolerance)
    return StepComparison(
        reference="cpu float64" if on_cpu else "cpu fp32", loss_device=loss_dev, loss_reference=loss_ref,
        loss_rel_diff=loss_rel, grad_norm_device=norm_dev, grad_norm_reference=norm_ref,
        grad_norm_rel_diff=grad_rel, worst_param=worst, worst_param_rel_diff=worst_diff,
        loss_tolerance=loss_tolerance, grad_tolerance=grad_tolerance, ok=ok)
