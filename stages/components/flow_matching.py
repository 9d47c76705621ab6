"""Speech tokens to mel by conditional flow matching: CosyVoice3's `CausalMaskedDiffWithDiT` (`flow.pt`) and its
incremental stream (`FlowStream`), plus the guided Euler solver (`guided_euler`) and fixed start noise that GLM-TTS's
flow (`glm_dit.GLMFlow`) shares.

Tokens (the prompt's, then the generated ones) are embedded, passed through a pre-lookahead convolution (each token
sees `pre_lookahead_len` later ones), repeated `token_mel_ratio` times, and a DiT integrates the ODE from fixed noise
to mel with Euler steps on a cosine time schedule and classifier-free guidance, conditioned on the speaker embedding
and the prompt's mel. The start noise is a fixed buffer indexed by absolute mel position (as the published causal
decoder does), so a frame's mel does not depend on how the utterance was chunked.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.components.flow_dit import DiT, DiTPast

NOISE_FRAMES = 50 * 300
"""Frames of the fixed start noise (300 s at 50 Hz), drawn from a generator seeded 0 as the published decoder's."""


class PreLookaheadLayer(nn.Module):
    """`conv1` (kernel lookahead + 1, reading ahead) then `conv2` (kernel 3, causal), residual."""

    def __init__(self, in_channels: int, channels: int, pre_lookahead_len: int = 1) -> None:
        super().__init__()
        self.pre_lookahead_len = pre_lookahead_len
        self.conv1 = nn.Conv1d(in_channels, channels, pre_lookahead_len + 1)
        self.conv2 = nn.Conv1d(channels, in_channels, 3)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """[B, T, C] -> [B, T, C]; positions past the end read zeros (the published `finalize` path)."""
        x = F.pad(inputs.transpose(1, 2), (0, self.pre_lookahead_len))
        x = F.leaky_relu(self.conv1(x))
        x = self.conv2(F.pad(x, (self.conv2.kernel_size[0] - 1, 0)))
        return x.transpose(1, 2) + inputs


def cosine_time_span(steps: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[steps + 1] times from 0 to 1, denser near 0: 1 - cos(pi/2 * linspace(0, 1))."""
    span = torch.linspace(0, 1, steps + 1, device=device, dtype=dtype)
    return 1 - torch.cos(span * 0.5 * math.pi)


class CausalConditionalCFM(nn.Module):
    """`estimator` (the DiT) and the Euler solver with classifier-free guidance."""

    def __init__(self, estimator: DiT, inference_cfg_rate: float = 0.7, t_scheduler: str = "cosine", mel_dim: int = 80) -> None:
        super().__init__()
        self.estimator = estimator
        self.inference_cfg_rate = inference_cfg_rate
        self.t_scheduler = t_scheduler
        self.register_buffer("rand_noise", fixed_noise(mel_dim), persistent=False)

    def time_span(self, steps: int, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        if self.t_scheduler == "cosine":
            return cosine_time_span(steps, device, dtype)
        return torch.linspace(0, 1, steps + 1, device=device, dtype=dtype)

    def forward(self, mu: torch.Tensor, spks: torch.Tensor, cond: torch.Tensor, n_timesteps: int = 10,
                noise: torch.Tensor | None = None) -> torch.Tensor:
        """mu, cond [1, D, L], spks [1, D] -> mel [1, D, L]. `noise` [1, D, L] replaces the fixed buffer (tests)."""
        length = mu.shape[2]
        if noise is None:
            if length > self.rand_noise.shape[2]:
                raise ValueError(f"{length} mel frames exceed the flow decoder's {self.rand_noise.shape[2]} frames of start noise")
            noise = self.rand_noise[:, :, :length]
        x = noise.to(mu.device, mu.dtype)
        return self.solve_euler(x, self.time_span(n_timesteps, mu.device, mu.dtype), mu, spks, cond)

    def solve_euler(self, x: torch.Tensor, t_span: torch.Tensor, mu: torch.Tensor, spks: torch.Tensor, cond: torch.Tensor,
                    pasts: list[DiTPast] | None = None, hold: int = 0) -> torch.Tensor:
        """`pasts` (one per step): x continues after the frames they hold (`DiT.forward_after`); each then holds
        the first `hold` frames of x as well."""
        # Row 0 is conditioned; row 1 has mu, speaker and prompt zeroed (the guidance's unconditional branch). The DiT
        # may run in another dtype than the rest (the flow stage's): x and t stay in theirs, the Euler sums promote.
        dtype = self.estimator.proj_out.weight.dtype
        mu_in = torch.cat([mu, torch.zeros_like(mu)]).to(dtype)
        spks_in = torch.cat([spks, torch.zeros_like(spks)]).to(dtype)
        cond_in = torch.cat([cond, torch.zeros_like(cond)]).to(dtype)

        def velocity(x2: torch.Tensor, t2: torch.Tensor, step: int) -> torch.Tensor:
            if pasts is None:
                return self.estimator(x2.to(dtype), mu_in, t2, spks_in, cond_in)
            result, frames = self.estimator.forward_after(pasts[step], x2.to(dtype), mu_in, t2, spks_in, cond_in)
            pasts[step].append(frames, hold)
            return result

        return guided_euler(velocity, x, t_span, self.inference_cfg_rate)


def guided_euler(velocity: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor], x: torch.Tensor, t_span: torch.Tensor,
                 cfg_rate: float) -> torch.Tensor:
    """Euler steps over `t_span` with classifier-free guidance: `velocity(x2, t2, step)` takes x twice along the batch
    (row block 0 conditioned, block 1 unconditioned, whatever each family drops), t for both, and the step's index
    from 0 (what an incremental estimator keys its held frames by); returns x at t_span[-1], at least float32."""
    t, dt = t_span[0], t_span[1] - t_span[0]
    for step in range(1, len(t_span)):
        conditioned, unconditioned = velocity(torch.cat([x, x]), t.expand(2 * x.shape[0]), step - 1).chunk(2)
        x = x + dt * ((1.0 + cfg_rate) * conditioned - cfg_rate * unconditioned)
        t = t + dt
        if step < len(t_span) - 1:
            dt = t_span[step + 1] - t
    return x.to(torch.promote_types(x.dtype, torch.float32))


def fixed_noise(mel_dim: int, frames: int = NOISE_FRAMES) -> torch.Tensor:
    """[1, mel_dim, frames] start noise drawn from a generator seeded 0, indexed by absolute mel position."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    return torch.randn([1, mel_dim, frames], generator=generator)


class CausalMaskedDiffWithDiT(nn.Module):
    """`input_embedding`, `spk_embed_affine_layer`, `pre_lookahead_layer`, `decoder.estimator.*`."""

    def __init__(self, *, vocab_size: int, input_size: int, output_size: int, spk_embed_dim: int, token_mel_ratio: int,
                 pre_lookahead_layer: PreLookaheadLayer, decoder: CausalConditionalCFM) -> None:
        super().__init__()
        self.output_size = output_size
        self.token_mel_ratio = token_mel_ratio
        self.input_embedding = nn.Embedding(vocab_size, input_size)
        self.spk_embed_affine_layer = nn.Linear(spk_embed_dim, output_size)
        self.pre_lookahead_layer = pre_lookahead_layer
        self.decoder = decoder

    @property
    def estimator(self) -> DiT:
        """The DiT, the flow's compute (what runs in the flow stage's dtype)."""
        return self.decoder.estimator

    def mu(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens [1, T] -> the decoder's token features [1, D, T * token_mel_ratio]."""
        h = self.pre_lookahead_layer(self.input_embedding(tokens.clamp(min=0)))
        return h.repeat_interleave(self.token_mel_ratio, dim=1).transpose(1, 2)

    def inference(self, tokens: torch.Tensor, prompt_tokens: torch.Tensor, prompt_feat: torch.Tensor, embedding: torch.Tensor,
                  n_timesteps: int = 10, noise: torch.Tensor | None = None) -> torch.Tensor:
        """Mel [1, D, T * ratio] of `tokens` [1, T], after the prompt's tokens [1, P] whose mel is `prompt_feat`
        [1, P * ratio, D], in the voice of speaker `embedding` [1, E]."""
        spks = self.spk_embed_affine_layer(F.normalize(embedding, dim=1))
        mu = self.mu(torch.cat([prompt_tokens, tokens], dim=1))
        prompt_frames = prompt_feat.shape[1]
        cond = torch.zeros_like(mu)
        cond[:, :, :prompt_frames] = prompt_feat.transpose(1, 2).to(mu.dtype)
        mel = self.decoder(mu, spks, cond, n_timesteps, noise)
        return mel[:, :, prompt_frames:]


class FlowStream:
    """One utterance's mel computed piece by piece, equal to `CausalMaskedDiffWithDiT.inference` over the whole.

    Each call gets the utterance's tokens so far and computes the mel frames after the ones it holds. Frames whose
    attention chunk is complete and whose token features are final (`pre_lookahead_len` later tokens known) are held:
    every block's keys and values at every ODE step, so that later frames attend to them without recomputing them.
    Cost per call: the new frames, plus attention over the held ones; memory: steps x depth x 2 x 2 x dim floats
    per held frame.
    """

    def __init__(self, flow: CausalMaskedDiffWithDiT, prompt_tokens: torch.Tensor, prompt_feat: torch.Tensor,
                 embedding: torch.Tensor, n_timesteps: int = 10) -> None:
        self.flow = flow
        device = flow.input_embedding.weight.device
        self.prompt_tokens = prompt_tokens.to(device).long()
        self.prompt_feat = prompt_feat.to(device)
        self.prompt_frames = prompt_feat.shape[0]
        self.spks = flow.spk_embed_affine_layer(F.normalize(embedding.to(device, flow.spk_embed_affine_layer.weight.dtype)[None], dim=1))
        self.n_timesteps = n_timesteps
        estimator = flow.decoder.estimator
        kernel = estimator.input_embed.conv_pos_embed.kernel_size
        self.pasts = [DiTPast(kernel) for _ in range(n_timesteps)]
        chunk = estimator.static_chunk_size
        self.align = math.lcm(chunk, flow.token_mel_ratio) if chunk > 0 else 0
        self.held = 0
        """Frames (prompt's included) held: their mel is final and later calls start after them."""

    def advance(self, tokens: torch.Tensor) -> tuple[int, torch.Tensor]:
        """Given all the utterance's tokens so far [T] (past the prompt), the mel [1, D, F - first] of frames
        [first, F) where first is the frames held before this call and F = (prompt tokens + T) * ratio; frames past
        the last `pre_lookahead_len` tokens read zeros for the tokens not yet there, as a whole decode's end does."""
        every = torch.cat([self.prompt_tokens, tokens.to(self.prompt_tokens.device).long()])
        return self._advance(every, len(every) * self.flow.token_mel_ratio)

    def prime(self) -> None:
        """Compute and hold the prompt's frames that no later token changes (whole attention chunks, their token
        features final): what every utterance in this voice computes first, whatever its text. A stream `fork`ed
        after this starts its first `advance` after them; the frames computed are the same as without it."""
        look = self.flow.pre_lookahead_layer.pre_lookahead_len
        final = max(0, len(self.prompt_tokens) - look) * self.flow.token_mel_ratio
        until = final // self.align * self.align if self.align else 0
        if until > self.held:
            self._advance(self.prompt_tokens, until)

    def fork(self) -> FlowStream:
        """A stream of another utterance in the same voice, holding copies of the frames this one holds."""
        forked = copy.copy(self)
        forked.pasts = [past.copy() for past in self.pasts]
        return forked

    @property
    def nbytes(self) -> int:
        """Bytes of the held keys and values."""
        return sum(past.nbytes for past in self.pasts)

    def _advance(self, every: torch.Tensor, frames: int) -> tuple[int, torch.Tensor]:
        """The mel of frames [held, frames) (a whole number of tokens) of the tokens `every` (the prompt's first),
        holding what is final."""
        flow, ratio = self.flow, self.flow.token_mel_ratio
        first = self.held
        begin = first // ratio
        back = flow.pre_lookahead_layer.conv2.kernel_size[0] - 1  # the causal conv's tokens before
        low = max(0, begin - back)
        features = flow.pre_lookahead_layer(flow.input_embedding(every[low:].clamp(min=0))[None])[:, begin - low : frames // ratio - low]
        mu = features.repeat_interleave(ratio, dim=1).transpose(1, 2)
        cond = torch.zeros_like(mu)
        prompt = self.prompt_feat[first : min(self.prompt_frames, frames)]
        cond[0, :, : len(prompt)] = prompt.transpose(0, 1).to(mu.dtype)
        decoder = flow.decoder
        if frames > decoder.rand_noise.shape[2]:
            raise ValueError(f"{frames} mel frames exceed the flow decoder's {decoder.rand_noise.shape[2]} frames of start noise")
        noise = decoder.rand_noise[:, :, first:frames].to(mu.device, mu.dtype)
        final = min(frames, max(0, len(every) - flow.pre_lookahead_layer.pre_lookahead_len) * ratio)
        held = final // self.align * self.align if self.align else 0
        hold = max(0, held - first)
        mel = decoder.solve_euler(noise, decoder.time_span(self.n_timesteps, mu.device, mu.dtype), mu, self.spks, cond, self.pasts, hold)
        self.held = first + hold
        return first, mel
