"""Build a ready-to-serve Gepard-1.0: the talker stage (continuously batched over KV blocks and recurrent-state
slots) and the NanoCodec decoder stage. Registering the family imports no torch; loading a checkpoint does."""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.deploy import DeployConfig


def codec_archive(path: Path, codec_id: str) -> Path:
    """The NanoCodec .nemo: one inside the checkpoint directory, else the one of `codec_id`'s Hub snapshot."""
    local = sorted(path.glob("*.nemo"))
    if len(local) > 1:
        raise ValueError(f"{path} holds several .nemo files ({[p.name for p in local]}); keep the NanoCodec one")
    if local:
        return local[0]
    from vocalis.stages.models.hub_checkpoint import resolve_repo

    found = sorted(resolve_repo(codec_id).glob("*.nemo"))
    if not found:
        raise ValueError(f"the codec repository {codec_id} has no .nemo archive")
    return found[0]


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.components.stateful_decode import StatefulCodecDecoder
    from vocalis.stages.models.gepard.adapter import GepardAdapter
    from vocalis.stages.models.gepard.nanocodec import load_nanocodec
    from vocalis.stages.models.gepard.talker import GepardModel
    from vocalis.stages.models.gepard.weights import load_talker, load_tokenizer
    from vocalis.stages.models.quantizable import Quantizable, quantize_stages
    from vocalis.stages.runtime.deployed_stages import autoregressive_stage, chunk_stage

    talker_deploy, codec_deploy = deploy.stage("gepard"), deploy.stage("nanocodec")
    talker = load_talker(path, dtype=talker_deploy.torch_dtype, device=talker_deploy.device)
    quantized = quantize_stages(deploy, Quantizable("gepard", (talker,)))
    config = talker.config
    codec = load_nanocodec(codec_archive(path, config.codec_id), dtype=codec_deploy.torch_dtype, device=codec_deploy.device)
    if codec.config.sample_rate != config.sample_rate or codec.config.input_dim != config.num_heads:
        raise ValueError(f"{path}: the codec ({codec.config.sample_rate} Hz, {codec.config.input_dim} codes) does not match the "
                         f"sidecar ({config.sample_rate} Hz, {config.num_heads} heads)")
    model = GepardModel(talker, load_tokenizer(path), talker_deploy.max_len)
    adapter = GepardAdapter(config.sample_rate)
    stages = [
        autoregressive_stage(model, talker_deploy, codec_deploy),
        chunk_stage(StatefulCodecDecoder(codec, codec.samples_per_frame), codec_deploy),  # FSQ codes [B, T, 32] to 22.05 kHz
    ]
    return LoadedModel.serving(path.name, "gepard", adapter, stages, quantized=quantized)
