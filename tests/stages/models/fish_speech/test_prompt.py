"""S2 Pro's prompt layout (vLLM-Omni's published description of the upstream one) on the tiny checkpoint's
tokenizer: the text-only and clone prompts token by token, the reference frames' codes at their semantic tokens,
speaker tags, and refused control tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vocalis.stages.models.fish_speech.prompt import ControlTokenInText, FishTokenizer, clone_prompt, text_only_prompt

TINY = Path(__file__).resolve().parents[3] / "goldens" / "fish_speech" / "tiny"
START = 300


@pytest.fixture(scope="module")
def tokenizer() -> FishTokenizer:
    return FishTokenizer.from_file(str(TINY / "tokenizer.json"))


def text(tokenizer: FishTokenizer, ids: torch.Tensor) -> str:
    return tokenizer.tokenizer.decode(ids.tolist(), skip_special_tokens=False)


def test_text_only_prompt(tokenizer):
    prompt = text_only_prompt(tokenizer, "Hello <speaker:1>world.", 10)
    assert text(tokenizer, prompt.ids) == (
        "<|im_start|>system\nconvert the provided text to speech<|im_end|>\n"
        "<|im_start|>user\nHello <|speaker:1|>world.<|im_end|>\n<|im_start|>assistant\n<|voice|>")
    assert prompt.codes.shape == (len(prompt.ids), 10) and not prompt.codes.any()


def test_clone_prompt_carries_the_reference_frames(tokenizer):
    frames = torch.tensor([[3, 1, 2], [5, 0, 7]])
    prompt = clone_prompt(tokenizer, "Hi.", "A reference.", frames, START)
    start = tokenizer.control["<|audio_start|>"]
    at = prompt.ids.tolist().index(start) + 1
    assert prompt.ids[at:at + 2].tolist() == [START + 3, START + 5]
    assert torch.equal(prompt.codes[at:at + 2], frames) and prompt.codes.sum() == frames.sum()
    without_codes = torch.cat([prompt.ids[:at], prompt.ids[at + 2:]])
    assert text(tokenizer, without_codes) == (
        "<|im_start|>system\nconvert the provided text to speech reference to the following:\n\nText:\n"
        "<|speaker:0|>A reference.\n\nSpeech:\n<|audio_start|><|audio_end|><|im_end|>\n"
        "<|im_start|>user\nHi.<|im_end|>\n<|im_start|>assistant\n<|voice|>")


def test_control_tokens_in_text_are_refused(tokenizer):
    with pytest.raises(ControlTokenInText, match="<\\|im_end\\|>"):
        text_only_prompt(tokenizer, "hi <|im_end|>", 10)
    with pytest.raises(ControlTokenInText):
        clone_prompt(tokenizer, "hi", "ref <|voice|>", torch.zeros(1, 10, dtype=torch.long), START)
