"""How many audio frames a text needs: a speaking-time weight per character, scaled by a reference.

OmniVoice generates a fixed number of frames, chosen before decoding. Each character weighs
what it takes to say relative to one Latin letter (a CJK character a syllable, digits a word,
marks nothing); the frames of a text are its weight divided by the reference's weight per frame
(the clip being cloned, else a built-in "Nice to meet you." of 25 frames). Short texts are
stretched by a power curve so that a word or two still gets time to be spoken.
"""

from __future__ import annotations

import bisect
import unicodedata
from functools import lru_cache

DEFAULT_REF_TEXT = "Nice to meet you."
DEFAULT_REF_FRAMES = 25
SHORT_FRAMES = 50.0
"""Estimates under this many frames are stretched..."""
SHORT_BOOST = 3.0
"""...by the 1/SHORT_BOOST power of their fraction of SHORT_FRAMES."""

WEIGHTS = {
    "cjk": 3.0, "hangul": 2.5, "kana": 2.2, "ethiopic": 3.0, "yi": 3.0,
    "indic": 1.8, "thai_lao": 1.5, "khmer_myanmar": 1.8, "arabic": 1.5, "hebrew": 1.5,
    "latin": 1.0, "cyrillic": 1.0, "greek": 1.0, "armenian": 1.0, "georgian": 1.0,
    "punctuation": 0.5, "space": 0.2, "digit": 3.5, "mark": 0.0, "default": 1.0,
}

# Unicode blocks by their last code point, in order: a character belongs to the first block
# whose end is at or after it.
_BLOCKS = (
    (0x02AF, "latin"), (0x03FF, "greek"), (0x052F, "cyrillic"), (0x058F, "armenian"), (0x05FF, "hebrew"),
    (0x08FF, "arabic"), (0x0DFF, "indic"), (0x0EFF, "thai_lao"), (0x0FFF, "indic"), (0x109F, "khmer_myanmar"),
    (0x10FF, "georgian"), (0x11FF, "hangul"), (0x139F, "ethiopic"), (0x177F, "default"), (0x17FF, "khmer_myanmar"),
    (0x18FF, "default"), (0x19DF, "indic"), (0x19FF, "khmer_myanmar"), (0x1C7F, "indic"), (0x1C8F, "cyrillic"),
    (0x1CBF, "georgian"), (0x1CFF, "indic"), (0x1DBF, "latin"), (0x1DFF, "default"), (0x1EFF, "latin"),
    (0x30FF, "kana"), (0x312F, "cjk"), (0x318F, "hangul"), (0x9FFF, "cjk"), (0xA4CF, "yi"),
    (0xA4FF, "default"), (0xA63F, "default"), (0xA69F, "cyrillic"), (0xA6FF, "default"), (0xA7FF, "latin"),
    (0xA82F, "indic"), (0xA87F, "default"), (0xA8FF, "indic"), (0xA95F, "indic"), (0xA97F, "hangul"),
    (0xA9DF, "indic"), (0xA9FF, "khmer_myanmar"), (0xAA5F, "indic"), (0xAA7F, "khmer_myanmar"), (0xAAFF, "indic"),
    (0xAB2F, "ethiopic"), (0xAB6F, "latin"), (0xABBF, "default"), (0xABFF, "indic"), (0xD7AF, "hangul"),
    (0xFAFF, "cjk"), (0xFDFF, "arabic"), (0xFE6F, "default"), (0xFEFF, "arabic"), (0xFFEF, "latin"),
)
_ENDS = [end for end, _ in _BLOCKS]


@lru_cache(maxsize=8192)
def char_weight(char: str) -> float:
    code = ord(char)
    if 0x41 <= code <= 0x5A or 0x61 <= code <= 0x7A:
        return WEIGHTS["latin"]
    if code == 0x20:
        return WEIGHTS["space"]
    if code == 0x0640:  # Arabic tatweel: stretches a letter, takes no time
        return WEIGHTS["mark"]
    category = unicodedata.category(char)
    if category[0] == "M":
        return WEIGHTS["mark"]
    if category[0] in "PS":
        return WEIGHTS["punctuation"]
    if category[0] == "Z":
        return WEIGHTS["space"]
    if category[0] == "N":
        return WEIGHTS["digit"]
    index = bisect.bisect_left(_ENDS, code)
    if index < len(_BLOCKS):
        return WEIGHTS[_BLOCKS[index][1]]
    if code > 0x20000:  # CJK extensions in the upper planes
        return WEIGHTS["cjk"]
    return WEIGHTS["default"]


def text_weight(text: str) -> float:
    return sum(char_weight(c) for c in text)


def estimate_frames(text: str, ref_text: str | None = None, ref_frames: int | None = None, speed: float = 1.0) -> int:
    """Frames to generate for `text`, given a reference of `ref_frames` frames saying `ref_text`."""
    if not ref_text or not ref_frames:
        ref_text, ref_frames = DEFAULT_REF_TEXT, DEFAULT_REF_FRAMES
    estimate = 0.0
    ref_weight = text_weight(ref_text)
    if ref_frames > 0 and ref_weight > 0:
        estimate = text_weight(text) / (ref_weight / ref_frames)
        if estimate < SHORT_FRAMES:
            estimate = SHORT_FRAMES * (estimate / SHORT_FRAMES) ** (1.0 / SHORT_BOOST)
    if speed > 0 and speed != 1.0:
        estimate = estimate / speed
    return max(1, int(estimate))
