"""The tiny test TTS family: a two-stage talker -> codec pipeline loaded like a real family.

Not shipped: tests build a random checkpoint (config.json + model.safetensors) with
tests/tiny_tts/build.py and serve it with `--family-module tests.tiny_tts.family`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from tests.tiny_tts.config import MODEL_TYPE, TinyConfig
from tests.tiny_tts.modules import SPEAKER_DIM, TinyCodecDecoder, TinyTalker
from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.family import ModelFamily
from vocalis.stages.api.model import Capabilities, LoadedModel
from vocalis.stages.runtime.attention import AttentionBatch
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, AutoregressiveStage, SequenceStart
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, ChunkStage, DecodeStream
from vocalis.stages.runtime.deploy import DeployConfig
from vocalis.stages.runtime.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.runtime.pipeline import Pipeline
from vocalis.stages.runtime.request import ReferenceAudio, RequestParams, SynthesisRequest
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams, sample_batch

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")
VOICE = "tiny"
EXTRA_PARAMS = ExtraParams("tiny_tts", [
    ExtraParam("temperature", float, "sampling temperature (default 0: greedy)", minimum=0),
    ExtraParam("top_k", int, "sampling top-k (0 keeps all)", minimum=0),
    ExtraParam("top_p", float, "nucleus sampling", minimum=0, maximum=1, exclusive_minimum=True),
    ExtraParam("repetition_penalty", float, "penalty on frames already generated (1 is none)", minimum=0, exclusive_minimum=True),
])
POISON = "\a"


@dataclass(frozen=True)
class TinyInput:
    sampling: SamplingParams
    initial_codec_chunk_frames: int | None = None
    speaker: torch.Tensor | None = None
    """[SPEAKER_DIM] embedding of the voice to clone, if any."""
    ref_text: str = ""


def speaker_embedding(reference: ReferenceAudio) -> torch.Tensor:
    """The tiny family's "speaker encoder": the normalized loudness contour of the clip in 16 segments."""
    stored = reference.artifacts.get("speaker_embedding")
    if stored is not None:
        if len(stored) != SPEAKER_DIM:
            raise InvalidField("voice", "EMBEDDING_SIZE", f"speaker embeddings of this model have {SPEAKER_DIM} values, not {len(stored)}")
        return torch.as_tensor(np.asarray(stored, dtype=np.float32))
    segments = np.array_split(np.asarray(reference.samples, dtype=np.float64), SPEAKER_DIM)
    contour = np.array([np.sqrt(np.mean(seg**2)) if len(seg) else 0.0 for seg in segments])
    return torch.as_tensor((contour / (contour.max() + 1e-9)).astype(np.float32))


class TinyAdapter:
    def __init__(self, config: TinyConfig) -> None:
        self.capabilities = Capabilities(
            sample_rate=config.codec.sample_rate,
            voices=(VOICE,),
            default_voice=VOICE,
            accepted_fields=frozenset(
                {"seed", "max_new_tokens", "initial_codec_chunk_frames", "extra_params", "ref_audio", "ref_text"}
            ),
            extra_params=tuple(EXTRA_PARAMS),
            voice_cloning=True,
        )

    def resolve_voice(self, voice: str) -> str:
        if voice.lower() in ("", "default", VOICE):
            return VOICE
        raise UnknownVoice(voice, [VOICE])

    def stage_input(self, params: RequestParams) -> TinyInput:
        fields = params.fields
        settings = {"temperature": 0.0, **EXTRA_PARAMS.parse(fields.get("extra_params"))}
        try:
            sampling = SamplingParams(**settings, seed=fields.get("seed"), max_new_tokens=int(fields.get("max_new_tokens", 200)))
        except ValueError as error:
            raise InvalidField("max_new_tokens", "OUT_OF_RANGE", str(error)) from error
        reference = params.reference
        if reference is None:
            if "ref_text" in fields:
                raise InvalidField("ref_text", "REF_AUDIO_REQUIRED", "ref_text needs ref_audio or a cloned voice")
            return TinyInput(sampling, fields.get("initial_codec_chunk_frames"))
        return TinyInput(sampling, fields.get("initial_codec_chunk_frames"), speaker_embedding(reference), reference.text or "")


class TinyTalkerModel(AutoregressiveModel):
    """The talker as the AutoregressiveModel of stage 0."""

    emits_eos_frame = False

    def __init__(self, talker: TinyTalker, max_len: int) -> None:
        self.talker = talker
        c = talker.config
        self.cache_shape = CacheShape(c.num_layers, c.num_kv_heads, c.head_dim, min(max_len, c.max_position_embeddings))

    def start(self, request: SynthesisRequest[TinyInput]) -> SequenceStart:
        if POISON in request.text:  # lets tests give one request an input the stage fails on
            raise ValueError("the tiny model cannot speak the BEL character")
        stage_input = request.stage_input
        ids = list((stage_input.ref_text + request.text).encode("utf-8")) + [self.talker.config.bos_token_id]
        embeds = self.talker.text_embedding(torch.tensor(ids))
        if stage_input.speaker is not None:
            embeds = torch.cat([self.talker.speaker_proj(stage_input.speaker)[None], embeds])
        return SequenceStart(embeds, stage_input.sampling)

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        return self.talker(embeds, batch, cache)

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor],
                      states: list[None]) -> torch.Tensor:
        return sample_batch(self.talker.logits(hidden), samplers, [h if h.numel() else None for h in histories])

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return frames[:, 0] == self.talker.config.eos_token_id

    def frame_embeds(self, frames: torch.Tensor, states: list[None]) -> torch.Tensor:
        return self.talker.embed_frames(frames)


class TinyCodecModel(ChunkDecoder):
    """The codec decoder as the ChunkDecoder of stage 1."""

    causal = True

    def __init__(self, codec: TinyCodecDecoder) -> None:
        self.codec = codec
        self.samples_per_frame = codec.config.samples_per_frame

    def start(self, request: SynthesisRequest[TinyInput]) -> DecodeStream:
        return DecodeStream(first_chunk_frames=request.stage_input.initial_codec_chunk_frames)

    def decode(self, frames: torch.Tensor, streams: list[DecodeStream]) -> torch.Tensor:
        return self.codec(frames)


def load_modules(path: Path, dtype: torch.dtype = torch.float32) -> tuple[TinyConfig, TinyTalker, TinyCodecDecoder]:
    config = TinyConfig.from_dir(path)
    weights = load_file(str(path / "model.safetensors"))
    talker, codec = TinyTalker(config.talker), TinyCodecDecoder(config.codec)
    talker.load_state_dict({k.removeprefix("talker."): v for k, v in weights.items() if k.startswith("talker.")}, strict=True)
    codec.load_state_dict({k.removeprefix("codec."): v for k, v in weights.items() if k.startswith("codec.")}, strict=True)
    return config, talker.to(dtype).eval(), codec.to(dtype).eval()


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    talker_deploy, codec_deploy = deploy.stage("talker"), deploy.stage("code2wav")
    config, talker, codec = load_modules(path, talker_deploy.torch_dtype)
    adapter = TinyAdapter(config)
    stages = [
        AutoregressiveStage(
            "talker",
            TinyTalkerModel(talker, talker_deploy.max_len),
            max_num_seqs=talker_deploy.max_num_seqs,
            max_num_batched_tokens=talker_deploy.max_num_batched_tokens,
            dtype=talker_deploy.torch_dtype,
            **talker_deploy.kv_cache_options(),
            handover=codec_deploy.chunk_policy(),
        ),
        ChunkStage("code2wav", TinyCodecModel(codec), codec_deploy.chunk_policy(), max_num_seqs=codec_deploy.max_num_seqs),
    ]
    return LoadedModel(name=path.name, family="tiny_tts", capabilities=adapter.capabilities, adapter=adapter, pipeline=Pipeline(stages))


FAMILY = ModelFamily(name="tiny_tts", model_types=(MODEL_TYPE,), deploy_defaults=DEPLOY_DEFAULTS, load=load)
