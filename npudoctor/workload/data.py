"""Synthetic, seeded, learnable image-caption pairs (no downloads), for a real DataLoader.

Each sample belongs to one of ``classes`` classes. Its image is the class's fixed random pattern plus
per-sample noise; its caption is ``<start> word_a word_b word_a ... <end>`` where the two words name the class. A model
that learns pairs them (the loss falls); a broken backward does not. Consecutive indices have different
classes, so a batch (up to ``classes`` long) has no duplicate pair to confuse InfoNCE.

A plain map-style dataset (``__len__``/``__getitem__``) that imports torch inside its methods, so DataLoader
workers pickle it cheaply.
"""

from __future__ import annotations

from typing import Any, Tuple

from npudoctor.workload.clip import ClipConfig


class SyntheticPairs:
    def __init__(self, config: ClipConfig, length: int, seed: int = 0, classes: int = 64,
                 noise: float = 0.5) -> None:
        self.resolution = config.image_resolution
        self.context = config.context_length
        self.vocab = config.vocab_size
        self.length = length
        self.seed = seed
        self.classes = classes
        self.noise = noise
        self._patterns: Any = None
        if self.vocab < 2 * classes + 3 or self.context < 4:
            raise ValueError("vocabulary or context too small for the synthetic captions")

    def __len__(self) -> int:
        return self.length

    def _pattern(self, label: int) -> Any:
        import torch

        if self._patterns is None:  # built lazily (in each DataLoader worker, from the seed alone)
            gen = torch.Generator().manual_seed(self.seed)
            # Low-resolution patterns, upsampled: structure at the patch scale, learnable by a few layers.
            coarse = torch.randn(self.classes, 3, 4, 4, generator=gen)
            # A class colour too: even the near-uniform attention of an untrained ViT carries it to the
            # class token, so learning starts at once instead of after a long plateau at chance.
            colour = torch.randn(self.classes, 3, 1, 1, generator=gen)
            self._patterns = torch.nn.functional.interpolate(coarse, size=self.resolution, mode="nearest") + colour
        return self._patterns[label]

    def __getitem__(self, index: int) -> Tuple[Any, Any]:
        import torch

        if not 0 <= index < self.length:
            raise IndexError(index)
        label = (index * 7 + self.seed) % self.classes  # 7 is prime to any power-of-two class count
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        image = self._pattern(label) + self.noise * torch.randn(3, self.resolution, self.resolution, generator=gen)
        tokens = torch.zeros(self.context, dtype=torch.long)
        start, end = self.vocab - 2, self.vocab - 1  # the end token is the highest id: CLIP pools there
        words = (1 + label, 1 + self.classes + (label * 5) % self.classes)
        length = min(self.context - 2, 8)
        tokens[0] = start
        for position in range(length):
            tokens[1 + position] = words[position % 2]
        tokens[1 + length] = end
        return image, tokens
