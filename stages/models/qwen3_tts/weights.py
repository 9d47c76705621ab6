"""A Qwen3-TTS checkpoint directory, unchanged from its publisher, into ready torch modules.

Loading is strict (vocalis.stages.layers.weights): every tensor of the file must land in a module and every module
tensor must come from the file, so a renamed or forgotten key fails at start-up, not as silently wrong audio.
Weight-normalised convolutions are folded into a plain `weight`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from vocalis.stages.layers.weights import SafetensorsReader, build_empty, fold_weight_norm, load_strict, read_safetensors, take
from vocalis.stages.models.qwen3_tts.codec import SpeechDecoder, SpeechEncoder
from vocalis.stages.models.qwen3_tts.config import Qwen3TTSConfig
from vocalis.stages.models.qwen3_tts.speaker import SpeakerEncoder
from vocalis.stages.models.qwen3_tts.talker import Talker
from vocalis.stages.models.qwen3_tts.tokenizer import TextTokenizer


@dataclass
class Qwen3TTSModules:
    """Everything a Qwen3-TTS checkpoint holds, loaded."""

    path: Path
    config: Qwen3TTSConfig
    tokenizer: TextTokenizer
    talker: Talker
    decoder: SpeechDecoder
    encoder: SpeechEncoder | None
    """Mimi encoder of the speech tokenizer: reference codes for ICL cloning (Base checkpoints)."""
    speaker_encoder: SpeakerEncoder | None
    """x-vectors for cloning (Base checkpoints)."""


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    return fold_weight_norm(read_safetensors(path))


def load_modules(path: Path, dtype: torch.dtype = torch.float32, device: str = "cpu", codec_dtype: torch.dtype | None = None,
                 codec_device: str | None = None) -> Qwen3TTSModules:
    """Load the checkpoint at `path` (config.json, model.safetensors, tokenizer files, speech_tokenizer/)."""
    config = Qwen3TTSConfig.from_dir(path)
    tokenizer = TextTokenizer.from_dir(path, config.transformers_version)
    # the talker built in its dtype and read one tensor at a time (its layers have no weight norm to fold): its load
    # holds its weights as served and one tensor, never a float32 copy or the file's tensors beside them
    weights = SafetensorsReader(path / "model.safetensors" if (path / "model.safetensors").is_file() else path)
    unknown = sorted({k.split(".")[0] for k in weights} - {"talker", "speaker_encoder"})
    if unknown:
        raise ValueError(f"{path}: unexpected weights {unknown}")
    talker = load_strict(build_empty(lambda: Talker(config.talker), dtype), weights.take("talker."), f"{path}: talker")
    speaker = None
    if config.speaker_encoder is not None:
        speaker = load_strict(SpeakerEncoder(config.speaker_encoder), fold_weight_norm(dict(weights.take("speaker_encoder."))),
                              f"{path}: speaker_encoder")
    elif any(k.startswith("speaker_encoder.") for k in weights):
        raise ValueError(f"{path}: speaker_encoder weights in a {config.tts_model_type} checkpoint")
    codec_weights = read_weights(path / "speech_tokenizer")
    st = config.speech_tokenizer
    decoder = load_strict(SpeechDecoder(st.decoder), take(codec_weights, "decoder."), f"{path}/speech_tokenizer: decoder")
    encoder = None
    if st.encoder is not None and any(k.startswith("encoder.") for k in codec_weights):
        encoder = load_strict(SpeechEncoder(st.encoder, st.encoder_valid_num_quantizers, st.encode_downsample_rate),
                            take(codec_weights, "encoder."), f"{path}/speech_tokenizer: encoder")
    codec_dtype = codec_dtype or dtype
    return Qwen3TTSModules(
        path=path, config=config, tokenizer=tokenizer,
        talker=talker.to(device=device, dtype=dtype).eval(),
        decoder=decoder.to(device=codec_device or device, dtype=codec_dtype).eval(),
        # The encoder and speaker encoder run once per cloned voice: float32 keeps their codes and x-vectors exact.
        encoder=encoder.to(device=device).eval() if encoder is not None else None,
        speaker_encoder=speaker.to(device=device).eval() if speaker is not None else None,
    )
