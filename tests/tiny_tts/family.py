"""The tiny test TTS family: a two-stage talker -> codec pipeline loaded like a real family.

Not shipped: tests build a random checkpoint (config.json + model.safetensors) with
tests/tiny_tts/build.py and serve it with `--family-module tests.tiny_tts.family`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.tiny_tts.config import MODEL_TYPE, TinyConfig
from tests.tiny_tts.modules import TinyCodecDecoder, TinyTalker
from vocalis.stages.attention import AttentionBatch
from vocalis.stages.autoregressive import AutoregressiveStage
from vocalis.stages.chunk_stage import ChunkStage
from vocalis.stages.deploy import DeployConfig
from vocalis.stages.errors import InvalidField, UnknownVoice
from vocalis.stages.family import ModelFamily
from vocalis.stages.kv_cache import CacheShape, SlotKVCache
from vocalis.stages.model import Capabilities, LoadedModel
from vocalis.stages.pipeline import Pipeline
from vocalis.stages.request import RequestParams, SynthesisRequest
from vocalis.stages.sampling import SamplerState, SamplingParams, sample_batch

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")
VOICE = "tiny"
SAMPLING_KEYS = ("temperature", "top_k", "top_p", "repetition_penalty")
POISON = "\a"


@dataclass(frozen=True)
class TinyInput:
    sampling: SamplingParams
    initial_codec_chunk_frames: int | None = None


class TinyAdapter:
    def __init__(self, config: TinyConfig) -> None:
        self.capabilities = Capabilities(
            sample_rate=config.codec.sample_rate,
            voices=(VOICE,),
            default_voice=VOICE,
            accepted_fields=frozenset({"seed", "max_new_tokens", "initial_codec_chunk_frames", "extra_params"}),
            extra_params={key: f"sampling {key}" for key in SAMPLING_KEYS},
        )

    def resolve_voice(self, voice: str) -> str:
        if voice.lower() in ("", "default", VOICE):
            return VOICE
        raise UnknownVoice(voice, [VOICE])

    def stage_input(self, params: RequestParams) -> TinyInput:
        fields = params.fields
        extra = dict(fields.get("extra_params") or {})
        unknown = sorted(set(extra) - set(SAMPLING_KEYS))
        if unknown:
            raise InvalidField("extra_params", "FIELD_NOT_SUPPORTED", f"extra_params {unknown} not supported")
        values = {"temperature": 0.0, **extra}
        try:
            sampling = SamplingParams(
                temperature=float(values["temperature"]),
                top_k=int(values.get("top_k", 0)),
                top_p=float(values.get("top_p", 1.0)),
                repetition_penalty=float(values.get("repetition_penalty", 1.0)),
                seed=fields.get("seed"),
                max_new_tokens=int(fields.get("max_new_tokens", 200)),
            )
        except ValueError as error:
            raise InvalidField("extra_params", "INVALID_VALUE", str(error)) from error
        return TinyInput(sampling, fields.get("initial_codec_chunk_frames"))


class TinyTalkerModel:
    """The talker as the AutoregressiveModel of stage 0."""

    def __init__(self, talker: TinyTalker, max_len: int) -> None:
        self.talker = talker
        c = talker.config
        self.cache_shape = CacheShape(c.num_layers, c.num_kv_heads, c.head_dim, min(max_len, c.max_position_embeddings))

    def prompt_embeds(self, request: SynthesisRequest) -> torch.Tensor:
        if POISON in request.text:  # lets tests give one request an input the stage fails on
            raise ValueError("the tiny model cannot speak the BEL character")
        ids = list(request.text.encode("utf-8")) + [self.talker.config.bos_token_id]
        return self.talker.text_embedding(torch.tensor(ids))

    def sampling(self, request: SynthesisRequest) -> SamplingParams:
        return request.stage_input.sampling

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        return self.talker(embeds, batch, cache)

    def sample_frames(self, hidden: torch.Tensor, samplers: list[SamplerState], histories: list[torch.Tensor]) -> torch.Tensor:
        return sample_batch(self.talker.logits(hidden), samplers, [h if h.numel() else None for h in histories])

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return frames[:, 0] == self.talker.config.eos_token_id

    def frame_embeds(self, frames: torch.Tensor) -> torch.Tensor:
        return self.talker.embed_frames(frames)


class TinyCodecModel:
    """The codec decoder as the ChunkDecoder of stage 1."""

    causal = True

    def __init__(self, codec: TinyCodecDecoder) -> None:
        self.codec = codec
        self.samples_per_frame = codec.config.samples_per_frame

    def decode(self, frames: torch.Tensor) -> torch.Tensor:
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
        ),
        ChunkStage("code2wav", TinyCodecModel(codec), codec_deploy.chunk_policy(), max_num_seqs=codec_deploy.max_num_seqs),
    ]
    return LoadedModel(name=path.name, family="tiny_tts", capabilities=adapter.capabilities, adapter=adapter, pipeline=Pipeline(stages))


FAMILY = ModelFamily(name="tiny_tts", model_types=(MODEL_TYPE,), deploy_defaults=DEPLOY_DEFAULTS, load=load)
