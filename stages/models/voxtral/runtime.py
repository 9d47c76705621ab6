"""Stage 0 of Voxtral TTS on the shared autoregressive runtime: one 37-code frame per step, per sequence.

The prompt is the tekken speech prompt, its [AUDIO] placeholders filled with the preset voice's embedding rows, or with
a reference clip's frames (its codes from the audio tokenizer's encoder, embedded as generated frames are).
Each step's last hidden state gives the semantic code (greedy, as the peer's deploy: argmax over the masked logits)
and, by flow matching, the 36 acoustic codes; [END_AUDIO] as the semantic code ends the sequence and is not
emitted. A generated frame enters the decoder as the sum of its codes' embeddings.

Randomness is the flow's start noise, one [36] draw per frame: from the request's seeded generator, from the global
one when unseeded, or injected (`noise` of the stage input) by tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from vocalis.stages.api.reference import resample
from vocalis.stages.models.voxtral.codec import AudioTokenizerEncoder, Quantizer
from vocalis.stages.models.voxtral.config import END_AUDIO
from vocalis.stages.models.voxtral.decoder import VoxtralLM
from vocalis.stages.models.voxtral.tekken import Tekken
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, SequenceStart
from vocalis.stages.runtime.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams

if TYPE_CHECKING:
    from vocalis.stages.models.voxtral.adapter import VoxtralInput

DEFAULT_MAX_FRAMES = 2048
"""Frames per utterance when the request sets no max_new_tokens (the peer's deploy max_tokens)."""


@dataclass
class FrameState:
    cfg_alpha: float
    noise: torch.Tensor | None
    """Injected start noise [frames, 36], or None to draw it."""
    step: int = 0


class FrameGenerator(AutoregressiveModel):
    emits_eos_frame = False

    def __init__(self, lm: VoxtralLM, tekken: Tekken, voices: dict[str, torch.Tensor], max_len: int,
                 encoder: AudioTokenizerEncoder | None = None, quantizer: Quantizer | None = None) -> None:
        """`encoder` and the codec's `quantizer`: to clone reference clips (checkpoints with the encoder's weights)."""
        self.lm = lm
        self.tekken = tekken
        self.encoder, self.quantizer = encoder, quantizer
        self.config = lm.config
        d = self.config.decoder
        self.cache_shape = CacheShape(d.n_layers, d.n_kv_heads, d.head_dim, min(max_len, d.max_seq_len))
        parameter = next(lm.parameters())
        self.dtype, self.device = parameter.dtype, parameter.device
        self.voices = {name: embedding.to(self.device, self.dtype) for name, embedding in voices.items()}
        self._eos: torch.Tensor | None = None
        self.last_semantic_logits: torch.Tensor | None = None
        """[B, semantic_logits] float32 logits of the last sample_frames call, on the stage's device (tests read them)."""

    def prompt_embeds(self, text: str, voice: str) -> torch.Tensor:
        """A preset's prompt: [AUDIO] rows from its voice_embedding file."""
        prompt = self.tekken.speech_prompt(text, voice)
        return self._embed(prompt.ids, prompt.voice_positions, self.voices[voice])

    def clone_embeds(self, text: str, samples: np.ndarray, rate: int) -> torch.Tensor:
        """A reference clip's prompt: [AUDIO] rows from its codes (encoder + quantizer), summed code embeddings."""
        if self.encoder is None or self.quantizer is None:
            raise ValueError("this checkpoint has no audio tokenizer encoder to clone a voice with")
        audio = torch.from_numpy(resample(samples, rate, self.tekken.sampling_rate))
        prompt = self.tekken.speech_prompt_rows(text, self.tekken.reference_rows(len(audio)))
        codes = self.encoder.codes(audio.to(next(self.encoder.parameters()).device), self.quantizer)
        rows = self.lm.audio_embeddings(codes.to(self.device))
        if len(rows) != len(prompt.voice_positions):
            raise ValueError(f"the clip gave {len(rows)} frames; its prompt holds {len(prompt.voice_positions)}")
        return self._embed(prompt.ids, prompt.voice_positions, rows)

    def _embed(self, ids: list[int], positions: list[int], rows: torch.Tensor) -> torch.Tensor:
        embeds = self.lm.decoder.embed_tokens(torch.tensor(ids, device=self.device))
        embeds[positions] = rows.to(embeds.dtype)
        return embeds

    def start(self, request: SynthesisRequest[VoxtralInput], payload: object = None) -> SequenceStart:
        stage_input = request.stage_input
        if stage_input.reference is not None:
            embeds = self.clone_embeds(request.text, *stage_input.reference)
        else:
            embeds = self.prompt_embeds(request.text, stage_input.voice)
        wanted = stage_input.max_new_tokens or DEFAULT_MAX_FRAMES  # the runtime caps it to the cache's room
        return SequenceStart(embeds, SamplingParams(seed=stage_input.seed, max_new_tokens=wanted),
                             FrameState(stage_input.cfg_alpha, stage_input.noise))

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        return self.lm.decoder.cached(embeds, batch, cache)

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[FrameState]) -> torch.Tensor:
        flow = self.lm.flow
        logits = flow.semantic(hidden)
        self.last_semantic_logits = logits
        semantic = logits.argmax(dim=-1)
        noise = torch.stack([self._noise(state, sampler) for state, sampler in zip(states, samplers, strict=True)])
        alpha = torch.tensor([state.cfg_alpha for state in states], device=hidden.device, dtype=hidden.dtype)
        values = flow.sample(hidden, noise, alpha, self.config.acoustic.decoding_steps)
        frames = torch.cat([semantic[:, None], flow.quantize(values)], dim=1)
        self._eos = (semantic == END_AUDIO).cpu()
        for state in states:
            state.step += 1
        return frames

    def _noise(self, state: FrameState, sampler: SamplerState) -> torch.Tensor:
        if state.noise is not None:
            if state.step >= len(state.noise):
                raise ValueError(f"injected noise covers {len(state.noise)} frames; frame {state.step} needs more")
            return state.noise[state.step].to(self.device, self.dtype)
        generator = sampler.generator_for(self.device)
        return torch.randn(self.config.n_acoustic, generator=generator, device=self.device).to(self.dtype)

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        assert self._eos is not None and len(self._eos) == len(frames)
        return self._eos

    def frame_embeds(self, frames: torch.Tensor, states: list[FrameState]) -> torch.Tensor:
        return self.lm.audio_embeddings(frames)
