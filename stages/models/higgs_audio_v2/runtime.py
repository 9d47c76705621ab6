"""The two stages: the talker (continuously batched, one delayed frame of every codebook per step) and the codec
decoder (the shared Higgs Audio v2 tokenizer, in chunks with left context).

Stage 0's input rows carry one extra column after the hidden width: 1.0 at audio positions, where the DualFFN layers
use their audio expert. Every row of the prompt and every generated frame is built with it (the runtime only
concatenates rows), and `forward` splits it off. The runtime's steps route each row from its sequence's
`AudioPositions` on the host instead (the same rows, with no read of the device); the column routes direct callers.

Stage 1 receives the delayed rows as the talker emits them (the all-BOS frame that opens the stream is prompt, and
the all-EOS frame that closes it is not audio). Frame j's codebook k is row j + k's, so decoding a chunk of frames
needs K - 1 rows past it: the deploy file's `lookahead_frames` is K - 1 plus any right context the codec wants.
The decoder undoes the delay over each window it is given and returns the samples of the frames the window holds
whole; at the end of a stream the last K - 1 rows complete no frame, and the chunk comes out that much shorter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.reference import ReferenceCache, content_key
from vocalis.stages.components.higgs_audio_v2_tokenizer.model import AudioTokenizer
from vocalis.stages.components.higgs_audio_v2_tokenizer.resample import resample
from vocalis.stages.models.higgs_audio_v2.delay import DelayState, DelayStep
from vocalis.stages.models.higgs_audio_v2.prompt import SPEAKER_TAG, AudioPositions, Prompt, build_prompt, undo_delay
from vocalis.stages.models.higgs_audio_v2.talker import HiggsAudioV2Talker, route_of, route_of_flags
from vocalis.stages.models.higgs_audio_v2.tokenizer import TextTokenizer
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, SequenceStart
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.runtime.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.runtime.request import ReferenceAudio, SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams, sample_states
from vocalis.stages.runtime.stage import CacheStats

REFERENCE_CACHE = 64


@dataclass(frozen=True)
class HiggsInput:
    """What the adapter makes of a request for stage 0."""

    sampling: SamplingParams
    """Its max_new_tokens is the frame budget after the opening BOS frame."""
    reference: ReferenceAudio | None = None
    ras_window: int = 7
    ras_max_repeat: int = 2
    initial_codec_chunk_frames: int | None = None


class HiggsTalkerModel(AutoregressiveModel):
    emits_eos_frame = False
    forward_takes_states = True
    """Each row's expert is routed from its sequence's `AudioPositions` on the host, not read back from the device."""

    def __init__(self, talker: HiggsAudioV2Talker, tokenizer: TextTokenizer, codec: AudioTokenizer, max_len: int,
                 device: str = "cpu", dtype: torch.dtype = torch.float32) -> None:
        self.talker = talker
        self.tokenizer = tokenizer
        self.codec = codec
        self.device = torch.device(device)
        self.dtype = dtype
        c = talker.config
        self.config = c
        self.cache_shape = CacheShape(c.num_hidden_layers, c.num_key_value_heads, c.head_dim, max_len)
        self.bos_frame = torch.full((c.num_codebooks,), c.audio_stream_bos_id, dtype=torch.long, device=self.device)
        self.references: ReferenceCache[torch.Tensor] = ReferenceCache(REFERENCE_CACHE)

    # -- prompt ---------------------------------------------------------------------------

    def reference_codes(self, reference: ReferenceAudio) -> torch.Tensor:
        """Codes [T, K] of a clip (cached by content)."""
        samples = np.asarray(reference.samples, dtype=np.float32).reshape(-1)
        key = content_key(samples, reference.sample_rate)
        field = "voice" if reference.name else "ref_audio"
        return self.references.get_or_make(key, lambda: self._encode(samples, reference.sample_rate, field))

    def _encode(self, samples: np.ndarray, rate: int, field: str) -> torch.Tensor:
        weight = next(self.codec.parameters())
        wav = torch.from_numpy(np.ascontiguousarray(samples)).to(weight.device, torch.float32)
        target = self.codec.config.sample_rate
        if rate != target:
            wav = resample(wav[None], rate, target)[0]
        if wav.numel() < self.codec.config.hop_length:
            raise InvalidField(field, "REFERENCE_TOO_SHORT", f"the reference clip is shorter than one codec frame "
                               f"({self.codec.config.hop_length / target * 1000:.0f} ms): give a longer clip")
        codes = self.codec.encode(wav[None].to(weight.dtype))[0]
        return codes[: self.config.num_codebooks].T.to(self.device)

    def prompt(self, text: str, stage_input: HiggsInput) -> Prompt:
        reference = None
        if stage_input.reference is not None:
            reference = (stage_input.reference.text or "", self.reference_codes(stage_input.reference))
        c = self.config
        return build_prompt(self.tokenizer, text, reference, c.audio_stream_bos_id, c.audio_stream_eos_id)

    def text_rows(self, ids: list[int] | tuple[int, ...]) -> torch.Tensor:
        embeds = self.talker.model.embed_tokens(torch.tensor(list(ids), dtype=torch.long, device=self.device))
        return flagged(embeds, audio=False)

    def audio_rows(self, frames: torch.Tensor) -> torch.Tensor:
        return flagged(self.talker.model.embed_audio_tokens(frames), audio=True)

    def prompt_rows(self, prompt: Prompt) -> torch.Tensor:
        """[P, H + 1] rows of the prompt and the opening all-BOS frame."""
        parts = [self.text_rows(prompt.before)]
        if prompt.audio is not None:
            parts += [self.audio_rows(prompt.audio.to(self.device)), self.text_rows(prompt.after)]
        parts.append(self.audio_rows(self.bos_frame[None]))
        return torch.cat(parts).to(self.dtype)

    # -- the AutoregressiveModel protocol --------------------------------------------------

    def caches(self) -> dict[str, CacheStats]:
        return self.references.caches()

    def start(self, request: SynthesisRequest[HiggsInput], payload: object = None) -> SequenceStart:
        stage_input = request.stage_input
        if SPEAKER_TAG.search(request.text):
            raise InvalidField("input", "FIELD_NOT_SUPPORTED",
                               "higgs-audio v2 does not take multi-speaker [SPEAKERn] tags: remove them from the input")
        prompt = self.prompt(request.text, stage_input)
        c = self.config
        state = DelayState(c.num_codebooks, c.audio_stream_bos_id, c.audio_stream_eos_id, self.device,
                           ras_window=stage_input.ras_window, ras_max_repeat=stage_input.ras_max_repeat,
                           audio=AudioPositions.of(prompt))
        if prompt.audio is not None:
            state.push(prompt.audio.to(self.device))
        state.push(self.bos_frame[None])
        return SequenceStart(self.prompt_rows(prompt), stage_input.sampling, state)

    def first_chunk_frames(self, request: SynthesisRequest[HiggsInput]) -> int | None:
        return request.stage_input.initial_codec_chunk_frames

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache,
                states: list[DelayState] | None = None) -> torch.Tensor:
        """Hidden states of the step's rows. The runtime passes `states` (in batch order), whose audio positions route
        the rows with no read of the device; a direct caller without them is routed by the rows' audio column."""
        if states is None:
            route = route_of(embeds[:, -1] > 0.5)
        else:
            flags = [f for state, start, count in zip(states, batch.start_positions, batch.query_lens, strict=True)
                     for f in state.audio.flags(start, count)]
            route = route_of_flags(flags, embeds.device)
        return self.talker(embeds[:, :-1], route, batch, cache)

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[DelayState]) -> torch.Tensor:
        """Frames [B, K] on the host (the one crossing of a step): the delay pattern, the draws and RAS run on the
        model's device, batched."""
        raw = self.talker.logits(hidden).float()
        step = DelayStep(states)
        frames = step.resample_repeats(raw, sample_states(step.mask(raw), samplers), samplers)
        step.advance(frames)
        return frames.cpu()

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return (frames == self.config.audio_stream_eos_id).all(dim=-1)

    def frame_embeds(self, frames: torch.Tensor, states: list[DelayState]) -> torch.Tensor:
        return self.audio_rows(frames.to(self.device)).to(self.dtype)


def flagged(embeds: torch.Tensor, audio: bool) -> torch.Tensor:
    """embeds [N, H] with the audio-position column appended."""
    return torch.cat([embeds, embeds.new_full((embeds.shape[0], 1), 1.0 if audio else 0.0)], dim=-1)


class HiggsCodecDecoder(ChunkDecoder):
    """Delayed rows [B, R, K] to the waveform of the R - K + 1 frames they hold whole."""

    causal = False

    def __init__(self, codec: AudioTokenizer, num_codes: int, device: str = "cpu", dtype: torch.dtype = torch.float32) -> None:
        self.codec = codec
        self.num_codes = num_codes
        self.samples_per_frame = codec.samples_per_frame
        self.device = torch.device(device)
        self.dtype = dtype

    def start(self, request: SynthesisRequest[HiggsInput]) -> DecodeStream:
        return DecodeStream(first_chunk_frames=request.stage_input.initial_codec_chunk_frames)

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        codes = undo_delay(frames.to(self.device)).clamp(0, self.num_codes - 1)
        if codes.shape[1] == 0:
            return torch.zeros(frames.shape[0], 0)
        return self.codec.decode(codes.transpose(1, 2))
