"""Build a ready-to-serve Drama 3: the backbone + tower talker, S2 Pro's DAC, the talker -> codec pipeline.

The published repository holds no codec: the reference server takes S2 Pro's. `codec.pth` (with an optional
`codec_config.json`) beside the checkpoint is used when present; otherwise the codec stage's `weights_dir` (a
directory or a Hub repo id; `fishaudio/s2-pro` by default) is.
"""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.deploy import DeployConfig

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")


def codec_directory(path: Path, weights_dir: str) -> Path:
    from vocalis.stages.models.fish_common.fish_dac import CODEC_FILE
    from vocalis.stages.models.hub_checkpoint import looks_like_repo_id, resolve_repo

    if (path / CODEC_FILE).exists():
        return path
    if not weights_dir:
        raise ValueError(f"{path} has no {CODEC_FILE} and the dac_decoder stage names no weights_dir: Drama 3 decodes with "
                         "S2 Pro's codec (fishaudio/s2-pro)")
    return resolve_repo(weights_dir) if looks_like_repo_id(weights_dir) else Path(weights_dir)


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from tokenizers import Tokenizer

    from vocalis.stages.models.drama3.adapter import Drama3Adapter
    from vocalis.stages.models.drama3.config import Drama3Config
    from vocalis.stages.models.drama3.runtime import Drama3Talker, ReferenceFrames
    from vocalis.stages.models.drama3.weights import load_drama3
    from vocalis.stages.models.fish_common.codec import ReferenceEncoder, dac_decoder
    from vocalis.stages.models.fish_common.fish_dac import load_fish_dac
    from vocalis.stages.models.quantizable import Quantizable, quantize_stages
    from vocalis.stages.runtime.deployed_stages import autoregressive_stage, chunk_stage
    from vocalis.stages.runtime.prepare import PrepareStage

    talker_deploy, codec_deploy = deploy.stage("talker"), deploy.stage("dac_decoder")
    config = Drama3Config.from_dir(path)
    codec = load_fish_dac(codec_directory(path, codec_deploy.weights_dir), codec_deploy.device)
    if codec.config.num_codebooks != config.decoder.num_codebooks or codec.config.semantic_codebook_size != config.decoder.vocab_size:
        raise ValueError(f"{path}: the model makes frames of {config.decoder.num_codebooks} codes of {config.decoder.vocab_size}, "
                         f"the codec decodes {codec.config.num_codebooks} with a semantic codebook of "
                         f"{codec.config.semantic_codebook_size}")
    model = load_drama3(path, config, talker_deploy.device, talker_deploy.torch_dtype)
    # The head's candidate rows are read as a matrix.
    quantized = quantize_stages(deploy, Quantizable("talker", (model,), keep=(model.lm_head,)))
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    encoder = ReferenceFrames(ReferenceEncoder(codec))
    talker = Drama3Talker(model, tokenizer, talker_deploy.max_len, encoder)
    adapter = Drama3Adapter(codec.sample_rate)
    stages = [
        PrepareStage("voices", encoder),
        autoregressive_stage(talker, talker_deploy, codec_deploy),
        chunk_stage(dac_decoder(codec), codec_deploy),
    ]
    return LoadedModel.serving(path.name, "drama3", adapter, stages, text_carry=adapter.text_carry, quantized=quantized)
