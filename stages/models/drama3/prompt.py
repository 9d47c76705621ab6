"""Drama 3's prompts in the `reference-bracket-v1` layout, as frame rows [P, 1 + K] (column 0 the token id, the
rest the frame's codes at audio rows and zeros elsewhere):

  <|im_start|>system\\n + "convert the provided text to speech" (no references)
                      or "convert the provided text to speech reference to the following:"
    and per reference i: "\\n\\n[Reference i]\\nText: {transcript}\\nSpeech: " + one row per reference frame
    (token <|semantic:code0|>, codes beside it)
  <|im_end|>\\n <|im_start|>user\\n {text} <|im_end|>\\n <|im_start|>assistant\\n<|voice|>

Each literal and each caller text is tokenised on its own (joining them first would change ids at the seams). A
text or transcript without a leading speaker tag gets `<|speaker:0|> ` in front; a transcript's leading tag moves
ahead of any white space so that it follows "Text: " directly.

Caller text is content, checked before it is used: not empty, none of the structural tokens only the builder
writes, speaker tags spelled `<|speaker:N|>` with N in 0..15 (no leading zero), and `<whisper>` ... `</whisper>`
paired (not nested). `[direction]` cues and language or phoneme tags are content the model reads as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from tokenizers import Tokenizer

TTS_INSTRUCTION = "convert the provided text to speech"
REFERENCE_INSTRUCTION = "convert the provided text to speech reference to the following:"
MESSAGE_END = "<|im_end|>\n"
GENERATION_START = "<|im_start|>assistant\n<|voice|>"
SEMANTIC_ZERO = "<|semantic:0|>"
STRUCTURAL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|voice|>", "<|text|>", "<|interleave|>", "<|semantic:")
MAX_SPEAKER = 15
SPEAKER_TAG = re.compile(r"<\|speaker:(0|[1-9][0-9]*)\|>")
WHISPER = re.compile(r"</?whisper>")
# Unicode White_Space (str.strip() with no argument also strips U+001C..U+001F, which are not white space)
WHITE_SPACE = "".join(map(chr, (*range(0x9, 0xE), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
                                0x202F, 0x205F, 0x3000)))


class PromptTextError(ValueError):
    """Caller text the builder refuses; `where` names the field (input, ref_text / references.N)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


@dataclass(frozen=True)
class Reference:
    """A voice to clone: the clip's transcript and its codec frames [F, K]."""

    transcript: str
    codes: torch.Tensor


def check_text(text: str, where: str) -> None:
    if not text.strip(WHITE_SPACE):
        raise PromptTextError(where, "the text is empty")
    for token in STRUCTURAL_TOKENS:
        if token in text:
            raise PromptTextError(where, f"{token} is written by the prompt builder and must not appear in the text")
    for marker in re.finditer(r"<\|speaker", text):
        tag = SPEAKER_TAG.match(text, marker.start())
        if tag is None or int(tag[1]) > MAX_SPEAKER:
            shown = text[marker.start(): marker.start() + 16]
            raise PromptTextError(where, f"speaker tags are <|speaker:0|> to <|speaker:{MAX_SPEAKER}|> (no leading zero); "
                                         f"got {shown!r}")
    open_at = None
    for tag in WHISPER.finditer(text):
        if tag[0] == "<whisper>":
            if open_at is not None:
                raise PromptTextError(where, "<whisper> opened again before its </whisper>")
            open_at = tag.start()
        elif open_at is None:
            raise PromptTextError(where, "</whisper> without a <whisper> before it")
        else:
            open_at = None
    if open_at is not None:
        raise PromptTextError(where, "<whisper> without its closing </whisper>")


def with_speaker(text: str) -> str:
    """`text`, led by `<|speaker:0|> ` unless a speaker tag already leads it (after white space)."""
    return text if SPEAKER_TAG.match(text.lstrip(WHITE_SPACE)) else f"<|speaker:0|> {text}"


def transcript_line(transcript: str) -> str:
    tagged = with_speaker(transcript)
    body = tagged.lstrip(WHITE_SPACE)
    tag = SPEAKER_TAG.match(body)
    assert tag is not None
    return tag[0] + tagged[: len(tagged) - len(body)] + body[tag.end():]


def build_prompt(tokenizer: Tokenizer, text: str, references: list[Reference], num_codebooks: int,
                 codebook_size: int, reference_field: str = "references") -> torch.Tensor:
    """Rows [P, 1 + num_codebooks] (int64, CPU) of the prompt that ends where the first frame is sampled."""
    semantic_zero = tokenizer.token_to_id(SEMANTIC_ZERO)
    if semantic_zero is None:
        raise ValueError(f"tokenizer.json has no {SEMANTIC_ZERO} token")
    segments: list[str | torch.Tensor] = ["<|im_start|>system\n", REFERENCE_INSTRUCTION if references else TTS_INSTRUCTION]
    for index, reference in enumerate(references):
        where = f"{reference_field}.{index}" if len(references) > 1 else reference_field
        check_text(reference.transcript, where)
        codes = reference.codes
        if codes.ndim != 2 or codes.shape[1] != num_codebooks or codes.shape[0] == 0:
            raise PromptTextError(where, f"reference codes must be [frames, {num_codebooks}]; got {list(codes.shape)}")
        if int(codes.min()) < 0 or int(codes.max()) >= codebook_size:
            raise PromptTextError(where, f"reference codes must be in [0, {codebook_size})")
        segments += [f"\n\n[Reference {index + 1}]\nText: {transcript_line(reference.transcript)}\nSpeech: ", codes]
    check_text(text, "input")
    segments += [MESSAGE_END, "<|im_start|>user\n", with_speaker(text), MESSAGE_END, GENERATION_START]
    rows = []
    for segment in segments:
        if isinstance(segment, str):
            ids = torch.tensor(tokenizer.encode(segment, add_special_tokens=False).ids, dtype=torch.long)
            part = torch.zeros(len(ids), 1 + num_codebooks, dtype=torch.long)
            part[:, 0] = ids
        else:
            codes = segment.long().cpu()
            part = torch.cat([codes[:, :1] + semantic_zero, codes], dim=1)
        rows.append(part)
    return torch.cat(rows)
