"""The two stages of Qwen3-TTS on the runtime: the talker (+ code predictor) emitting 16-code frames as an
AutoregressiveStage, and the speech-tokenizer decoder turning them into 24 kHz audio as a ChunkStage."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from vocalis.stages.components.stateful_decode import StatefulCodecDecoder
from vocalis.stages.models.qwen3_tts.codec import SpeechDecoder
from vocalis.stages.models.qwen3_tts.prompt import Conditioning, TalkerPrompt, build_prompt
from vocalis.stages.models.qwen3_tts.voices import CloneSpec, VoiceCloner
from vocalis.stages.models.qwen3_tts.weights import Qwen3TTSModules
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, SequenceStart
from vocalis.stages.runtime.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams, SeenTokens, mark_seen, sample_states

MIN_NEW_FRAMES = 2
"""EOS is not allowed before this many frames (the reference's min_new_tokens), so no request is silent."""


@dataclass(frozen=True)
class Qwen3TTSInput:
    """Stage-0 input of a session, made by the adapter."""

    conditioning: Conditioning
    """Language, speaker, instructions; a cloned voice's x-vector and codes are filled in on a stage thread
    from `clone` (or given here already, by tests)."""
    sampling: SamplingParams
    """Codebook 0 (the talker)."""
    subtalker: SamplingParams
    """Codebooks 1..G-1 (the code predictor); its max_new_tokens is unused."""
    initial_codec_chunk_frames: int | None = None
    clone: CloneSpec | None = None
    """The voice to clone (Base), encoded by `VoiceCloner` off the event loop."""


@dataclass
class SequenceState:
    """What one talker sequence carries between steps."""

    trailing: torch.Tensor
    pad: torch.Tensor
    subtalker: SamplerState
    step: int = 0
    seen: SeenTokens | None = None
    """The codebook-0 codes generated so far, on the device, for the repetition penalty (None without one)."""


class TalkerStageModel(AutoregressiveModel):
    """The AutoregressiveModel of stage 0: prompt from text and conditioning, then one frame per step."""

    emits_eos_frame = False

    def __init__(self, modules: Qwen3TTSModules, max_len: int, cloner: VoiceCloner | None = None,
                 cuda_graph_batch_sizes: Sequence[int] = (), graph_capture: bool | None = None) -> None:
        self.modules = modules
        self.cloner = cloner or VoiceCloner(modules)
        self.talker = modules.talker
        c = modules.config.talker
        self.config = c
        self.cache_shape = CacheShape(c.num_hidden_layers, c.num_key_value_heads, c.head_dim, min(max_len, c.max_position_embeddings))
        never = torch.zeros(c.vocab_size, dtype=torch.bool)
        never[c.vocab_size - c.num_control_ids :] = True  # control ids are inputs, never outputs ...
        never[c.codec_eos_token_id] = False  # ... except EOS
        self._never = never
        self.predictor_graphs = (
            modules.talker.code_predictor.frame_code_graphs(cuda_graph_batch_sizes, graph_capture) if cuda_graph_batch_sizes else None
        )
        """The code predictor's 15 sub-steps on static buffers padded to those sizes (CUDA graphs on a GPU)."""

    @property
    def device(self) -> torch.device:
        return self.talker.model.codec_embedding.weight.device

    def prompt(self, request: SynthesisRequest[Qwen3TTSInput]) -> TalkerPrompt:
        m = self.modules
        return build_prompt(self.talker, m.config, m.tokenizer, request.text, self.cloner.conditioning(request))

    def start(self, request: SynthesisRequest[Qwen3TTSInput], payload: object = None) -> SequenceStart:
        inputs = request.stage_input
        prompt = self.prompt(request)
        sampling = inputs.sampling
        seen = SeenTokens.for_params(sampling, self.config.vocab_size, self.device)
        return SequenceStart(prompt.embeds, sampling,
                             SequenceState(prompt.trailing, prompt.pad, SamplerState(inputs.subtalker, stream=1), seen=seen),
                             fed_positions=prompt.fed_positions)

    def first_chunk_frames(self, request: SynthesisRequest[Qwen3TTSInput]) -> int | None:
        return request.stage_input.initial_codec_chunk_frames

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        return self.talker(embeds, batch, cache)

    def code0_logits(self, hidden: torch.Tensor, generated: list[int]) -> torch.Tensor:
        """[B, V] float logits of codebook 0 with the never-sampled ids masked (and EOS, too early)."""
        logits = self.talker.codec_head(hidden).float()
        if self._never.device != logits.device:  # moved once, not uploaded every step
            self._never = self._never.to(logits.device)
        logits = logits.masked_fill(self._never, float("-inf"))
        early = [n < MIN_NEW_FRAMES for n in generated]
        if any(early):  # decided on the host: no device read
            logits[torch.tensor(early, device=logits.device), self.config.codec_eos_token_id] = float("-inf")
        return logits

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[SequenceState]) -> torch.Tensor:
        logits = self.code0_logits(hidden, [len(h) for h in histories])
        seen = [state.seen for state in states]
        code0 = sample_states(logits, samplers, [s.mask if s else None for s in seen])  # on the device
        mark_seen(seen, code0)
        subtalkers = [state.subtalker for state in states]

        def choose(_group: int, group_logits: torch.Tensor) -> torch.Tensor:
            return sample_states(group_logits.float(), subtalkers)

        rest, _ = self.talker.code_predictor.generate(hidden, self.talker.embed_codec(code0), choose, graphs=self.predictor_graphs)
        return torch.cat([code0[:, None], rest], dim=1).cpu()

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return frames[:, 0] == self.config.codec_eos_token_id

    def frame_embeds(self, frames: torch.Tensor, states: list[SequenceState]) -> torch.Tensor:
        embeds = self.talker.embed_frames(frames.to(self.device))
        text = []
        for state in states:
            text.append(state.trailing[state.step] if state.step < len(state.trailing) else state.pad)
            state.step += 1
        return embeds + torch.stack(text).to(embeds.dtype)


def _codebooks(frames: torch.Tensor) -> torch.Tensor:
    """Frames [B, T, G] to the decoder's codes [B, G, T] (a batch's padding rows decode as code 0)."""
    return frames.transpose(1, 2).clamp(min=0)


def code2wav(decoder: SpeechDecoder, cloner: VoiceCloner) -> StatefulCodecDecoder:
    """The ChunkDecoder of stage 1: frames [B, T, G] to samples [B, T * 1920] at 24 kHz, from each request's carried
    decoder state (`SpeechDecoder.stream`), so a chunk costs its own frames: the window's left context
    (`left_context_frames`) is not read. An ICL clone's reference codes are decoded into the state with its first
    chunk (through the transformer; through the convolutions after it only as far back as they read), their audio
    dropped, as the reference decodes them before the generated codes and cuts their audio."""
    return StatefulCodecDecoder(decoder, decoder.config.samples_per_frame, codes=_codebooks,
                                reference_codes=lambda request: cloner.conditioning(request).ref_codes,
                                first_chunk=lambda request: request.stage_input.initial_codec_chunk_frames)
