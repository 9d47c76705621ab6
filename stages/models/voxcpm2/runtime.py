"""Stage 0 of VoxCPM2 on the shared autoregressive runtime: one latent patch per step, per sequence.

The runtime's "frames" are float patches [B, patch_size, feat_dim]. Inputs travel packed, one row
per position: [base LM input (H) | patch embedding for the residual LM, zero at text (H) | is-audio flag]
so that prompt positions (text or audio) and generated patches share one forward. `forward` returns
[lm_hidden | residual_hidden] per position; `sample_frames` turns the last ones into the next patch
(flow matching) and the stop decision, which `is_eos` reports; the stop step's patch is still emitted
(`emits_eos_frame`), as the reference keeps it.

Randomness is the flow-matching start noise, one [feat_dim, patch_size] draw per step: from the
request's seeded generator, from the global one when unseeded, or injected (`noise` of the stage
input) by parity tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from vocalis.stages.models.voxcpm2.modules import VoxCPM2
from vocalis.stages.models.voxcpm2.prompt import PromptLayout, build_prompt
from vocalis.stages.models.voxcpm2.tokenizer import TextTokenizer
from vocalis.stages.models.voxcpm2.voices import VoiceEncoder
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, SequenceStart
from vocalis.stages.runtime.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams
from vocalis.stages.runtime.stage import CacheStats

if TYPE_CHECKING:
    from vocalis.stages.models.voxcpm2.adapter import VoxCPM2Input

MAX_PATCHES_PER_TOKEN = 6.0
"""Default length cap: patches per target-text token, plus MIN_DEFAULT_PATCHES (the reference's bad-case bound)."""
MIN_DEFAULT_PATCHES = 10


@dataclass
class PatchState:
    """One sequence's generation state beside the runtime's."""

    previous: torch.Tensor
    """[P, D] condition of the next patch: the last patch, or the prompt's last feature row."""
    cfg_value: float
    inference_timesteps: int
    min_len: int
    noise: torch.Tensor | None
    """Injected start noise [steps, D, P], or None to draw it."""
    step: int = 0


class LatentGenerator(AutoregressiveModel):
    """The AutoregressiveModel of the `latent_generator` stage."""

    emits_eos_frame = True

    def __init__(self, model: VoxCPM2, tokenizer: TextTokenizer, voices: VoiceEncoder, max_len: int) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.voices = voices
        config = model.config
        self.config = config
        lm = config.base_lm
        self.hidden = lm.hidden_size
        self.cache_shape = CacheShape(
            lm.num_layers + config.residual_lm_num_layers, lm.num_kv_heads, lm.head_dim, min(max_len, config.max_length)
        )
        parameter = next(model.parameters())
        self.dtype, self.device = parameter.dtype, parameter.device
        self._stop: torch.Tensor | None = None
        self.last_stop_logits: torch.Tensor | None = None
        """[B, 2] stop logits of the last sample_frames call (parity tests read them)."""

    # -- prompt ----------------------------------------------------------------------------------

    def layout(self, request: SynthesisRequest[VoxCPM2Input]) -> tuple[PromptLayout, int]:
        """The request's prompt layout and its number of target-text tokens."""
        stage_input = request.stage_input
        text = re.sub(r"\s+", " ", request.text.replace("\n", " "))
        target = self.tokenizer.encode(text)
        ids = self.tokenizer.encode(stage_input.prompt_text + text) if stage_input.prompt is not None else target
        reference = self.voices.latents(stage_input.reference, "right") if stage_input.reference is not None else None
        prompt = self.voices.latents(stage_input.prompt, "left") if stage_input.prompt is not None else None
        return build_prompt(ids, reference, prompt, self.config.patch_size, self.config.feat_dim), len(target)

    def caches(self) -> dict[str, CacheStats]:
        return self.voices.cache.caches()

    def start(self, request: SynthesisRequest[VoxCPM2Input], payload: object = None) -> SequenceStart:
        layout, target_len = self.layout(request)
        return SequenceStart(self.prompt_embeds(layout), self.sampling(request.stage_input, target_len),
                             self.new_state(request.stage_input, layout))

    def prompt_embeds(self, layout: PromptLayout) -> torch.Tensor:
        """The packed rows [P, 2H + 1] of a prompt layout."""
        ids = layout.ids.to(self.device)
        is_audio = layout.is_audio.to(self.device)
        text = self.model.embed_text(ids)
        patch_embeds = torch.zeros_like(text)
        if bool(is_audio.any()):
            patch_embeds[is_audio] = self.model.embed_patches(layout.feats[layout.is_audio].to(self.device, self.dtype))
        inputs = torch.where(is_audio[:, None], patch_embeds, text)
        return torch.cat([inputs, patch_embeds, is_audio[:, None].to(self.dtype)], dim=-1)

    def sampling(self, stage_input: VoxCPM2Input, target_len: int) -> SamplingParams:
        default = int(target_len * MAX_PATCHES_PER_TOKEN + MIN_DEFAULT_PATCHES)
        wanted = stage_input.max_new_tokens or default  # the runtime caps it to the cache's room
        return SamplingParams(seed=stage_input.seed, max_new_tokens=wanted)

    def new_state(self, stage_input: VoxCPM2Input, layout: PromptLayout) -> PatchState:
        return PatchState(
            previous=layout.feats[-1].to(self.device, self.dtype),
            cfg_value=stage_input.cfg_value,
            inference_timesteps=stage_input.inference_timesteps,
            min_len=stage_input.min_len,
            noise=stage_input.noise,
        )

    # -- steps -----------------------------------------------------------------------------------

    def first_chunk_frames(self, request: SynthesisRequest[VoxCPM2Input]) -> int | None:
        return request.stage_input.initial_codec_chunk_frames

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        h = self.hidden
        lm_hidden, residual = self.model.step(embeds[:, :h], embeds[:, h : 2 * h], embeds[:, 2 * h] > 0.5, batch, cache)
        return torch.cat([lm_hidden, residual], dim=-1)

    def sample_frames(
        self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor], states: list[PatchState]
    ) -> torch.Tensor:
        h, config = self.hidden, self.config
        lm_hidden, residual = hidden[:, :h], hidden[:, h:]
        stop_logits = self.model.stop_logits(lm_hidden)
        mu = self.model.dit_condition(lm_hidden, residual)
        cond = torch.stack([state.previous for state in states]).transpose(1, 2)  # [B, D, P]
        noise = torch.stack([self._noise(state, sampler) for state, sampler in zip(states, samplers, strict=True)])
        patches = torch.empty(len(states), config.feat_dim, config.patch_size, dtype=self.dtype, device=self.device)
        for steps in sorted({state.inference_timesteps for state in states}):
            rows = torch.tensor([i for i, state in enumerate(states) if state.inference_timesteps == steps], device=self.device)
            cfg = torch.tensor([states[i].cfg_value for i in rows.tolist()], device=self.device)
            patches[rows] = self.model.feat_decoder.sample(mu[rows], cond[rows], noise[rows], steps, cfg)
        patches = patches.transpose(1, 2).contiguous()  # [B, P, D]
        stop = stop_logits.argmax(-1) == 1
        allowed = torch.tensor([state.step > state.min_len for state in states], device=self.device)
        self._stop = (stop & allowed).cpu()
        self.last_stop_logits = stop_logits.float().cpu()
        for state, patch in zip(states, patches, strict=True):
            state.previous = patch
            state.step += 1
        return patches

    def _noise(self, state: PatchState, sampler: SamplerState) -> torch.Tensor:
        shape = (self.config.feat_dim, self.config.patch_size)
        if state.noise is not None:
            if state.step >= len(state.noise):
                raise ValueError(f"injected noise covers {len(state.noise)} steps; step {state.step} needs more")
            value = state.noise[state.step]
        else:
            value = torch.randn(shape, generator=sampler.generator_for(self.device), device=self.device)
        return value.to(self.device, self.dtype)

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        assert self._stop is not None and len(self._stop) == len(frames)
        return self._stop

    def frame_embeds(self, frames: torch.Tensor, states: list[PatchState]) -> torch.Tensor:
        embeds = self.model.embed_patches(frames)
        return torch.cat([embeds, embeds, torch.ones(len(frames), 1, dtype=embeds.dtype, device=embeds.device)], dim=-1)
