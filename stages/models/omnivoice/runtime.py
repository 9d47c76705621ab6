"""OmniVoice on the stage runtime: a generator stage (masked decoding) and a decoder stage (codes to audio), both
IterativeStages.

Stage 0, `generator`, is an IterativeStage: a request's text becomes one unit, or several
when its speech would be longer than audio_chunk_threshold (cut at sentences and clauses), and
each step runs one unmasking pass for every running request's current unit in one batch.
A finished unit's codes go to stage 1 at once, so a long text streams unit by unit. In auto
voice mode the first unit's codes and text become the reference of the following units, so
that the voice stays the same; a cloned voice is the reference of every unit.

Stage 1, `decoder`, turns each unit's codes into a waveform with the audio tokenizer, trims its
long pauses and edge silences, levels and fades it, and puts silence before the first unit,
between units and after the last. The reference does the same to the whole text at once. A
complete file (a request that is not streamed) gets its loudness levelled once, over all of its
units joined, as the reference does; a stream levels each unit as it leaves, so later units of a
long text may be a few per cent louder or quieter than with the reference.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np
import torch

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.reference import ReferenceCache, content_key
from vocalis.stages.components.higgs_audio_v2_tokenizer.model import AudioTokenizer
from vocalis.stages.components.higgs_audio_v2_tokenizer.resample import resample
from vocalis.stages.models.omnivoice.backbone import OmniVoiceLM, packed_rows
from vocalis.stages.models.omnivoice.config import GenerationConfig
from vocalis.stages.models.omnivoice.duration import estimate_frames
from vocalis.stages.models.omnivoice.masked_decoding import NoiseSource, SeededNoise, UnitDecoding, unmask_schedule
from vocalis.stages.models.omnivoice.postprocess import fade, level, remove_silence
from vocalis.stages.models.omnivoice.text import TextTokenizer, add_punctuation, build_prompt, normalize_instruction, split_units
from vocalis.stages.runtime.iterative import IterativeModel
from vocalis.stages.runtime.request import ReferenceAudio, SynthesisRequest
from vocalis.stages.runtime.stage import CacheStats

REFERENCE_CACHE = 64
"""Encoded reference clips kept (a session's units, and voices used again, share one encoding)."""


@dataclass(frozen=True)
class OmniVoiceInput:
    """Stage-0 input of a request, made by the adapter."""

    generation: GenerationConfig = field(default_factory=GenerationConfig)
    language: str | None = None
    """ISO code of the language, None to let the model tell."""
    instruction: str | None = None
    """Voice-design attributes (validated), None for none."""
    reference: ReferenceAudio | None = None
    """The voice to clone (its transcript required), None for auto voice or voice design."""
    speed: float = 1.0
    seed: int | None = None
    preprocess_reference: bool = True
    """Trim the reference clip's silences and end its transcript with punctuation, as the reference does."""
    level_whole: bool = False
    """Level the loudness of all units joined, once (a complete file), instead of unit by unit (a stream)."""


@dataclass(frozen=True)
class PreparedReference:
    codes: torch.Tensor
    """[C, T] codes of the clip."""
    text: str
    rms: float | None
    """The clip's loudness (None for a reference made of generated codes)."""


@dataclass
class UnitCodes:
    """One finished unit, from the generator to the decoder."""

    codes: torch.Tensor
    """[C, T] audio codes."""
    index: int
    count: int
    """Units in the request."""
    text: str
    ref_rms: float | None
    config: GenerationConfig
    level_whole: bool = False
    """Held by the decoder until the last unit, then levelled with the others (see OmniVoiceInput)."""

    @property
    def last(self) -> bool:
        return self.index == self.count - 1


@dataclass
class RequestJob:
    """A request on its way through the generator: its units and the one being decoded."""

    request: SynthesisRequest
    units: list[str]
    language: str | None
    instruction: str | None
    config: GenerationConfig
    speed: float
    noise: NoiseSource
    reference: PreparedReference | None
    current: UnitDecoding | None = None
    index: int = 0
    first_unit: PreparedReference | None = None
    """Auto voice on a long text: the first unit, reference of the others."""
    level_whole: bool = False

    @property
    def done(self) -> bool:
        return self.index >= len(self.units)


class OmniVoiceGenerator(IterativeModel):
    """The model of the generator stage (stage 0)."""

    def __init__(
        self, lm: OmniVoiceLM, codec: AudioTokenizer, tokenizer: TextTokenizer, device: str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        self.lm = lm
        self.codec = codec
        self.tokenizer = tokenizer
        self.device = device
        self.dtype = dtype
        self.config = lm.config
        self.frame_rate = codec.config.frame_rate
        self.sample_rate = codec.config.sample_rate
        self.references: ReferenceCache[PreparedReference] = ReferenceCache(REFERENCE_CACHE)
        self.noise_for: dict[str, NoiseSource] = {}
        """Noise to use for a request id instead of its seeded draws (parity tests replay recorded draws)."""

    # -- the IterativeModel protocol ----------------------------------------------------------

    def caches(self) -> dict[str, CacheStats]:
        return self.references.caches()

    def start(self, request: SynthesisRequest[OmniVoiceInput], payload: None = None) -> RequestJob:
        params = request.stage_input
        reference = self.prepare_reference(params.reference, params.preprocess_reference) if params.reference else None
        text = request.text
        ref_text, ref_frames = (reference.text, reference.codes.shape[-1]) if reference else (None, None)
        total = estimate_frames(text, ref_text, ref_frames, params.speed)
        units = [text]
        config = params.generation
        if config.audio_chunk_duration > 0 and total > int(config.audio_chunk_threshold * self.frame_rate):
            max_chars = int(config.audio_chunk_duration * self.frame_rate / (total / len(text)))
            units = split_units(text, max_chars) or [text]
        instruction = normalize_instruction(params.instruction, text) if params.instruction else None
        noise = self.noise_for.pop(request.request_id, None) or SeededNoise(params.seed)
        job = RequestJob(request, units, params.language, instruction, config, params.speed, noise, reference,
                         level_whole=params.level_whole)
        job.current = self._unit(job)
        return job

    def step(self, jobs: list[RequestJob]) -> list[list[UnitCodes]]:
        units = [job.current for job in jobs]
        hidden = self._hidden([unit.rows() for unit in units])  # type: ignore[union-attr]
        out: list[list[UnitCodes]] = []
        for b, (job, unit) in enumerate(zip(jobs, units, strict=True)):
            assert unit is not None
            length = unit.ids.shape[1]  # the conditional prompt, then the unconditional one (the target alone)
            cond = self._logits(hidden[b, length - unit.frames : length])
            uncond = self._logits(hidden[b, length : length + unit.frames])
            unit.advance(cond, uncond)
            out.append(self._finish_unit(job) if unit.done else [])
        return out

    # -- units ------------------------------------------------------------------------------------

    def _unit(self, job: RequestJob) -> UnitDecoding:
        text = job.units[job.index]
        reference = job.reference or job.first_unit
        ref_text, ref_codes = (reference.text, reference.codes) if reference else (None, None)
        frames = estimate_frames(text, ref_text, ref_codes.shape[-1] if ref_codes is not None else None, job.speed)
        c = self.config
        prompt = build_prompt(
            self.tokenizer, c.num_audio_codebook, c.audio_mask_id, text, frames, job.language, job.instruction,
            ref_text, ref_codes, job.config.denoise,
        )
        schedule = unmask_schedule(frames, c.num_audio_codebook, job.config.num_step, job.config.t_shift)
        return UnitDecoding(
            prompt.ids, prompt.audio_mask, frames, schedule, job.config, job.noise, c.audio_mask_id
        )

    def _finish_unit(self, job: RequestJob) -> list[UnitCodes]:
        unit = job.current
        assert unit is not None
        codes = unit.tokens.clone()
        text = job.units[job.index]
        job.request.output_tokens += unit.frames
        rms = job.reference.rms if job.reference else None
        produced = UnitCodes(codes, job.index, len(job.units), text, rms, job.config, job.level_whole)
        if job.index == 0 and job.reference is None and len(job.units) > 1:
            job.first_unit = PreparedReference(codes, text, None)
        job.index += 1
        job.current = self._unit(job) if not job.done else None
        return [produced]

    # -- tensors ----------------------------------------------------------------------------------

    def _hidden(self, jobs: list[tuple[tuple[torch.Tensor, torch.Tensor], ...]]) -> torch.Tensor:
        """Hidden states [B, L, H]: row b holds job b's prompts (ids [C, l], audio mask [l]) packed one after
        another (backbone.packed_rows), right-padded to the longest row."""
        positions, segments = packed_rows([[ids.shape[1] for ids, _ in prompts] for prompts in jobs], self.device)
        codebooks = self.config.num_audio_codebook
        ids = torch.zeros((len(jobs), codebooks, positions.shape[1]), dtype=torch.long, device=self.device)
        audio_mask = torch.zeros(positions.shape, dtype=torch.bool, device=self.device)
        for b, prompts in enumerate(jobs):
            start = 0
            for prompt_ids, prompt_mask in prompts:
                ids[b, :, start : start + prompt_ids.shape[1]] = prompt_ids
                audio_mask[b, start : start + prompt_mask.shape[0]] = prompt_mask
                start += prompt_ids.shape[1]
        embeds = self.lm.embed(ids, audio_mask)
        return self.lm.llm(embeds.to(self.dtype), positions, segments)

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[C, T, V] logits of hidden states [T, H]."""
        c = self.config
        return self.lm.audio_heads(hidden).view(-1, c.num_audio_codebook, c.audio_vocab_size).permute(1, 0, 2).float().cpu()

    # -- references ----------------------------------------------------------------------------

    def prepare_reference(self, reference: ReferenceAudio, preprocess: bool = True) -> PreparedReference:
        """The clip's codes, transcript and loudness (cached by content)."""
        samples = np.asarray(reference.samples, dtype=np.float32).reshape(-1)
        key = content_key(samples, reference.sample_rate, reference.text, preprocess)
        return self.references.get_or_make(
            key, lambda: self._encode_reference(samples, reference.sample_rate, reference.text or "", preprocess)
        )

    def _encode_reference(self, samples: np.ndarray, rate: int, text: str, preprocess: bool) -> PreparedReference:
        wav = samples
        if rate != self.sample_rate:
            wav = resample(torch.from_numpy(wav)[None], rate, self.sample_rate)[0].numpy()
        rms = float(np.sqrt(np.mean(wav**2))) if wav.size else 0.0
        if 0 < rms < 0.1:
            wav = wav * 0.1 / rms
        if preprocess:
            wav = remove_silence(wav, self.sample_rate, mid_ms=200, lead_ms=100, trail_ms=200)
        hop = self.codec.config.hop_length
        wav = wav[: len(wav) - len(wav) % hop]
        if len(wav) == 0:
            raise InvalidField("ref_audio", "REFERENCE_SILENT", "the reference clip is silent (or shorter than one frame) once its silences are trimmed")
        weight = next(self.codec.parameters())  # the codec lives where the decoder stage runs
        codes = self.codec.encode(torch.from_numpy(np.ascontiguousarray(wav)).to(weight.device, weight.dtype)[None])[0].cpu()
        return PreparedReference(codes, add_punctuation(text) if preprocess else text, rms)


@dataclass(eq=False)
class UnitsJob:
    """The units of one request on their way through the decoder."""

    request: SynthesisRequest
    pending: deque[UnitCodes] = field(default_factory=deque)
    done: bool = False
    """The request's last unit has been decoded."""
    held: list[np.ndarray] = field(default_factory=list)
    """Audio of the units so far, not yet levelled (level_whole)."""
    held_peak: float = 0.0
    """The peak of the held units before their fades: what the reference levels the joined audio by."""


class UnitDecoder(IterativeModel):
    """Stage 1's model: each step decodes one waiting unit of every request that has one, units of several requests
    together when equally long; a unit's audio leaves at once (or, levelling the whole, with the last)."""

    def __init__(self, codec: AudioTokenizer, device: str = "cpu", dtype: torch.dtype = torch.float32) -> None:
        self.codec = codec
        self.device = device
        self.dtype = dtype
        self.sample_rate = codec.config.sample_rate
        self.decode_calls = 0

    def start(self, request: SynthesisRequest, unit: UnitCodes) -> UnitsJob:
        if unit is None:
            raise ValueError("OmniVoice's decoder takes units of codes")
        job = UnitsJob(request)
        self.feed(job, unit)
        return job

    def feed(self, job: UnitsJob, unit: UnitCodes) -> None:
        job.pending.append(unit)

    def ready(self, job: UnitsJob) -> bool:
        return bool(job.pending)

    def step(self, jobs: list[UnitsJob]) -> list[list[np.ndarray]]:
        out: dict[int, list[np.ndarray]] = {id(job): [] for job in jobs}
        groups: dict[int, list[tuple[UnitsJob, UnitCodes]]] = {}
        for job in jobs:
            unit = job.pending.popleft()
            groups.setdefault(unit.codes.shape[-1], []).append((job, unit))
        for group in groups.values():
            codes = torch.stack([unit.codes for _, unit in group]).to(self.device)
            audio = self.codec.decode(codes).float().cpu().numpy()
            self.decode_calls += 1
            for row, (job, unit) in enumerate(group):
                samples, peak = self.finish(audio[row], unit)
                job.done = unit.last
                if unit.level_whole:
                    job.held.append(samples)
                    job.held_peak = max(job.held_peak, peak)
                    if not unit.last:
                        continue
                    samples = np.concatenate(job.held) * whole_gain(job.held_peak, unit.ref_rms)
                    job.held.clear()
                out[id(job)].append(samples)
        return [out[id(job)] for job in jobs]

    def finish(self, audio: np.ndarray, unit: UnitCodes) -> np.ndarray:
        """A unit's decoded audio as it is heard: levelled (unless its request levels the whole), faded,
        with its share of the silences around units; and its peak before levelling and fading."""
        config = unit.config
        pad = np.zeros(int(config.pad_duration * self.sample_rate), dtype=np.float32)
        audio = np.asarray(audio, dtype=np.float32)
        if config.postprocess_output:
            audio = remove_silence(audio, self.sample_rate, mid_ms=500, lead_ms=100, trail_ms=100)
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        if not unit.level_whole:
            audio = level(audio, unit.ref_rms)
        audio = fade(audio, int(config.fade_duration * self.sample_rate))
        parts = [pad, audio]
        if unit.last:
            parts.append(pad)
        return np.concatenate(parts).astype(np.float32), peak


def whole_gain(peak: float, ref_rms: float | None) -> float:
    """The gain `level` gives audio whose peak is `peak` (fades and pads, applied before it, are unchanged by it)."""
    return float(level(np.array([peak], dtype=np.float32), ref_rms)[0] / peak) if peak > 1e-6 else 1.0
