"""AuK's three stages: condition (thinker prefill + source-clip encoding), flow (one batched Euler step per step),
and decode (the VAE, in chunks, streamed).

The whole segment is one ODE, so no audio exists before the flow's last step; but the decoder streams: the first
chunk (small) leaves after one short decode instead of the whole waveform's.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import numpy as np
import torch

from vocalis.stages.api.reference import resample
from vocalis.stages.components.speech_features import whisper_log_mel
from vocalis.stages.models.auk.adapter import VAE_SAMPLE_SEED_OFFSET, AuKInput
from vocalis.stages.models.auk.config import THINKER_SAMPLE_RATE, AuKConfig
from vocalis.stages.models.auk.dit import AuKDiT, DiTBatch
from vocalis.stages.models.auk.encoder import ConditionEncoder, audio_token_count
from vocalis.stages.models.auk.prompt import PromptBuilder
from vocalis.stages.models.auk.vae import AuKVAE, padded_samples
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.request_table import RequestTable
from vocalis.stages.runtime.stage import StageItem


@dataclass
class Condition:
    """What the flow needs of one request."""

    text: torch.Tensor
    """[tokens, text_hidden] fused thinker states."""
    ref: torch.Tensor
    """[frames, latent] the source clip's normalised latents (0 frames without a clip)."""
    frames: int
    """Target latent frames."""


@dataclass(eq=False)
class _Waiting:
    request: SynthesisRequest


class ConditionStage(RequestTable[_Waiting]):
    """Stage 0: the prompts of up to max_num_seqs requests in one padded prefill; their clips through the VAE."""

    def __init__(self, name: str, config: AuKConfig, encoder: ConditionEncoder, vae: AuKVAE, prompts: PromptBuilder,
                 device: str = "cpu", max_num_seqs: int = 8) -> None:
        super().__init__()
        self.name, self.config, self.encoder, self.vae, self.prompts = name, config, encoder, vae, prompts
        self.device, self.max_num_seqs = device, max_num_seqs

    def add(self, item: StageItem) -> None:
        self._put(_Waiting(item.request))

    def has_work(self) -> bool:
        return bool(self._entries)

    def step(self) -> list[StageItem]:
        self.drop_closed()
        batch = list(self._entries.values())[: self.max_num_seqs]
        self._batch = [entry.request for entry in batch]
        if not batch:
            return []
        conditions = self.condition([entry.request.stage_input for entry in batch], [entry.request.text for entry in batch])
        outputs = []
        for entry, condition in zip(batch, conditions, strict=True):
            self.drop(entry.request)
            outputs.append(StageItem(entry.request, condition, finished=True))
        return outputs

    def condition(self, inputs: list[AuKInput], texts: list[str]) -> list[Condition]:
        ids, features, refs = [], [], []
        for stage_input, text in zip(inputs, texts, strict=True):
            ref = stage_input.reference
            if ref is None:
                ids.append(self.prompts.ids(stage_input.instruction_for(text), None))
                features.append(None)
                refs.append(torch.zeros(0, self.config.vae.latent_dim, device=self.device))
                continue
            heard = torch.from_numpy(resample(ref.samples, ref.sample_rate, THINKER_SAMPLE_RATE)).to(self.device)
            mel = whisper_log_mel(heard, self.config.audio.num_mel_bins, zero_padded=True)
            ids.append(self.prompts.ids(stage_input.instruction_for(text), audio_token_count(mel.shape[1])))
            features.append(mel)
            source = torch.from_numpy(resample(ref.samples, ref.sample_rate, self.config.sample_rate)).to(self.device)
            generator = None
            if stage_input.vae_sample:
                seed = stage_input.seed if stage_input.seed is not None else secrets.randbits(63)
                generator = torch.Generator(self.device).manual_seed((seed + VAE_SAMPLE_SEED_OFFSET) % 2**63)
            refs.append(self.vae.encode(padded_samples(source, self.vae.hop), generator))
        texts_ = self.encoder([torch.tensor(row, device=self.device) for row in ids], features, self.config.audio_token_id)
        return [
            Condition(text, ref, self.config.seconds_to_frames(i.duration_seconds) if i.duration_seconds is not None else max(1, ref.shape[0]))
            for i, text, ref in zip(inputs, texts_, refs, strict=True)
        ]


@dataclass(eq=False)
class FlowJob:
    request: SynthesisRequest
    text: torch.Tensor
    """[tokens, dim] projected condition."""
    ref: torch.Tensor
    grid: tuple[float, ...]
    cfg: float
    x: torch.Tensor
    """[frames, latent] the current point of the trajectory (starts as noise)."""
    step: int = 0

    @property
    def done(self) -> bool:
        return self.step >= len(self.grid) - 1


def initial_noise(frames: int, latent_dim: int, seed: int | None, device: str = "cpu") -> torch.Tensor:
    """The trajectory's start: float32 normal noise from the request's own generator (its seed, else a random one)."""
    generator = torch.Generator(device).manual_seed(int(seed) if seed is not None else secrets.randbits(63))
    return torch.randn(frames, latent_dim, generator=generator, device=device, dtype=torch.float32)


def _pad(tensors: list[torch.Tensor]) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(tensors, batch_first=True)


def flow_step(dit: AuKDiT, jobs: list[FlowJob]) -> None:
    """One Euler step of every job, batched: a conditional row per job, plus an unconditional row (no text, zeroed
    source latents) for each job that guides."""
    guided = [job for job in jobs if job.cfg > 1e-5]
    rows = jobs + guided
    device = jobs[0].x.device
    text = _pad([job.text for job in jobs] + [torch.zeros_like(job.text) for job in guided])
    ref = _pad([job.ref for job in jobs] + [torch.zeros_like(job.ref) for job in guided])
    lengths = {name: torch.tensor([getattr(job, name).shape[0] for job in rows], device=device) for name in ("x", "ref", "text")}
    batch = DiTBatch(
        x=_pad([job.x for job in rows]).to(dit.proj_out.weight.dtype), ref=ref.to(dit.proj_out.weight.dtype), text=text,
        time=torch.tensor([job.grid[job.step] for job in rows], device=device),
        x_len=lengths["x"], ref_len=lengths["ref"], text_len=lengths["text"],
    )
    velocity = dit(batch).float()
    for i, job in enumerate(jobs):
        v = velocity[i, : job.x.shape[0]]
        if job.cfg > 1e-5:
            u = velocity[len(jobs) + guided.index(job), : job.x.shape[0]]
            v = v + (v - u) * job.cfg
        job.x = job.x + (job.grid[job.step + 1] - job.grid[job.step]) * v
        job.step += 1


class FlowStage(RequestTable[FlowJob]):
    """Stage 1: every running request's trajectory advanced by one batched Euler step per step."""

    def __init__(self, name: str, dit: AuKDiT, max_num_seqs: int = 8, device: str = "cpu") -> None:
        super().__init__()
        self.name, self.dit, self.max_num_seqs, self.device = name, dit, max_num_seqs, device
        self.steps = 0

    def add(self, item: StageItem) -> None:
        condition: Condition = item.payload
        stage_input: AuKInput = item.request.stage_input
        dtype = self.dit.proj_out.weight.dtype
        with torch.inference_mode():  # add() runs outside the worker's step
            text = self.dit.project_text(condition.text.to(self.device, dtype)[None])[0]
        x = initial_noise(condition.frames, self.dit.latent_dim, stage_input.seed, self.device)
        self._put(FlowJob(item.request, text, condition.ref.to(self.device), stage_input.schedule.grid, stage_input.schedule.cfg, x))

    def has_work(self) -> bool:
        return bool(self._entries)

    def step(self) -> list[StageItem]:
        self.drop_closed()
        jobs = list(self._entries.values())[: self.max_num_seqs]
        self._batch = [job.request for job in jobs]
        if not jobs:
            return []
        flow_step(self.dit, jobs)
        self.steps += 1
        outputs = []
        for job in jobs:
            if job.done:
                if not torch.isfinite(job.x).all():
                    raise FloatingPointError("AuK's flow produced a latent with NaN or infinity")
                job.request.output_tokens = job.x.shape[0]
                outputs.append(StageItem(job.request, job.x, finished=True))
                self.drop(job.request)
        return outputs


@dataclass(eq=False)
class _Decoding:
    request: SynthesisRequest
    latents: torch.Tensor
    """[1, frames, latent]"""
    next_frame: int = 0
    chunks: int = field(default=0)


class DecodeStage(RequestTable[_Decoding]):
    """Stage 2: each finished latent decoded chunk by chunk (a small first chunk, then `chunk_frames`), each chunk
    with `left_context_frames` of context and the decoder's lookahead, so the samples equal a whole decode's."""

    def __init__(self, name: str, vae: AuKVAE, first_chunk_frames: int, chunk_frames: int, left_context_frames: int,
                 max_num_seqs: int = 8, device: str = "cpu") -> None:
        super().__init__()
        self.name, self.vae, self.device, self.max_num_seqs = name, vae, device, max_num_seqs
        self.first_chunk_frames, self.chunk_frames, self.context = first_chunk_frames, chunk_frames, left_context_frames

    def add(self, item: StageItem) -> None:
        if item.payload is None:
            raise ValueError(f"stage {self.name} takes latents only")
        self._put(_Decoding(item.request, item.payload.to(self.device)[None]))

    def has_work(self) -> bool:
        return bool(self._entries)

    def step(self) -> list[StageItem]:
        self.drop_closed()
        work = list(self._entries.values())[: self.max_num_seqs]
        self._batch = [entry.request for entry in work]
        outputs = []
        for entry in work:
            size = self.first_chunk_frames if entry.chunks == 0 else self.chunk_frames
            start, end = entry.next_frame, min(entry.latents.shape[1], entry.next_frame + size)
            audio = self.vae.decode_chunk(entry.latents, start, end, self.context)[0]
            entry.next_frame, entry.chunks = end, entry.chunks + 1
            done = end >= entry.latents.shape[1]
            outputs.append(StageItem(entry.request, np.ascontiguousarray(audio.float().cpu().numpy()), finished=done))
            if done:
                self.drop(entry.request)
        return outputs
