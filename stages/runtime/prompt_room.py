"""The rule of prompt against cache room, decided once for every family (the runtime's, never a family's).

An autoregressive stage's cache holds `max_len` positions per sequence: the prompt, any input the model feeds in
while it generates, then the frames. An input that leaves no room to generate is the caller's to fix (400
PROMPT_TOO_LONG, naming the text); a `max_new_tokens` past the room is capped, as vLLM's engine stops a sequence at
max_model_len, and the caller hears of it (MAX_NEW_TOKENS_CAPPED) when the value cut was its own rather than the
model's default.
"""

from __future__ import annotations

from dataclasses import replace

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.max_new_tokens import CAPPED
from vocalis.stages.runtime.request import SynthesisRequest
from vocalis.stages.runtime.sampling import SamplingParams

PROMPT_TOO_LONG = "PROMPT_TOO_LONG"
"""The reason a request is refused when its input alone fills the stage's cache."""


def fit_prompt(stage: str, max_len: int, capacity: int, request: SynthesisRequest, prompt_len: int, fed: int,
               params: SamplingParams) -> SamplingParams:
    """`params` with max_new_tokens within the room a `prompt_len`-position prompt (and `fed` positions fed in during
    generation) leaves in `stage`'s cache of `max_len` positions a sequence and `capacity` in all; raises
    InvalidField PROMPT_TOO_LONG when it leaves none."""
    needed = prompt_len + fed
    if needed >= max_len:
        raise InvalidField(
            "text", PROMPT_TOO_LONG,
            f"the prompt is {needed} positions (input text plus any reference text and speaker prompt) but "
            f"{stage}'s cache holds {max_len}, which leaves no room to generate: use a shorter input or "
            f"reference, or deploy with a larger max_len (--stage-overrides '{{\"{stage}\": {{\"max_len\": N}}}}')",
        )
    if needed >= capacity:
        raise InvalidField(
            "text", PROMPT_TOO_LONG,
            f"the prompt is {needed} positions but {stage}'s KV cache holds {capacity} in all, which leaves no "
            f"room to generate: use a shorter input or reference, or raise the stage's kv_cache_bytes",
        )
    room = max_len - prompt_len
    if params.max_new_tokens <= room:
        return params
    asked = request.max_new_tokens
    if asked is not None and asked > room:
        request.warn("max_new_tokens", CAPPED, f"max_new_tokens {asked} is capped by {stage}'s {max_len}-position "
                                               f"cache: the prompt takes {prompt_len}, so generation ends at {room} tokens")
    return replace(params, max_new_tokens=room)
