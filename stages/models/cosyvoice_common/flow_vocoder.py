"""Speech tokens to waveform through flow matching and the HiFT vocoder, as a ChunkStage decoder: written once for the
families whose second stage is flow matching + HiFT: CosyVoice3 (`CausalMaskedDiffWithDiT` + `CausalHiFTGenerator`) and
GLM-TTS (`GLMFlow` + the centred `HiFTGenerator`).

Each request's stream carries its conditioning (prompt speech tokens, prompt mel, speaker embedding) and, where the
decoder streams incrementally (below), from its first chunk on what it has computed: the flow's held frames
(`FlowStream`: keys and values of every attention chunk that is complete and final, so each mel frame is computed once
more at most) and the vocoder's phase (`HiFTStream`: a window of mel a bounded length before the chunk). A chunk's
cost does not grow with the utterance but for the attention over held frames; the frames before the window
(`left_context_frames`) are not needed. A stream in a recent voice starts from that voice's primed prompt frames
(`PrimedVoices`, within the flow stage's `prompt_cache_bytes`) instead of computing them again.
With at least `exact_lookahead_tokens` of lookahead every emitted sample equals the whole-utterance decode's: the
chunk-causal DiT lets a mel frame see to the end of its attention chunk, the pre-lookahead convolution reads
`pre_lookahead_len` tokens further, and the vocoder reads 5 mel frames ahead. The published streaming re-runs flow
and vocoder over the whole prefix at every chunk (and approximates chunk ends).

The decoder streams incrementally only where the flow supports it (`streams_incrementally`): CosyVoice3's chunk-causal
DiT with the causal HiFT. GLM-TTS keeps the whole-prefix re-decode (each chunk decoded from the utterance's first
token: configure `left_context_frames` to cover the longest utterance), as its DiT attends to, and its GRN normalises
over, the whole utterance, so a frame changes as later tokens arrive and held keys/values would not be final, and its
centred HiFT reads `lookahead_mel` frames ahead; no finite lookahead makes its chunk ends exact: they approximate
the whole decode, closer the longer the lookahead, as the published streaming's do.
Rows are decoded one at a time: each has its own held frames (a different number per request), its own prompt, and
new frames from its own position; a row's output never depends on its batch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from vocalis.stages.components.flow_matching import CausalMaskedDiffWithDiT, FlowStream
from vocalis.stages.components.hift import CausalHiFTGenerator, HiFTGenerator, HiFTStream
from vocalis.stages.models.cosyvoice_common.glm_dit import GLMFlow
from vocalis.stages.models.cosyvoice_common.primed_voices import PrimedVoices
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.stage import CacheStats

HIFT_LOOKAHEAD_MEL = CausalHiFTGenerator.lookahead_mel
"""Mel frames ahead that a causal vocoder sample depends on."""


@dataclass(frozen=True, eq=False)
class FlowConditioning:
    prompt_tokens: torch.Tensor
    """[P] speech tokens of the voice's clip."""
    prompt_mel: torch.Tensor
    """[P * token_mel_ratio, mel_dim] its mel."""
    embedding: torch.Tensor
    """[E] its speaker embedding."""


class _Progress:
    """What one request's stream has computed: the flow's held frames, the vocoder's phase, the tokens so far, and
    the final mel of frames [mel_from, flow.held) that the vocoder's next windows read."""

    def __init__(self, flow: FlowStream, hift: HiFTStream) -> None:
        self.flow, self.hift = flow, hift
        self.tokens = torch.zeros(0, dtype=torch.long, device="cpu")
        self.mel: torch.Tensor | None = None
        self.mel_from = flow.held  # a primed stream starts after the frames it holds


class FlowVocoderDecoder(ChunkDecoder):
    causal = False  # rows are grouped by window length, never right-padded with tokens that are not there
    rows_at_once = False  # each row has its own held frames, prompt and position: decoded one after another

    def __init__(self, flow: CausalMaskedDiffWithDiT | GLMFlow, hift: CausalHiFTGenerator, conditioning: Callable[[SynthesisRequest], FlowConditioning],
                 n_timesteps: int = 10, first_chunk: Callable[[SynthesisRequest], int | None] | None = None,
                 prompt_cache_bytes: int = 0) -> None:
        self.flow, self.hift = flow, hift
        self.primed = PrimedVoices(prompt_cache_bytes)
        """Recent voices' flow streams primed over their prompts (incremental streaming only)."""
        self.conditioning = conditioning
        self.first_chunk = first_chunk
        self.n_timesteps = n_timesteps
        self.samples_per_frame = flow.token_mel_ratio * hift.samples_per_frame
        self.streams_incrementally = isinstance(flow, CausalMaskedDiffWithDiT) and not isinstance(hift, HiFTGenerator)
        """Whether a stream's windows are decoded incrementally (`FlowStream`, `HiFTStream`: a chunk-causal DiT and a
        causal vocoder) or each re-decoded from the utterance's first token (GLM-TTS)."""

    @property
    def exact_lookahead_tokens(self) -> int | None:
        """Tokens of lookahead with which a stream equals the whole-utterance decode; None where no finite lookahead
        does (GLM-TTS: its DiT attends to, and its GRN normalises over, the whole utterance)."""
        ratio = self.flow.token_mel_ratio
        if not isinstance(self.flow, CausalMaskedDiffWithDiT):
            return None
        chunk = max(self.flow.decoder.estimator.static_chunk_size, 1)
        vocoder = self.hift.lookahead_mel
        return math.ceil((chunk - 1) / ratio) + self.flow.pre_lookahead_layer.pre_lookahead_len + math.ceil(vocoder / ratio)

    def start(self, request: SynthesisRequest) -> DecodeStream:
        first = self.first_chunk(request) if self.first_chunk is not None else None
        return DecodeStream(first_chunk_frames=first, conditioning=self.conditioning(request))

    def caches(self) -> dict[str, CacheStats]:
        return {"primed_voices": self.primed.stats()} if self.primed.budget_bytes > 0 else {}

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        """Each row's samples of its window's [start, end) (incrementally, the rest, never emitted, left zero), or of the
        whole window (a flow without incremental streaming, or a stream without a window: a direct call)."""
        return torch.stack([self.decode_window(frames[row].reshape(-1), stream) if self.streams_incrementally and stream.window is not None
                            else self.decode_one(frames[row].reshape(-1), stream.conditioning) for row, stream in enumerate(streams)])

    def decode_window(self, tokens: torch.Tensor, stream: DecodeStream) -> torch.Tensor:
        """Samples [T * samples_per_frame] of the window's tokens [T], computing only what earlier windows did not."""
        window = stream.window
        if stream.state is None:
            cond: FlowConditioning = stream.conditioning
            flow = self.primed.stream(cond, lambda: FlowStream(self.flow, cond.prompt_tokens, cond.prompt_mel, cond.embedding, self.n_timesteps))
            stream.state = _Progress(flow, HiFTStream(self.hift))
        progress: _Progress = stream.state
        progress.tokens = torch.cat([progress.tokens[: window.context_start], tokens.cpu().long()])
        first, new = progress.flow.advance(progress.tokens)
        mel = new if progress.mel is None else torch.cat([progress.mel, new], dim=2)  # frames [mel_from, ...)
        ratio, prompt = self.flow.token_mel_ratio, progress.flow.prompt_frames
        emit, next_emit = window.start * ratio, window.end * ratio  # past the prompt
        last = min(window.lookahead_end * ratio, next_emit + HIFT_LOOKAHEAD_MEL)
        start = prompt + progress.hift.window_start(emit) - progress.mel_from
        audio = progress.hift.samples(mel[:, :, start : prompt + last - progress.mel_from].to(self.hift.conv_pre.weight.dtype), emit, next_emit)[0]
        keep = max(progress.mel_from, min(progress.flow.held, prompt + progress.hift.window_start(next_emit)))
        progress.mel = mel[:, :, keep - progress.mel_from : progress.flow.held - progress.mel_from]
        progress.mel_from = keep
        out = audio.new_zeros(len(tokens) * self.samples_per_frame)
        begin = (window.start - window.context_start) * self.samples_per_frame
        out[begin : begin + len(audio)] = audio
        return out

    def decode_one(self, tokens: torch.Tensor, conditioning: FlowConditioning, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Samples [T * samples_per_frame] of tokens [T] after the voice's prompt."""
        parameter = next(self.flow.parameters())  # GLM-TTS's flow may have no speaker projection
        device, dtype = parameter.device, parameter.dtype
        mel = self.flow.inference(
            tokens.to(device).long()[None], conditioning.prompt_tokens.to(device).long()[None], conditioning.prompt_mel.to(device)[None],
            conditioning.embedding.to(device, dtype)[None], self.n_timesteps, noise,
        )
        return self.hift(mel.to(self.hift.conv_pre.weight.dtype))[0]
