"""Access to the committed tiny checkpoints and golden files, and a teacher-forced run of our modules."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import torch
from safetensors.torch import load_file

from vocalis.stages.models.qwen3_tts.prompt import Conditioning, build_prompt
from vocalis.stages.models.qwen3_tts.weights import Qwen3TTSModules, load_modules
from vocalis.stages.runtime.kv_cache import CacheShape, PagedKVCache

ROOT = Path(__file__).resolve().parents[4] / "tests" / "goldens" / "qwen3_tts"
META = json.loads((ROOT / "goldens.json").read_text())["goldens"]
NAMES = sorted(META)


@cache
def modules(variant: str) -> Qwen3TTSModules:
    return load_modules(ROOT / variant)


@cache
def golden(name: str) -> dict[str, torch.Tensor]:
    return load_file(str(ROOT / f"{name}.safetensors"))


def conditioning(name: str) -> Conditioning:
    meta, g = META[name], golden(name)
    return Conditioning(
        language=meta["language"].lower(),
        speaker=meta["speaker"].lower() if meta.get("speaker") else None,
        instructions=meta.get("instructions"),
        xvector=g.get("speaker_embedding"),
        ref_text=meta.get("ref_text"),
        ref_codes=g.get("ref_codes"),
        non_streaming=meta["non_streaming_mode"],
    )


@dataclass
class ForcedRun:
    talker_logits: torch.Tensor
    """[frames + 1, V] raw codebook-0 logits, one row per talker step."""
    predictor_logits: torch.Tensor
    """[frames, G-1, Vcp]."""
    predictor_codes: torch.Tensor
    """[frames, G-1] our argmax at each teacher-forced code-predictor step."""


@torch.inference_mode()
def teacher_forced(mods: Qwen3TTSModules, name: str, codes: torch.Tensor | None = None) -> ForcedRun:
    """Our talker and code predictor fed the reference's codes step by step (one flip cannot cascade)."""
    meta = META[name]
    codes = golden(name)["codes"] if codes is None else codes
    prompt = build_prompt(mods.talker, mods.config, mods.tokenizer, meta["text"], conditioning(name))
    c = mods.config.talker
    cache = PagedKVCache(CacheShape(c.num_hidden_layers, c.num_key_value_heads, c.head_dim, 512), num_blocks=32, block_size=16)
    table = list(range(cache.num_blocks))  # the one sequence owns every block
    hidden = mods.talker(prompt.embeds, cache.batch([table], [0], [len(prompt.embeds)]), cache)[-1:]
    position = len(prompt.embeds)
    talker_logits, predictor_logits, predictor_codes = [], [], []
    for step, frame in enumerate(codes):
        talker_logits.append(mods.talker.codec_head(hidden)[0])
        embed0 = mods.talker.embed_codec(frame[:1])
        chosen, logits = mods.talker.code_predictor.generate(hidden, embed0, None, forced=frame[None, 1:])
        predictor_logits.append(logits[0])
        predictor_codes.append(logits[0].argmax(-1))
        text = prompt.trailing[step] if step < len(prompt.trailing) else prompt.pad
        embed = mods.talker.embed_frames(frame[None]) + text
        hidden = mods.talker(embed, cache.batch([table], [position], [1]), cache)
        position += 1
    talker_logits.append(mods.talker.codec_head(hidden)[0])
    return ForcedRun(torch.stack(talker_logits), torch.stack(predictor_logits), torch.stack(predictor_codes))
