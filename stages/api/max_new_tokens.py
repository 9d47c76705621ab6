"""`max_new_tokens` as vLLM-Omni's clients use it: a cap from 1 to 4096 on every family, never a promise.

The peer's adapters accept 1..4096 for every family (its base rule) and its engine stops a sequence when the
model's context is full, so clients send 4096 to mean "no limit of mine" (the GLM-TTS demo always does). A family
whose KV cache holds fewer positions accepts the value all the same, stops when the cache is full, and says so in a
warning (code MAX_NEW_TOKENS_CAPPED) rather than refusing the request: the runtime alone decides that, from the
prompt's real length (stages/runtime/prompt_room.py), for every family.
"""

from __future__ import annotations

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.runtime.request import RequestParams

PEER_MAX_NEW_TOKENS = 4096
"""The peer's upper bound on max_new_tokens (`TA/base`: 1..4096)."""
CAPPED = "MAX_NEW_TOKENS_CAPPED"


def checked_max_new_tokens(params: RequestParams, upper: int = PEER_MAX_NEW_TOKENS) -> int:
    """The request's max_new_tokens, checked against 1..`upper` (the cap by the cache is the runtime's)."""
    value = params.fields["max_new_tokens"]
    if not 1 <= value <= upper:
        raise InvalidField("max_new_tokens", "OUT_OF_RANGE", f"max_new_tokens must be from 1 to {upper}, got {value}")
    return int(value)
