"""Gepard-1.0's talker on a tiny checkpoint: detection, prompt layout, strict keys, in-model heads and the stop rule.

No oracle exists for the heads and the stop rule (no Gepard reference on PyPI; parity-method.md §2.9), so they are
checked by self-consistency: seed determinism, batch invariance, the stop head's behaviour at both extremes, and
every tensor mattering. The backbone is the floor's HybridDecoder, whose parity with transformers' `qwen3_5` is
tests/stages/layers/test_gated_deltanet.py (on the very weights this checkpoint's `model.*` holds).
"""

from __future__ import annotations

import json
import random
import shutil
from collections import defaultdict

import pytest
import torch
from safetensors.torch import load_file, save_file

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.models.gepard.config import GepardConfig, is_gepard
from vocalis.stages.models.gepard.prompt import prompt_ids
from vocalis.stages.models.gepard.talker import GepardModel
from vocalis.stages.models.gepard.weights import load_talker, load_tokenizer
from vocalis.stages.runtime.autoregressive import AutoregressiveStage
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams
from vocalis.stages.runtime.stage import StageItem


class Input:
    def __init__(self, sampling: SamplingParams) -> None:
        self.sampling = sampling


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


@pytest.fixture(scope="module")
def talker(gepard_dir):
    return load_talker(gepard_dir)


def make_stage(talker, gepard_dir, max_num_seqs=4, budget=64) -> AutoregressiveStage:
    model = GepardModel(talker, load_tokenizer(gepard_dir), max_len=512)
    return AutoregressiveStage("gepard", model, max_num_seqs=max_num_seqs, max_num_batched_tokens=budget, block_size=8)


def request(text: str, frames: int = 10, seed: int | None = 1) -> SynthesisRequest:
    return SynthesisRequest(text=text, stage_input=Input(SamplingParams(max_new_tokens=frames, seed=seed)), output=NullOutput())


def drive(stage: AutoregressiveStage, joins: dict[int, list[SynthesisRequest]]) -> dict[int, torch.Tensor]:
    frames: dict[int, list[torch.Tensor]] = defaultdict(list)
    step = 0
    while joins or stage.has_work():
        for r in joins.pop(step, []):
            stage.add(StageItem(r))
        with torch.inference_mode():
            for item in stage.step():
                frames[id(item.request)].append(item.payload)
        step += 1
    return {key: torch.cat(value) for key, value in frames.items()}


def test_detected_by_its_sidecar_and_never_otherwise(gepard_dir, tmp_path):
    assert is_gepard(gepard_dir)
    plain = tmp_path / "plain-qwen3_5"
    plain.mkdir()
    shutil.copy(gepard_dir / "config.json", plain / "config.json")
    assert not is_gepard(plain)
    with pytest.raises(ValueError, match="not a Gepard checkpoint"):
        load_talker(plain)
    wrong = tmp_path / "wrong"
    shutil.copytree(gepard_dir, wrong)
    config = json.loads((wrong / "config.json").read_text())
    (wrong / "config.json").write_text(json.dumps(config | {"model_type": "qwen3"}))
    with pytest.raises(ValueError, match="qwen3_5_text"):
        GepardConfig.from_dir(wrong)


def test_config_reads_the_sidecar(gepard_dir):
    config = GepardConfig.from_dir(gepard_dir)
    assert config.audio_levels == (8, 7, 6, 6) * 8  # sorted by numeric suffix, level_audio_10 after level_audio_9
    assert (config.temperature, config.stop_threshold, config.sample_rate) == (0.3, 0.5, 22050)
    assert (config.start_of_text, config.end_of_text, config.start_of_speech, config.speaker_token_base) == (93, 94, 90, 96)
    assert config.backbone.layer_types.count("linear_attention") == 3


def test_short_texts_repeat_and_only_the_last_copy_starts_speech(gepard_dir):
    config = GepardConfig.from_dir(gepard_dir)
    slots = [96, 97, 98]
    assert prompt_ids([5, 6], config) == slots + [93, 5, 6, 94] * 8 + [90]  # ceil(16 / 2) = 8 copies
    assert prompt_ids([5] * 5, config) == slots + [93, *[5] * 5, 94] * 4 + [90]  # ceil(16 / 5) = 4
    assert prompt_ids([5] * 13, config) == slots + [93, *[5] * 13, 94, 90]  # not below apply_below: once
    with pytest.raises(InvalidField) as refused:  # a request's text the tokenizer reads nothing from: the caller's to fix
        prompt_ids([], config)
    assert (refused.value.field, refused.value.reason) == ("text", "NOTHING_TO_SPEAK")


def test_the_loader_builds_the_published_key_set(gepard_dir, talker):
    """Names from the published training code's module tree (gepard-train's GepardModel): the stock
    Qwen3_5TextModel under `model.`, then the audio stack, heads and prefix. Nothing else is loaded."""
    config = talker.config
    expected = {f"model.{name}" for name in talker.model.state_dict()}
    for i in range(32):
        expected |= {f"audio_embeddings.{i}.weight", f"codebook_heads.{i}.weight", f"codebook_heads.{i}.bias"}
    expected |= {"audio_embed_proj.0.weight", "audio_embed_proj.0.bias", "audio_embed_proj.2.weight", "audio_embed_proj.2.bias",
                 "audio_embed_scale", "stop_head.weight", "stop_head.bias", "null_prefix"}
    assert set(talker.state_dict()) == expected
    assert talker.codebook_heads[3].out_features == 6 and len(config.audio_levels) == 32
    backbone = {k for k in expected if k.startswith("model.layers.0.")}
    assert {"model.layers.0.linear_attn.A_log", "model.layers.0.linear_attn.in_proj_qkv.weight",
            "model.layers.0.linear_attn.conv1d.weight", "model.layers.0.linear_attn.norm.weight"} <= backbone
    assert "model.layers.3.self_attn.q_norm.weight" in expected


def test_unknown_or_missing_tensors_fail_by_name(gepard_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(gepard_dir, broken)
    weights = load_file(str(broken / "model.safetensors"))
    weights["surprise.weight"] = torch.zeros(2)
    del weights["stop_head.bias"]
    save_file(weights, str(broken / "model.safetensors"))
    with pytest.raises(ValueError, match=r"stop_head\.bias.*surprise\.weight"):
        load_talker(broken)


def test_a_zero_dim_embed_scale_loads_as_the_vector_and_in_the_asked_dtype(gepard_dir, tmp_path, talker):
    """Older checkpoints store audio_embed_scale 0-dim; the talker is built in the asked dtype, every tensor read."""
    older = tmp_path / "older"
    shutil.copytree(gepard_dir, older)
    weights = load_file(str(older / "model.safetensors"))
    weights["audio_embed_scale"] = weights["audio_embed_scale"].reshape(())
    save_file(weights, str(older / "model.safetensors"))
    loaded = load_talker(older, dtype=torch.bfloat16)
    assert loaded.audio_embed_scale.shape == (1,) and loaded.audio_embed_scale.item() == pytest.approx(0.8, rel=1e-2)
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, talker.state_dict()[name].to(torch.bfloat16)), name


def test_seeded_frames_are_reproducible_and_batch_invariant(talker, gepard_dir):
    text = "hello world the quick brown fox jumps over a lazy dog"
    alone_request = request(text, 8, seed=3)
    alone = drive(make_stage(talker, gepard_dir), {0: [alone_request]})[id(alone_request)]
    assert alone.shape == (8, 32) and len(torch.unique(alone[:, 0])) > 2
    again_request = request(text, 8, seed=3)
    assert torch.equal(drive(make_stage(talker, gepard_dir), {0: [again_request]})[id(again_request)], alone)
    other_seed = request(text, 8, seed=4)
    assert not torch.equal(drive(make_stage(talker, gepard_dir), {0: [other_seed]})[id(other_seed)], alone)
    rng = random.Random(2)
    target = request(text, 8, seed=3)
    joins: dict[int, list[SynthesisRequest]] = defaultdict(list)
    for i in range(3):
        joins[rng.randint(0, 4)].append(request(" ".join(rng.sample(text.split(), 4)), rng.randint(3, 9), seed=i))
    joins[2].append(target)
    got = drive(make_stage(talker, gepard_dir, budget=24), dict(joins))
    assert torch.equal(got[id(target)], alone)
    for levels, column in zip(talker.config.audio_levels, alone.T, strict=True):
        assert int(column.max()) < levels


def test_the_stop_head_ends_sequences_but_never_on_the_first_frame(talker, gepard_dir):
    bias = talker.stop_head.bias.detach().clone()
    try:
        with torch.no_grad():
            talker.stop_head.bias.fill_(50.0)  # always above 0.5
        rs = [request("hello world", 30), request("the lazy dog jumps", 30)]
        got = drive(make_stage(talker, gepard_dir), {0: rs})
        assert [len(got[id(r)]) for r in rs] == [1, 1]  # the first frame is kept; the second stops (not emitted)
        with torch.no_grad():
            talker.stop_head.bias.fill_(-50.0)  # never: the frame budget is the backstop
        r = request("hello world", 17)
        assert len(drive(make_stage(talker, gepard_dir), {0: [r]})[id(r)]) == 17
    finally:
        with torch.no_grad():
            talker.stop_head.bias.copy_(bias)


def test_every_loaded_tensor_changes_the_heads_or_the_stop(talker, gepard_dir):
    """Teacher-forced: a prompt and three frames, the logits and stop probabilities at each of their positions; a
    random projection of them has a non-zero gradient in every loaded tensor (one backward pass, not one forward
    per tensor)."""
    config = talker.config
    ids = prompt_ids(load_tokenizer(gepard_dir)("hello world now"), config)
    frames = torch.tensor([[i % levels for levels in config.audio_levels] for i in range(3)])

    def outputs() -> torch.Tensor:
        embeds = torch.cat([talker.prompt_embeds(ids), talker.frame_embeds(frames)])
        hidden = talker.model.dense(embeds[None])[0]
        return torch.cat([talker.logits(hidden).clamp_min(-1e4).flatten(), talker.stop_probability(hidden)])

    params = dict(talker.named_parameters())
    frozen = [p for p in params.values() if not p.requires_grad]
    for p in params.values():
        p.requires_grad_(True)
        p.grad = None
    try:
        out = outputs()
        (out * torch.randn(out.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
        dead = [name for name, p in params.items() if p.grad is None or p.grad.abs().max().item() == 0]
        assert not dead, f"tensors that change no output: {dead}"
    finally:
        for p in params.values():
            p.grad = None
        for p in frozen:
            p.requires_grad_(False)


def test_the_registry_serves_qwen3_5_text_as_gepard_only_with_the_sidecar(gepard_dir, tmp_path):
    from vocalis.stages.api import family as families
    families.discover()
    assert families.family_for_checkpoint(gepard_dir).name == "gepard"
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(gepard_dir / "config.json", plain / "config.json")
    with pytest.raises(ValueError, match="gepard_config.json"):
        families.family_for_checkpoint(plain)
