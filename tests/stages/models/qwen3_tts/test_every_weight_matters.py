"""No ignored weights: perturbing any one tensor of a checkpoint changes what we compute from it.

The only exceptions are tensors the reference does not use on the inference path either, each named
below with the reason.
"""

from __future__ import annotations

import torch

from tests.stages.models.qwen3_tts.goldens import golden, modules, teacher_forced
from vocalis.stages.components.speech_features import matcha_log_mel
from vocalis.stages.models.qwen3_tts.speaker import SPEAKER_MEL
from vocalis.stages.models.qwen3_tts.weights import load_modules


def unused_encoder_layers(mods) -> set[str]:
    """Mimi's acoustic codebooks past encoder_valid_num_quantizers (the reference keeps only the first ones),
    the quantizers' output_proj (decoding), and the `initialized` flags (training)."""
    config = mods.config.speech_tokenizer
    used_acoustic = config.encoder_valid_num_quantizers - config.encoder.num_semantic_quantizers
    names = set()
    for name in mods.encoder.state_dict():
        parts = name.split(".")
        if name.endswith(".initialized") or name.endswith("output_proj.weight"):
            names.add(name)
        elif parts[1] == "acoustic_residual_vector_quantizer" and parts[2] == "layers" and int(parts[3]) >= used_acoustic:
            names.add(name)
    return names


DECODER_UNUSED = {"quantizer.rvq_first.input_proj.weight", "quantizer.rvq_rest.input_proj.weight"}  # encoding only


def changes_under_perturbation(module: torch.nn.Module, probe, skip: set[str] = frozenset(), size: float = 0.2) -> list[str]:
    """Names of the tensors whose perturbation (noise of `size` times their spread) leaves probe() unchanged."""
    with torch.inference_mode():
        base = probe()
        dead = []
        generator = torch.Generator().manual_seed(0)
        for name, tensor in module.state_dict(keep_vars=True).items():
            if name in skip or not tensor.is_floating_point():
                continue
            saved = tensor.data.clone()
            tensor.data.add_(torch.randn(tensor.shape, generator=generator) * (size * float(saved.float().std(correction=0)) + 0.05))
            after = probe()
            tensor.data.copy_(saved)
            if all(torch.equal(a, b) for a, b in zip(base, after, strict=True)):
                dead.append(name)
    return dead


def test_every_talker_and_code_predictor_tensor_matters():
    # The 1.7B layout: the 0.6B one has the same tensors less small_to_mtp_projection (test_key_sets.py).
    for variant, name in (("cv-1b7", "cv-1b7.custom_voice"),):
        mods = load_modules(modules(variant).path)  # a private copy: this test edits weights
        codes = golden(name)["codes"][:2]

        def probe(mods=mods, name=name, codes=codes):
            run = teacher_forced(mods, name, codes)
            return [run.talker_logits, run.predictor_logits]

        assert changes_under_perturbation(mods.talker, probe) == [], variant


def test_every_decoder_tensor_matters():
    mods = load_modules(modules("cv-1b7").path)
    codes = golden("cv-1b7.custom_voice")["codes"][:4]
    dead = changes_under_perturbation(mods.decoder, lambda: [mods.decoder(codes.T[None])], skip=DECODER_UNUSED)
    assert dead == []


def test_every_speaker_encoder_and_mimi_encoder_tensor_matters():
    mods = load_modules(modules("base-1b7").path)
    audio = golden("base-1b7.base_icl")["ref_audio"][:12000]
    # Two clips of different spectra: with 2-channel Res2Net groups a few ReLUs of the tiny encoder stay
    # off for the whole of one steady clip.
    noise = 0.3 * torch.randn(12000, generator=torch.Generator().manual_seed(1))
    mels = torch.stack([matcha_log_mel(audio, **SPEAKER_MEL), matcha_log_mel(noise, **SPEAKER_MEL)])
    assert changes_under_perturbation(mods.speaker_encoder, lambda: [mods.speaker_encoder(mels)]) == []

    encoder = mods.encoder

    def residuals():
        """The continuous side of encoding: what each used codebook leaves unquantized."""
        x = encoder.encoder(audio[None, None])
        z = encoder.downsample(encoder.encoder_transformer(x.transpose(1, 2)).transpose(1, 2))
        out = []
        quantizers = encoder.quantizer
        for rvq, count in ((quantizers.semantic_residual_vector_quantizer, quantizers.semantic_count),
                           (quantizers.acoustic_residual_vector_quantizer, encoder.num_quantizers - quantizers.semantic_count)):
            residual = rvq.input_proj(z).transpose(1, 2)
            for layer in rvq.layers[:count]:
                centroids = layer.codebook.centroids()
                index = torch.cdist(residual, centroids[None]).argmin(-1)
                residual = residual - torch.nn.functional.embedding(index, centroids)
                out.append(residual)
        return out

    assert changes_under_perturbation(encoder, residuals, skip=unused_encoder_layers(mods)) == []
