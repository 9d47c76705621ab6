"""The layout of a VoxCPM2 prompt: which positions are text tokens and which are audio patches.

    zero-shot          [text ... <audio_start>]
    reference          [<ref_start> ref patches ... <ref_end>] [text ... <audio_start>]
    continuation       [prompt text + text ... <audio_start>] [prompt patches ...]
    ref_continuation   [<ref_start> ref patches ... <ref_end>] [prompt text + text ... <audio_start>] [prompt patches ...]

Generation continues after the last position; its feature row (zeros, or the last prompt patch) is the
condition of the first generated patch. The marker ids are fixed in the model, not in the tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

AUDIO_START = 101
AUDIO_END = 102
REF_AUDIO_START = 103
REF_AUDIO_END = 104


@dataclass(frozen=True)
class PromptLayout:
    ids: torch.Tensor
    """[T] token ids (0 at audio positions)."""
    feats: torch.Tensor
    """[T, P, D] patch latents (zeros at text positions)."""
    is_audio: torch.Tensor
    """[T] bool."""

    def __len__(self) -> int:
        return len(self.ids)


def build_prompt(
    text_ids: list[int], reference: torch.Tensor | None, prompt: torch.Tensor | None, patch_size: int, feat_dim: int
) -> PromptLayout:
    """`text_ids` are the tokens of (prompt text + text); `reference` / `prompt` are patch latents [N, P, D]."""
    ids: list[torch.Tensor] = []
    feats: list[torch.Tensor] = []
    audio: list[bool] = []

    def text(tokens: list[int]) -> None:
        ids.append(torch.tensor(tokens, dtype=torch.long))
        feats.append(torch.zeros(len(tokens), patch_size, feat_dim))
        audio.extend([False] * len(tokens))

    def patches(latents: torch.Tensor) -> None:
        ids.append(torch.zeros(len(latents), dtype=torch.long))
        feats.append(latents.float().cpu())
        audio.extend([True] * len(latents))

    if reference is not None:
        text([REF_AUDIO_START])
        patches(reference)
        text([REF_AUDIO_END])
    text([*text_ids, AUDIO_START])
    if prompt is not None:
        patches(prompt)
    return PromptLayout(torch.cat(ids), torch.cat(feats), torch.tensor(audio))
