"""The GLM-TTS speech LM against transformers' LlamaForCausalLM on the same tiny weights (goldens made by
tests/goldens/glm_tts/make_goldens.py): prompt logits within 1e-4 over the whole vocabulary on the dense path, the
published greedy decode (stops masked for min_len steps) token for token through the runtime's paged KV cache, the
prompt layout from the tokenizer, and the text-length token budget."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.tolerance import rounding_bound, traced
from vocalis.stages.layers.weights import load_strict, read_safetensors
from vocalis.stages.models.cosyvoice_common.ras_sampling import SamplingHistory
from vocalis.stages.models.glm_tts.config import LlamaConfig
from vocalis.stages.models.glm_tts.lm import GLMSpeechLM
from vocalis.stages.models.glm_tts.runtime import GLMTTSLM, STOP, SequenceState, TokenBudget
from vocalis.stages.models.glm_tts.tokenizer import GLMTokenizer
from vocalis.stages.runtime.autoregressive import AutoregressiveStage, SequenceStart
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams
from vocalis.stages.runtime.stage import StageItem

GOLDENS = Path(__file__).parents[3] / "goldens" / "glm_tts"
META = json.loads((GOLDENS / "lm_goldens.json").read_text())


@pytest.fixture(scope="module")
def lm(glm_checkpoint):
    config = LlamaConfig.from_dict(json.loads((glm_checkpoint / "llm" / "config.json").read_text()))
    return load_strict(GLMSpeechLM(config), read_safetensors(glm_checkpoint / "llm"), "llm").eval()


@pytest.fixture(scope="module")
def tokenizer(glm_checkpoint):
    return GLMTokenizer.from_dir(glm_checkpoint / "vq32k-phoneme-tokenizer")


def test_goldens_are_of_this_checkpoint(glm_checkpoint):
    digest = hashlib.sha256((glm_checkpoint / "llm" / "model.safetensors").read_bytes()).hexdigest()
    assert digest == META["model_safetensors_sha256"]


def test_prompt_layout_from_the_tokenizer(lm, tokenizer):
    model = GLMTTSLM(lm, tokenizer, 512)
    assert model.stop_ids == META["stops"]  # "👂" and <|user|>, found by lookup
    assert (model.begin_of_audio, model.audio_start, model.speech_tokens) == (META["begin_of_audio"], META["audio_start"], 64)
    ids = model.prompt_ids("hello  world", "this is a tiny voice", META["prompt_speech"])
    assert ids == META["prompt_text"] + META["text"] + [META["begin_of_audio"]] + [META["audio_start"] + t for t in META["prompt_speech"]]


def test_prompt_logits_match_transformers_llama(lm):
    golden = load_file(str(GOLDENS / "lm_goldens.safetensors"))
    ids = META["prompt_text"] + META["text"] + [META["begin_of_audio"]] + [META["audio_start"] + t for t in META["prompt_speech"]]
    with torch.inference_mode(), traced() as path:
        hidden = lm.dense(lm.embed(ids)[None])[0]
        logits = lm.logits(hidden)
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)  # to the logits: the hidden states' path and more
    assert (hidden - golden["prompt_hidden"]).abs().max() <= tolerance
    assert (logits - golden["prompt_logits"]).abs().max() <= tolerance


def test_token_budget_is_the_text_length_times_the_deploy_ratios(lm, tokenizer):
    model = GLMTTSLM(lm, tokenizer, 512, TokenBudget(3.0, 7.0))
    assert model.token_budget("this is a tiny voice") == (15, 35)


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


class GoldenPromptLM(GLMTTSLM):
    def start(self, request, payload=None):
        ids = META["prompt_text"] + META["text"] + [META["begin_of_audio"]] + [META["audio_start"] + t for t in META["prompt_speech"]]
        sampling = SamplingParams(temperature=0, max_new_tokens=META["steps"])
        return SequenceStart(self.lm.embed(ids), sampling, SequenceState(META["min_len"], SamplingHistory()))


def test_greedy_decode_through_the_paged_cache_matches_transformers(lm, tokenizer):
    stage = AutoregressiveStage("llm", GoldenPromptLM(lm, tokenizer, 512), max_num_seqs=4, block_size=4)
    requests = [SynthesisRequest(text="", stage_input=None, output=NullOutput()) for _ in range(3)]
    for request in requests:
        stage.add(StageItem(request))
    frames: dict[int, list[int]] = {id(r): [] for r in requests}
    with torch.inference_mode():
        while stage.has_work():
            for item in stage.step():
                frames[id(item.request)] += item.payload[:, 0].tolist()
    expected = [t - META["audio_start"] for t in META["greedy_ids"]]
    assert all(f == expected and STOP not in f for f in frames.values())
