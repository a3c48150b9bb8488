"""A real CLIP (Radford et al. 2021) with OpenAI's parameter names, so a user's checkpoint loads into it.

Image tower: a ViT (patch-embedding convolution without bias, class token, position embeddings, ``ln_pre``,
pre-LN transformer blocks, ``ln_post`` on the class token, projection ``visual.proj``). Text tower: a causal
transformer (token and position embeddings, causal mask, ``ln_final``, the feature at the end-of-text token,
which is the highest token id as in OpenAI's tokenizer, projected by ``text_projection``). A learnable
``logit_scale`` (initialised to log(1/0.07), its exponential clamped at 100) scales the cosine similarities,
and the loss is the symmetric InfoNCE (cross-entropy over images and over texts, computed in fp32 through
log-softmax, so it never overflows).

Blocks use ``nn.MultiheadAttention`` (``attn.in_proj_weight``, ``attn.out_proj``) and an MLP named
``mlp.c_fc`` / ``mlp.c_proj`` with QuickGELU, exactly like OpenAI's ``clip/model.py``.

torch is imported inside functions only (the classes are made on first use).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any, Dict, Mapping, Tuple

from npudoctor.errors import InputError

LOGIT_SCALE_MAX = 100.0


@dataclass(frozen=True)
class ClipConfig:
    embed_dim: int
    image_resolution: int
    vision_layers: int
    vision_width: int
    vision_patch_size: int
    context_length: int
    vocab_size: int
    transformer_width: int
    transformer_layers: int

    @property
    def vision_heads(self) -> int:
        return max(1, self.vision_width // 64)

    @property
    def transformer_heads(self) -> int:
        return max(1, self.transformer_width // 64)

    def to_dict(self) -> Dict[str, int]:
        return asdict(self)


CONFIGS = {
    # OpenAI ViT-B/32: 224 px, patch 32, width 768, 12 layers; text width 512, 12 layers, context 77.
    "vit-b-32": ClipConfig(embed_dim=512, image_resolution=224, vision_layers=12, vision_width=768,
                           vision_patch_size=32, context_length=77, vocab_size=49408, transformer_width=512,
                           transformer_layers=12),
    # Same architecture, small enough to train on a laptop CPU in seconds.
    "tiny": ClipConfig(embed_dim=64, image_resolution=32, vision_layers=2, vision_width=128, vision_patch_size=8,
                       context_length=16, vocab_size=512, transformer_width=128, transformer_layers=2),
}


def config_from_state_dict(state: Mapping[str, Any]) -> ClipConfig:
    """The ViT CLIP configuration a state dict was saved from (as OpenAI's ``build_model`` derives it)."""
    try:
        conv = state["visual.conv1.weight"]
        vision_layers = len({k.split(".")[3] for k in state if k.startswith("visual.transformer.resblocks.")})
        grid = round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5)
        return ClipConfig(
            embed_dim=int(state["text_projection"].shape[1]),
            image_resolution=int(conv.shape[-1] * grid),
            vision_layers=vision_layers,
            vision_width=int(conv.shape[0]),
            vision_patch_size=int(conv.shape[-1]),
            context_length=int(state["positional_embedding"].shape[0]),
            vocab_size=int(state["token_embedding.weight"].shape[0]),
            transformer_width=int(state["ln_final.weight"].shape[0]),
            transformer_layers=len({k.split(".")[2] for k in state if k.startswith("transformer.resblocks.")}),
        )
    except (KeyError, IndexError, AttributeError) as exc:
        raise ValueError(f"not a ViT CLIP state dict (OpenAI layout): missing or odd {exc}") from None


@functools.cache
def _classes() -> SimpleNamespace:
    import torch
    from torch import nn

    class LayerNorm(nn.LayerNorm):
        """LayerNorm computed in fp32 for fp16/bf16 inputs (as OpenAI's, so fp16 stays stable)."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.dtype in (torch.float16, torch.bfloat16):
                return super().forward(x.float()).to(x.dtype)
            return super().forward(x)

    class QuickGELU(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.sigmoid(1.702 * x)

    class ResidualAttentionBlock(nn.Module):
        def __init__(self, width: int, heads: int, causal: bool) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(width, heads)
            self.ln_1 = LayerNorm(width)
            self.mlp = nn.Sequential()
            self.mlp.add_module("c_fc", nn.Linear(width, width * 4))
            self.mlp.add_module("gelu", QuickGELU())
            self.mlp.add_module("c_proj", nn.Linear(width * 4, width))
            self.ln_2 = LayerNorm(width)
            self.causal = causal

        def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [sequence, batch, width]
            mask = None
            if self.causal:
                length = x.shape[0]
                mask = torch.full((length, length), float("-inf"), device=x.device, dtype=x.dtype).triu_(1)
            h = self.ln_1(x)
            x = x + self.attn(h, h, h, need_weights=False, attn_mask=mask)[0]
            return x + self.mlp(self.ln_2(x))

    class Transformer(nn.Module):
        def __init__(self, width: int, layers: int, heads: int, causal: bool = False) -> None:
            super().__init__()
            self.width, self.layers = width, layers
            self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width, heads, causal) for _ in range(layers)])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.resblocks(x)

    class VisionTransformer(nn.Module):
        def __init__(self, cfg: ClipConfig) -> None:
            super().__init__()
            width, patch = cfg.vision_width, cfg.vision_patch_size
            scale = width ** -0.5
            grid = cfg.image_resolution // patch
            self.conv1 = nn.Conv2d(3, width, kernel_size=patch, stride=patch, bias=False)
            self.class_embedding = nn.Parameter(scale * torch.randn(width))
            self.positional_embedding = nn.Parameter(scale * torch.randn(grid * grid + 1, width))
            self.ln_pre = LayerNorm(width)
            self.transformer = Transformer(width, cfg.vision_layers, cfg.vision_heads)
            self.ln_post = LayerNorm(width)
            self.proj = nn.Parameter(scale * torch.randn(width, cfg.embed_dim))

        def forward(self, images: torch.Tensor) -> torch.Tensor:
            x = self.conv1(images)  # [batch, width, grid, grid]
            x = x.flatten(2).transpose(1, 2)  # [batch, grid*grid, width]
            cls = self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
            x = torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype)
            x = self.ln_pre(x).transpose(0, 1)  # [tokens, batch, width]
            x = self.transformer(x).transpose(0, 1)
            return self.ln_post(x[:, 0, :]) @ self.proj.to(x.dtype)

    class CLIP(nn.Module):
        def __init__(self, cfg: ClipConfig) -> None:
            super().__init__()
            self.config = cfg
            self.context_length = cfg.context_length
            self.visual = VisionTransformer(cfg)
            self.transformer = Transformer(cfg.transformer_width, cfg.transformer_layers, cfg.transformer_heads,
                                           causal=True)
            self.vocab_size = cfg.vocab_size
            self.token_embedding = nn.Embedding(cfg.vocab_size, cfg.transformer_width)
            self.positional_embedding = nn.Parameter(torch.empty(cfg.context_length, cfg.transformer_width))
            self.ln_final = LayerNorm(cfg.transformer_width)
            self.text_projection = nn.Parameter(torch.empty(cfg.transformer_width, cfg.embed_dim))
            self.logit_scale = nn.Parameter(torch.ones([]) * math.log(1 / 0.07))
            self._initialise()

        def _initialise(self) -> None:
            nn.init.normal_(self.token_embedding.weight, std=0.02)
            nn.init.normal_(self.positional_embedding, std=0.01)
            width, layers = self.transformer.width, self.transformer.layers
            proj_std = (width ** -0.5) * ((2 * layers) ** -0.5)
            block: Any
            for block in self.transformer.resblocks:
                nn.init.normal_(block.attn.in_proj_weight, std=width ** -0.5)
                nn.init.normal_(block.attn.out_proj.weight, std=proj_std)
                nn.init.normal_(block.mlp.c_fc.weight, std=(2 * width) ** -0.5)
                nn.init.normal_(block.mlp.c_proj.weight, std=proj_std)
            nn.init.normal_(self.text_projection, std=width ** -0.5)

        def encode_image(self, images: torch.Tensor) -> torch.Tensor:
            return self.visual(images)

        def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
            x = self.token_embedding(tokens) + self.positional_embedding
            x = self.transformer(x.transpose(0, 1)).transpose(0, 1)
            x = self.ln_final(x)
            # The end-of-text token has the highest id in every caption (OpenAI's tokenizer): pool there.
            eot = tokens.argmax(dim=-1)
            return x[torch.arange(x.shape[0], device=x.device), eot] @ self.text_projection.to(x.dtype)

        def scale(self) -> torch.Tensor:
            return self.logit_scale.exp().clamp(max=LOGIT_SCALE_MAX)

        def forward(self, images: torch.Tensor, tokens: torch.Tensor) -> Tuple[torch.Tensor, ...]:
            """(logits_per_image, image_features, text_features, scale); features L2-normalised."""
            image = self.encode_image(images)
            text = self.encode_text(tokens)
            image = image / image.norm(dim=-1, keepdim=True)
            text = text / text.norm(dim=-1, keepdim=True)
            scale = self.scale()
            return scale * image @ text.t(), image, text, scale

    return SimpleNamespace(CLIP=CLIP, LayerNorm=LayerNorm, QuickGELU=QuickGELU)


def build_model(config: ClipConfig) -> Any:
    return _classes().CLIP(config)


def clip_loss(logits_per_image: Any) -> Any:
    """Symmetric InfoNCE: the mean of cross-entropy over images and over texts (fp32, log-softmax)."""
    import torch
    import torch.nn.functional as F

    logits = logits_per_image if logits_per_image.dtype == torch.float64 else logits_per_image.float()
    labels = torch.arange(logits.shape[0], device=logits.device)
    return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2


def clamp_logit_scale(model: Any) -> None:
    """Keep the learnable temperature at or below log(100), as OpenAI's training does after each step."""
    import torch

    with torch.no_grad():
        model.logit_scale.clamp_(0, math.log(LOGIT_SCALE_MAX))


class WeightsError(InputError):
    """A --weights file that cannot be loaded into this CLIP (one line for the user)."""


# The largest ViT CLIP OpenAI released (ViT-L/14@336px, 427,944,193 parameters): a --weights file may hold
# its parameters in fp32 and a little more (the pickle, version records, buffers), never more.
LARGEST_CONFIG = ClipConfig(embed_dim=768, image_resolution=336, vision_layers=24, vision_width=1024,
                            vision_patch_size=14, context_length=77, vocab_size=49408, transformer_width=768,
                            transformer_layers=12)
ARCHIVE_SLACK_BYTES = 64 << 20
MAX_ARCHIVE_MEMBERS = 20000
# torch.save writes every record stored (uncompressed); a compressed record may shrink a little, never like
# a decompression bomb.
MAX_EXPANSION = 20
SMALL_MEMBER_BYTES = 1 << 20


def parameter_count(config: ClipConfig) -> int:
    """The parameters of the CLIP ``config`` builds, counted from its shape (no torch)."""
    def blocks(width: int, layers: int) -> int:  # attention (in/out projections), MLP x4, two LayerNorms
        return layers * (12 * width * width + 13 * width)

    width, grid, text = config.vision_width, config.image_resolution // config.vision_patch_size, \
        config.transformer_width
    vision = (width * 3 * config.vision_patch_size ** 2 + width + (grid * grid + 1) * width + 4 * width
              + blocks(width, config.vision_layers) + width * config.embed_dim)
    language = (config.vocab_size * text + config.context_length * text + blocks(text, config.transformer_layers)
                + 2 * text + text * config.embed_dim + 1)
    return vision + language


def max_weights_bytes() -> int:
    return parameter_count(LARGEST_CONFIG) * 4 + ARCHIVE_SLACK_BYTES


def _open_weights(path: str) -> Any:
    """The regular file ``path``, opened without blocking (a FIFO or device is refused before it is read)."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise WeightsError(f"{path}: cannot open ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise WeightsError(f"{path}: not a regular file")
    return os.fdopen(fd, "rb")


def check_archive(handle: Any, path: str) -> None:
    """Refuse, from the zip directory alone, what is not tensors saved by ``torch.save`` or would cost more
    than the largest CLIP's parameters: a TorchScript archive (it carries code), a legacy pickle file, a
    compressed record that expands like a bomb, more bytes in all than :func:`max_weights_bytes`."""
    import os
    import zipfile

    limit = max_weights_bytes()
    size = os.fstat(handle.fileno()).st_size
    if size > limit:
        raise WeightsError(f"{path}: {size} bytes, more than the largest CLIP's weights need ({limit})")
    try:
        entries = _directory_entries(handle)
    except OSError as exc:  # a file of /proc or /sys (pagemap) is "regular" but cannot be read like one
        raise WeightsError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if entries > MAX_ARCHIVE_MEMBERS:  # before zipfile builds one object per entry
        raise WeightsError(f"{path}: {entries} archive members, more than a CLIP checkpoint has "
                           f"({MAX_ARCHIVE_MEMBERS} at most)")
    handle.seek(0)
    try:
        archive = zipfile.ZipFile(handle)
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise WeightsError(f"{path}: not a torch.save zip archive ({str(exc).splitlines()[0][:120]}); "
                           f"only tensors saved by torch.save (PyTorch >= 1.6) are read") from None
    names = [member.filename for member in members]
    if any(name.endswith("/constants.pkl") or "/code/" in name for name in names):
        raise WeightsError(f"{path}: a TorchScript archive: it carries code, which npudoctor never runs; save "
                           f"its tensors with torch.save(model.state_dict(), FILE) and give that file")
    if len(members) > MAX_ARCHIVE_MEMBERS or not any(name.endswith("data.pkl") for name in names):
        raise WeightsError(f"{path}: not a torch.save archive ({len(members)} members, no data.pkl)")
    total = 0
    for member in members:
        if member.compress_type == zipfile.ZIP_STORED:
            if member.compress_size != member.file_size:
                raise WeightsError(f"{path}: corrupt archive ({member.filename}: sizes disagree)")
        elif member.file_size > max(SMALL_MEMBER_BYTES, MAX_EXPANSION * member.compress_size):
            raise WeightsError(f"{path}: {member.filename} would expand from {member.compress_size} to "
                               f"{member.file_size} bytes (a decompression bomb): refused")
        total += member.file_size
        if total > limit:
            raise WeightsError(f"{path}: holds more than {limit} bytes uncompressed, more than the largest "
                               f"CLIP's weights need")


def inspect_weights(path: str) -> None:
    """:func:`check_archive` on ``path`` alone, before torch is imported: a refused file costs nothing."""
    with _open_weights(path) as handle:
        check_archive(handle, path)


def _directory_entries(handle: Any) -> int:
    """How many members the zip's end record says its central directory holds (zip64 too); 0 when there
    is no end record (zipfile then says what is wrong)."""
    import os
    import struct

    size = os.fstat(handle.fileno()).st_size
    tail_start = max(0, size - (22 + 0xFFFF))
    handle.seek(tail_start)
    tail = handle.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return 0
    entries = struct.unpack_from("<H", tail, at + 10)[0]
    locator = at - 20
    if entries == 0xFFFF and locator >= 0 and tail[locator:locator + 4] == b"PK\x06\x07":
        offset = struct.unpack_from("<Q", tail, locator + 8)[0]
        if offset + 56 <= size:
            handle.seek(offset)
            record = handle.read(56)
            if record[:4] == b"PK\x06\x06":
                entries = struct.unpack_from("<Q", record, 32)[0]
    return int(entries)


def load_state_dict_file(path: str) -> Dict[str, Any]:
    """A CLIP state dict from a file: ``torch.save(model.state_dict())`` or a checkpoint holding one under
    ``state_dict``/``model``. Tensors only: the zip archive is looked at first (:func:`check_archive`), then
    loaded with ``weights_only=True`` on the CPU; no code from the file runs (TorchScript is refused)."""
    import torch

    with _open_weights(path) as handle:
        check_archive(handle, path)
        handle.seek(0)
        try:
            state = torch.load(handle, map_location="cpu", weights_only=True)
        except Exception as exc:
            raise WeightsError(f"{path}: cannot load weights ({type(exc).__name__}: "
                               f"{str(exc).splitlines()[0][:160] if str(exc) else ''})") from None
    for key in ("state_dict", "model"):
        if isinstance(state, Mapping) and key in state and isinstance(state[key], Mapping):
            state = state[key]
    if not isinstance(state, Mapping):
        raise WeightsError(f"{path}: holds a {type(state).__name__}, not a state dict")
    clean = {}
    for key, value in state.items():
        key = str(key)
        for prefix in ("module.", "_orig_mod."):  # DistributedDataParallel, torch.compile
            if key.startswith(prefix):
                key = key[len(prefix):]
        if key in ("input_resolution", "context_length", "vocab_size"):  # OpenAI's archive extras
            continue
        clean[key] = value
    return clean


def model_from_weights(path: str) -> Tuple[Any, ClipConfig]:
    """A CLIP built in the shape of the checkpoint at ``path``, with its weights loaded (fp32)."""
    state = load_state_dict_file(path)
    try:
        config = config_from_state_dict(state)
    except ValueError as exc:
        raise WeightsError(f"{path}: {exc}") from None
    model = build_model(config)
    try:
        model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
    except RuntimeError as exc:
        raise WeightsError(f"{path}: {' '.join(str(exc).split())[:300]}") from None
    return model, config
