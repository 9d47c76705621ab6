"""The CosyVoice3 speech LM against transformers' Qwen2ForCausalLM on the same tiny weights (goldens made by
tests/goldens/cosyvoice3/make_goldens.py): prompt logits within 1e-4 on the dense path, and the published greedy
decode (stop tokens masked for min_len steps) token for token through the runtime's paged KV cache."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from tests.tolerance import rounding_bound, traced
from vocalis.stages.models.cosyvoice3.runtime import SequenceState, SpeechLM
from vocalis.stages.models.cosyvoice_common.ras_sampling import SamplingHistory
from vocalis.stages.runtime.autoregressive import AutoregressiveStage, SequenceStart
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams
from vocalis.stages.runtime.stage import StageItem

GOLDENS = Path(__file__).parents[3] / "goldens" / "cosyvoice3"
META = json.loads((GOLDENS / "lm_goldens.json").read_text())


def test_goldens_are_of_this_checkpoint(tiny_checkpoint):
    assert hashlib.sha256((tiny_checkpoint / "llm.pt").read_bytes()).hexdigest() == META["llm_pt_sha256"]


def test_prompt_logits_match_transformers_qwen2(modules):
    golden = load_file(str(GOLDENS / "lm_goldens.safetensors"))
    with torch.inference_mode(), traced() as path:
        embeds = modules.lm.prompt_embeds(META["text_ids"], META["prompt_speech"])
        hidden = modules.lm.dense(embeds[None])[0]
        logits = modules.lm.logits(hidden)
    tolerance = rounding_bound(torch.float32, path.peak, path.steps)  # to the logits: the hidden states' path and more
    assert (hidden - golden["prompt_hidden"]).abs().max() <= tolerance
    assert (logits - golden["prompt_logits"]).abs().max() <= tolerance


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


class GoldenPromptLM(SpeechLM):
    """The stage model with the golden's prompt (ids given, no reference transcript to tokenize)."""

    def start(self, request, payload=None):
        embeds = self.lm.prompt_embeds(META["text_ids"], META["prompt_speech"])
        sampling = SamplingParams(temperature=0, max_new_tokens=META["steps"])
        return SequenceStart(embeds, sampling, SequenceState(META["min_len"], SamplingHistory()))


def test_greedy_decode_through_the_paged_cache_matches_transformers(modules):
    stage = AutoregressiveStage("llm", GoldenPromptLM(modules, 512), max_num_seqs=4, block_size=4)
    requests = [SynthesisRequest(text="", stage_input=None, output=NullOutput()) for _ in range(3)]
    for request in requests:
        stage.add(StageItem(request))
    tokens: dict[int, list[int]] = {id(r): [] for r in requests}
    with torch.inference_mode():
        while stage.has_work():
            for item in stage.step():
                tokens[id(item.request)] += item.payload[:, 0].tolist()
    assert all(t == META["greedy_tokens"] for t in tokens.values())
