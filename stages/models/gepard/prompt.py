"""Gepard's prompt: speaker slots, then the text block (repeated when short), the last copy ending on start-of-speech.

`[speaker slots] + [SOT, text, EOT] * (R - 1) + [SOT, text, EOT, SOS]`. Only the last copy carries SOS, where the
first frame is sampled. A text shorter than both `apply_below` and `target_text_tokens` tokens is repeated
R = min(ceil(target / n), max_repeats) times (a few tokens carry too little weight against the speaker prefix);
the thresholds are the checkpoint's (`text_repetition`), as the model was trained with them.
"""

from __future__ import annotations

import math

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.models.gepard.config import GepardConfig


def repeats(num_tokens: int, config: GepardConfig) -> int:
    short = num_tokens < config.repetition_apply_below and num_tokens < config.repetition_target_tokens
    if not config.repetition_enabled or not short:
        return 1
    return max(1, min(math.ceil(config.repetition_target_tokens / num_tokens), config.repetition_max_repeats))


def prompt_ids(text_ids: list[int], config: GepardConfig) -> list[int]:
    if not text_ids:
        raise InvalidField("text", "NOTHING_TO_SPEAK", "the text has no tokens to speak: give words the model can read")
    block = [config.start_of_text, *text_ids, config.end_of_text]
    slots = [config.speaker_token_base + i for i in range(config.num_speaker_prefix)]
    return slots + block * (repeats(len(text_ids), config) - 1) + block + [config.start_of_speech]
