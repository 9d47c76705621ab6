"""Build a ready-to-serve S2 Pro model: the dual AR, the shared DAC, the slow AR -> codec pipeline.

Registering the family imports no torch; loading a checkpoint does.
"""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.api.model import LoadedModel
from vocalis.stages.runtime.deploy import DeployConfig

DEPLOY_DEFAULTS = Path(__file__).with_name("deploy.yaml")


def load(path: Path, deploy: DeployConfig) -> LoadedModel:
    from vocalis.stages.models.fish_common.codec import ReferenceEncoder, dac_decoder
    from vocalis.stages.models.fish_speech.adapter import FishSpeechAdapter
    from vocalis.stages.models.fish_speech.prompt import FishTokenizer
    from vocalis.stages.models.fish_speech.runtime import SlowARStageModel
    from vocalis.stages.models.fish_speech.weights import load_modules
    from vocalis.stages.models.quantizable import Quantizable, quantize_stages
    from vocalis.stages.runtime.deployed_stages import autoregressive_stage, chunk_stage
    from vocalis.stages.runtime.prepare import PrepareStage

    ar_deploy, codec_deploy = deploy.stage("slow_ar"), deploy.stage("dac_decoder")
    modules = load_modules(path, device=ar_deploy.device, dtype=ar_deploy.torch_dtype)
    tokenizer = FishTokenizer.from_file(str(Path(path) / "tokenizer.json"))
    encoder = ReferenceEncoder(modules.codec)
    slow_ar = SlowARStageModel(modules, tokenizer, ar_deploy.max_len, encoder)
    # The slow and fast ARs and the slow AR's speech head; the codec stays float.
    quantized = quantize_stages(deploy, Quantizable("slow_ar", (modules.dual_ar, slow_ar.head)))
    adapter = FishSpeechAdapter(modules.codec.sample_rate)
    stages = [
        PrepareStage("voices", encoder),  # reference clips are encoded here, while the slow AR keeps stepping
        autoregressive_stage(slow_ar, ar_deploy, codec_deploy),
        chunk_stage(dac_decoder(modules.codec), codec_deploy),
    ]
    return LoadedModel.serving(path.name, "fish_speech", adapter, stages, quantized=quantized)
