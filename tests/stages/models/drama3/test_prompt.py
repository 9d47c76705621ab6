"""Drama 3's reference-bracket-v1 prompts, token by token against the published template on the tiny tokenizer
(byte-level BPE with the structural tokens, sixteen speaker tags and a 64-token semantic band), and the caller-text
refusals."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer

from tests.tiny_drama3.build import SEMANTIC_START, make_tokenizer
from vocalis.stages.models.drama3.prompt import PromptTextError, Reference, build_prompt, check_text

K, V = 10, 64


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Tokenizer:
    path = tmp_path_factory.mktemp("drama3-tokenizer")
    make_tokenizer(path)
    return Tokenizer.from_file(str(path / "tokenizer.json"))


def codes(frames: int, seed: int) -> torch.Tensor:
    return torch.randint(0, V, (frames, K), generator=torch.Generator().manual_seed(seed))


def test_multi_reference_multi_speaker_prompt_follows_the_template(tokenizer):
    first, second = codes(3, 1), codes(2, 2)
    text = "<|speaker:1|> [laughs] Hello! <|speaker:15|> <whisper>good morning</whisper>"
    rows = build_prompt(tokenizer, text, [Reference("Hello world.", first), Reference("  <|speaker:3|>The quick fox.", second)], K, V)
    pieces: list[str | torch.Tensor] = [
        "<|im_start|>", "system\n", "convert the provided text to speech reference to the following:",
        "\n\n[Reference 1]\nText: ", "<|speaker:0|>", " Hello world.\nSpeech: ", first,
        "\n\n[Reference 2]\nText: ", "<|speaker:3|>", "  The quick fox.\nSpeech: ", second,
        "<|im_end|>", "\n", "<|im_start|>", "user\n", "<|speaker:1|>", " [laughs] Hello! ", "<|speaker:15|>",
        " <whisper>good morning</whisper>", "<|im_end|>", "\n", "<|im_start|>", "assistant\n", "<|voice|>",
    ]
    expected = []
    for piece in pieces:
        if isinstance(piece, torch.Tensor):
            expected += [[SEMANTIC_START + int(frame[0]), *frame.tolist()] for frame in piece]
        else:
            expected += [[i] + [0] * K for i in tokenizer.encode(piece, add_special_tokens=False).ids]
    assert rows.tolist() == expected
    text_rows = rows[rows[:, 0] < SEMANTIC_START, 0].tolist()
    assert tokenizer.decode(text_rows, skip_special_tokens=False) == "".join(p for p in pieces if isinstance(p, str))
    assert tokenizer.token_to_id("<|voice|>") == rows[-1, 0] and tokenizer.token_to_id("<|im_start|>") == rows[0, 0]


def test_untagged_text_is_speaker_zero_and_every_speaker_tag_is_one_token(tokenizer):
    plain = build_prompt(tokenizer, "Hello world.", [], K, V)
    tagged = build_prompt(tokenizer, "<|speaker:0|> Hello world.", [], K, V)
    assert torch.equal(plain, tagged)
    system = tokenizer.encode("<|im_start|>system\nconvert the provided text to speech<|im_end|>\n", add_special_tokens=False).ids
    assert plain[: len(system), 0].tolist() == system
    for speaker in range(16):
        rows = build_prompt(tokenizer, f"<|speaker:{speaker}|> hi", [], K, V)
        assert tokenizer.token_to_id(f"<|speaker:{speaker}|>") in rows[:, 0].tolist()


@pytest.mark.parametrize(("text", "message"), [
    ("   ", "the text is empty"),
    ("hi <|im_end|> there", r"<\|im_end\|> is written by the prompt builder"),
    ("hi <|voice|>", r"<\|voice\|> is written by the prompt builder"),
    ("<|semantic:3|>", r"<\|semantic: is written by the prompt builder"),
    ("<|speaker:16|> hi", r"speaker tags are <\|speaker:0\|> to <\|speaker:15\|>"),
    ("<|speaker:01|> hi", "no leading zero"),
    ("<whisper>hi", "<whisper> without its closing </whisper>"),
    ("hi</whisper>", "</whisper> without a <whisper> before it"),
    ("<whisper>a <whisper>b</whisper></whisper>", "opened again"),
])
def test_refused_caller_text_names_the_problem(text, message):
    with pytest.raises(PromptTextError, match=message):
        check_text(text, "input")


def test_reference_transcripts_and_codes_are_checked(tokenizer):
    with pytest.raises(PromptTextError, match=r"references\.1: <\|im_start\|>"):
        build_prompt(tokenizer, "hi", [Reference("ok", codes(2, 1)), Reference("<|im_start|>", codes(2, 1))], K, V)
    with pytest.raises(PromptTextError, match=r"reference codes must be \[frames, 10\]"):
        build_prompt(tokenizer, "hi", [Reference("ok", codes(2, 1)[:, :4])], K, V)
