"""Record NeMo's own NanoCodec modules (CausalHiFiGANDecoder, GroupFiniteScalarQuantizer) on the tiny codec.

Run by hand in a venv of its own that has NeMo (never in the project's venv, never in CI):

    python3 -m venv /tmp/gdn-ref && echo torch==2.13.0 > /tmp/c.txt
    /tmp/gdn-ref/bin/pip install -c /tmp/c.txt "nemo-toolkit[tts]==3.0.0"
    .venv/bin/python -c "from pathlib import Path; from tests.tiny_gepard.build import build_nemo; \
        build_nemo(Path('tests/goldens/nanocodec/tiny.nemo'))"
    /tmp/gdn-ref/bin/python tests/goldens/nanocodec/make_goldens.py

It reads the tiny archive beside itself (made by tests/tiny_gepard/build.py in the project's venv: its yaml and
weights, weight norm as parametrizations), loads the weights into NeMo's modules built from that yaml, decodes per-dimension codes the way NeMo does (each
group's digits composed into its mixed-radix index, GroupFiniteScalarQuantizer.decode, then the decoder), and
writes goldens.safetensors beside it: the codes, NeMo's latents and NeMo's waveform.
"""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import torch
import yaml
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent


def main() -> None:
    from nemo.collections.tts.modules.audio_codec_modules import CausalHiFiGANDecoder, GroupFiniteScalarQuantizer

    archive = HERE / "tiny.nemo"
    with tarfile.open(archive) as tar:
        config = yaml.safe_load(tar.extractfile("./model_config.yaml").read())
        weights = torch.load(io.BytesIO(tar.extractfile("./model_weights.ckpt").read()), weights_only=True)
    decoder_config = {k: v for k, v in config["audio_decoder"].items() if k != "_target_"}
    decoder = CausalHiFiGANDecoder(**decoder_config).eval()
    decoder.load_state_dict({k.removeprefix("audio_decoder."): v for k, v in weights.items() if k.startswith("audio_decoder.")})
    quantizer = GroupFiniteScalarQuantizer(config["vector_quantizer"]["num_groups"], config["vector_quantizer"]["num_levels_per_group"])
    levels = config["vector_quantizer"]["num_levels_per_group"]
    g = torch.Generator().manual_seed(3)
    frames = 30
    codes = torch.stack([torch.randint(0, levels[i % 4], (frames,), generator=g) for i in range(32)], dim=-1)  # [T, 32]
    base = torch.tensor([1, 8, 56, 336])
    indices = torch.stack([(codes[:, 4 * group : 4 * group + 4] * base).sum(-1) for group in range(8)])[:, None]  # [G, 1, T]
    with torch.no_grad():
        latents = quantizer.decode(indices=indices, input_len=torch.tensor([frames]))
        audio, _ = decoder(inputs=latents, input_len=torch.tensor([frames]))
    save_file({"codes": codes.contiguous(), "audio": audio[0].contiguous(), "latents": latents[0].contiguous()},
              str(HERE / "goldens.safetensors"))
    print("audio", tuple(audio.shape), float(audio.abs().max()))


if __name__ == "__main__":
    main()
