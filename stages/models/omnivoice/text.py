"""The text side of OmniVoice: languages, voice-design attributes, prompt tokens, and long-text units.

A prompt is a style part (`<|denoise|>` when cloning, the language, the voice-design
instruction) then the text part (`<|text_start|>` reference transcript + text `<|text_end|>`),
each token repeated on every codebook row, followed by the reference's codes and the masked
frames to generate. Non-verbal tags such as `[laughter]` are tokenized on their own so that
their ids do not depend on the words around them.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from vocalis.stages.text.sentence_splitter import Granularity, SentenceSplitter

LANGUAGES_FILE = Path(__file__).with_name("languages.json")
NO_LANGUAGE = ("", "auto", "none")
"""Values of `language` that mean: let the model tell from the text."""

_NONVERBAL = re.compile(
    r"\[(laughter|sigh|confirmation-en|question-en|question-ah|question-oh|question-ei|question-yi|"
    r"surprise-ah|surprise-oh|surprise-wa|surprise-yo|dissatisfaction-hnn)\]"
)
_CJK = re.compile(r"[\u4e00-\u9fff]")
END_PUNCTUATION = frozenset(";:,.!?…)]}\"'“”‘’；：，。！？、）】") | {"……"}


# -- languages ------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def language_table() -> tuple[tuple[str, str], ...]:
    """(display name, ISO 639 code) of every language the model was trained on."""
    rows = json.loads(LANGUAGES_FILE.read_text(encoding="utf-8"))["languages"]
    return tuple((name, code) for name, code in rows)


@lru_cache(maxsize=1)
def _language_index() -> dict[str, str]:
    index = {code: code for _, code in language_table()}
    index.update({name.lower(): code for name, code in language_table()})
    return index


def language_code(language: str) -> str | None:
    """The ISO code the model knows `language` by (a code or a name, any case); None for auto.

    Raises KeyError when the model does not know the language.
    """
    key = language.strip()
    if key.lower() in NO_LANGUAGE:
        return None
    index = _language_index()
    if key in index:
        return index[key]
    return index[key.lower()]


# -- voice design ---------------------------------------------------------------------------

# Attributes the model was trained to follow, English with its Chinese form; one per category.
_CATEGORIES_EN_ZH = (
    {"male": "男", "female": "女"},
    {"child": "儿童", "teenager": "少年", "young adult": "青年", "middle-aged": "中年", "elderly": "老年"},
    {"very low pitch": "极低音调", "low pitch": "低音调", "moderate pitch": "中音调", "high pitch": "高音调", "very high pitch": "极高音调"},
    {"whisper": "耳语"},
)
ACCENTS = frozenset(
    f"{name} accent"
    for name in ("american", "british", "australian", "chinese", "canadian", "indian", "korean", "portuguese", "russian", "japanese")
)
"""English-only attributes."""
DIALECTS = frozenset(f"{place}话" for place in ("河南", "陕西", "四川", "贵州", "云南", "桂林", "济南", "石家庄", "甘肃", "宁夏", "青岛", "东北"))
"""Chinese-only attributes."""
_TO_ZH = {en: zh for category in _CATEGORIES_EN_ZH for en, zh in category.items()}
_TO_EN = {zh: en for en, zh in _TO_ZH.items()}
_EXCLUSIVE = [set(c) | set(c.values()) for c in _CATEGORIES_EN_ZH] + [set(ACCENTS), set(DIALECTS)]
VOICE_ATTRIBUTES = frozenset(_TO_ZH) | frozenset(_TO_EN) | ACCENTS | DIALECTS


class InvalidInstruction(ValueError):
    """A voice-design instruction the model cannot follow."""


def normalize_instruction(instruction: str, text: str) -> str | None:
    """The instruction as the model was trained on it: known attributes, one language, one per category.

    Items are separated by commas (half or full width); English items are case-insensitive.
    A Chinese dialect makes the whole instruction Chinese, an accent English; otherwise it
    follows the text (Chinese text: Chinese attributes). Raises InvalidInstruction.
    """
    stripped = instruction.strip()
    if not stripped:
        return None
    items = [item.strip().lower() for item in re.split(r"\s*[,，]\s*", stripped) if item.strip()]
    unknown = [item for item in items if item not in VOICE_ATTRIBUTES]
    if unknown:
        hints = []
        for item in unknown:
            close = difflib.get_close_matches(item, sorted(VOICE_ATTRIBUTES), n=1, cutoff=0.6)
            hints.append(f"{item!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        english = ", ".join(sorted(a for a in VOICE_ATTRIBUTES if not _CJK.search(a)))
        raise InvalidInstruction(f"unsupported voice attributes: {', '.join(hints)}; supported: {english}, or their Chinese forms")
    dialect = any(item in DIALECTS for item in items)
    accent = any(item in ACCENTS for item in items)
    if dialect and accent:
        raise InvalidInstruction("a Chinese dialect and an English accent cannot be combined")
    chinese = True if dialect else False if accent else bool(_CJK.search(text))
    items = [_TO_ZH.get(item, item) if chinese else _TO_EN.get(item, item) for item in items]
    for category in _EXCLUSIVE:
        hits = [item for item in items if item in category]
        if len(hits) > 1:
            raise InvalidInstruction(f"conflicting voice attributes: {' vs '.join(repr(h) for h in hits)} (one per category)")
    separator = "，" if any(_CJK.search(item) for item in items) else ", "
    return separator.join(items)


# -- text clean-up ----------------------------------------------------------------------------


def add_punctuation(text: str) -> str:
    """A transcript ends with punctuation (a reference's, so that the text after it starts afresh)."""
    text = text.strip()
    if text and text[-1] not in END_PUNCTUATION:
        text += "。" if _CJK.search(text) else "."
    return text


def combine_text(text: str, ref_text: str | None = None) -> str:
    """Reference transcript and text as one string, with the whitespace the model was trained on."""
    full = f"{ref_text.strip()} {text.strip()}" if ref_text else text.strip()
    full = re.sub(r"[\r\n]+", "", full)
    full = full.replace("\uff08", "(").replace("\uff09", ")")
    full = re.sub(r"[ \t]+", " ", full)
    return re.sub(r"(?<=[\u4e00-\u9fff])\s+|\s+(?=[\u4e00-\u9fff])", "", full)


# -- tokens -----------------------------------------------------------------------------------


class TextTokenizer:
    """tokenizer.json through the `tokenizers` library."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        for token in ("<|lang_start|>", "<|lang_end|>", "<|instruct_start|>", "<|instruct_end|>", "<|text_start|>", "<|text_end|>", "<|denoise|>"):
            if self.tokenizer.token_to_id(token) is None:
                raise ValueError(f"{path / 'tokenizer.json'} has no {token} token: not an OmniVoice tokenizer")

    def encode(self, text: str, special: bool = True) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=special).ids

    def style_ids(self, language: str | None, instruction: str | None, denoise: bool) -> list[int]:
        style = "<|denoise|>" if denoise else ""
        style += f"<|lang_start|>{language or 'None'}<|lang_end|>"
        style += f"<|instruct_start|>{instruction or 'None'}<|instruct_end|>"
        return self.encode(style)

    def text_ids(self, text: str, ref_text: str | None) -> list[int]:
        wrapped = f"<|text_start|>{combine_text(text, ref_text)}<|text_end|>"
        ids: list[int] = []
        last = 0
        for match in _NONVERBAL.finditer(wrapped):
            if match.start() > last:
                ids += self.encode(wrapped[last : match.start()], special=False)
            ids += self.encode(match.group(), special=False)
            last = match.end()
        if last < len(wrapped):
            ids += self.encode(wrapped[last:], special=False)
        return ids or self.encode(wrapped)


@dataclass(frozen=True)
class Prompt:
    """One unit's model input: ids [C, L] and which positions are audio."""

    ids: torch.Tensor
    audio_mask: torch.Tensor
    target_frames: int
    """The last target_frames positions are the frames to generate (all mask ids at first)."""


def build_prompt(
    tokenizer: TextTokenizer,
    num_codebooks: int,
    mask_id: int,
    text: str,
    target_frames: int,
    language: str | None,
    instruction: str | None,
    ref_text: str | None = None,
    ref_codes: torch.Tensor | None = None,
    denoise: bool = True,
) -> Prompt:
    style = tokenizer.style_ids(language, instruction, denoise and ref_codes is not None)
    words = tokenizer.text_ids(text, ref_text)
    text_part = torch.tensor(style + words, dtype=torch.long)[None, :].expand(num_codebooks, -1)
    parts = [text_part]
    if ref_codes is not None:
        parts.append(ref_codes.to(torch.long))
    parts.append(torch.full((num_codebooks, target_frames), mask_id, dtype=torch.long))
    ids = torch.cat(parts, dim=1)
    audio_mask = torch.zeros(ids.shape[1], dtype=torch.bool)
    audio_mask[text_part.shape[1] :] = True
    return Prompt(ids, audio_mask, target_frames)


# -- long texts -----------------------------------------------------------------------------


MIN_UNIT_CHARS = 3
"""A shorter unit is merged into its neighbour."""
LONGEST_CLAUSE = 4
"""A clause is cut at a space only beyond this many times max_chars: a long sentence stays whole, as the
reference keeps it, but a run-on text without punctuation cannot make one unit too long to speak."""


def split_units(text: str, max_chars: int) -> list[str]:
    """`text` as units of about max_chars characters at most, cut at sentence and clause ends.

    Clauses come from the SentenceSplitter (so "3.14", "Dr. Smith" and "e.g." stay whole);
    consecutive ones are merged while the merged span, counted from the end of the unit before,
    stays within max_chars. A clause longer than LONGEST_CLAUSE * max_chars is cut at a space.
    Every character of the text but whitespace between units is in exactly one unit, in order.
    """
    splitter = SentenceSplitter(
        Granularity.CLAUSE, max_unit_chars=max(LONGEST_CLAUSE * max_chars, 1), idle_flush_s=None, min_clause_chars=0
    )
    pieces = splitter.feed(text) + splitter.flush()
    units: list[list[int]] = []  # [span start (after the unit before), text start, end]
    previous_end = 0
    for piece in pieces:
        if units and piece.end - units[-1][0] <= max_chars:
            units[-1][2] = piece.end
        else:
            units.append([previous_end, piece.start, piece.end])
        previous_end = piece.end
    merged: list[list[int]] = []
    for unit in units:
        short = unit[2] - unit[1] < MIN_UNIT_CHARS
        if merged and (short or merged[-1][2] - merged[-1][1] < MIN_UNIT_CHARS and len(merged) == 1):
            merged[-1][2] = unit[2]
        else:
            merged.append(unit)
    return [text[start:end] for _, start, end in merged]
