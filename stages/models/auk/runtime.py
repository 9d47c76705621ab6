"""The models of AuK's three stages: condition (thinker prefill + source-clip encoding) and flow (one batched Euler
step per step) on IterativeStages, decode (the VAE, in chunks, streamed) on a ChunkStage.

The whole segment is one ODE, so no audio exists before the flow's last step; but the decoder streams: the first
chunk (small) leaves after one short decode instead of the whole waveform's.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace

import torch

from vocalis.stages.api.reference import resample
from vocalis.stages.components.speech_features import whisper_log_mel
from vocalis.stages.models.auk.adapter import VAE_SAMPLE_SEED_OFFSET, AuKInput
from vocalis.stages.models.auk.config import THINKER_SAMPLE_RATE, AuKConfig
from vocalis.stages.models.auk.dit import AuKDiT, DiTBatch
from vocalis.stages.models.auk.encoder import ConditionEncoder, audio_token_count
from vocalis.stages.models.auk.prompt import PromptBuilder
from vocalis.stages.models.auk.vae import AuKVAE, padded_samples
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, DecodeStream
from vocalis.stages.runtime.chunking import ChunkPolicy
from vocalis.stages.runtime.iterative import IterativeModel
from vocalis.stages.runtime.request import SynthesisRequest


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
class ConditionJob:
    request: SynthesisRequest
    done: bool = False


class Conditioner(IterativeModel):
    """Stage 0's model: the prompts of a step's requests in one padded prefill, their clips through the VAE; a job is
    done after its one step."""

    def __init__(self, config: AuKConfig, encoder: ConditionEncoder, vae: AuKVAE, prompts: PromptBuilder,
                 device: str = "cpu") -> None:
        self.config, self.encoder, self.vae, self.prompts, self.device = config, encoder, vae, prompts, device

    def start(self, request: SynthesisRequest, payload: None) -> ConditionJob:
        return ConditionJob(request)

    def step(self, jobs: list[ConditionJob]) -> list[list[Condition]]:
        conditions = self.condition([job.request.stage_input for job in jobs], [job.request.text for job in jobs])
        for job in jobs:
            job.done = True
        return [[condition] for condition in conditions]

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


class Flow(IterativeModel):
    """Stage 1's model: a request's condition starts its trajectory; every step advances each running one by one
    batched Euler step, and a finished trajectory's latents [frames, latent] go on."""

    def __init__(self, dit: AuKDiT, device: str = "cpu") -> None:
        self.dit, self.device = dit, device

    def start(self, request: SynthesisRequest[AuKInput], condition: Condition) -> FlowJob:
        stage_input = request.stage_input
        dtype = self.dit.proj_out.weight.dtype
        text = self.dit.project_text(condition.text.to(self.device, dtype)[None])[0]
        x = initial_noise(condition.frames, self.dit.latent_dim, stage_input.seed, self.device)
        return FlowJob(request, text, condition.ref.to(self.device), stage_input.schedule.grid, stage_input.schedule.cfg, x)

    def step(self, jobs: list[FlowJob]) -> list[list[torch.Tensor]]:
        flow_step(self.dit, jobs)
        outputs: list[list[torch.Tensor]] = []
        for job in jobs:
            if not job.done:
                outputs.append([])
                continue
            if not torch.isfinite(job.x).all():
                raise FloatingPointError("AuK's flow produced a latent with NaN or infinity")
            job.request.output_tokens = job.x.shape[0]
            outputs.append([job.x])
        return outputs


class LatentDecoder(ChunkDecoder):
    """Stage 2's model: the VAE on a window of latents [B, frames, latent]. Not causal (its first convolution looks
    ahead), so only equally long windows share a call; the chunks join exactly given `left_context_frames` of context
    and the VAE's lookahead (`policy`)."""

    causal = False

    def __init__(self, vae: AuKVAE, device: str = "cpu") -> None:
        self.vae, self.device = vae, device
        self.samples_per_frame = vae.hop

    def policy(self, deployed: ChunkPolicy) -> ChunkPolicy:
        """The deployed chunking with the VAE's own lookahead."""
        return replace(deployed, lookahead_frames=self.vae.lookahead_frames)

    def start(self, request: SynthesisRequest) -> DecodeStream:
        return DecodeStream()

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        return self.vae.decode(frames.to(self.device))
