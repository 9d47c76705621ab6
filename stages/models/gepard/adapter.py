"""Which request fields Gepard-1.0 honours, as the peer serves it, and how a request becomes the talker's input.

Zero-shot only: the voice is "default" (any other is a 400: voice cloning is not available upstream yet). Sampling
is fixed in-model (temperature and stop threshold from the checkpoint's sidecar), so only `seed` and
`max_new_tokens` (a frame budget, 1 to 4096; default 1000 frames, ~46 s, the peer's backstop for a stop head that
does not fire on every batched trajectory) are taken; other fields follow the server's field policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.max_new_tokens import checked_max_new_tokens
from vocalis.stages.api.model import Capabilities
from vocalis.stages.runtime.request import RequestParams
from vocalis.stages.runtime.sampling import SamplingParams

VOICE = "default"
DEFAULT_MAX_NEW_TOKENS = 1000


@dataclass(frozen=True, eq=False)
class GepardInput:
    sampling: SamplingParams
    """seed and the frame budget (max_new_tokens); the heads' temperature is the checkpoint's."""


class GepardAdapter:
    def __init__(self, sample_rate: int, positions: int | None = None) -> None:
        self.positions = positions
        """The talker's KV cache length, which ends generation before a larger max_new_tokens does."""
        self.capabilities = Capabilities(
            sample_rate=sample_rate,
            voices=(VOICE,),
            default_voice=VOICE,
            accepted_fields=frozenset({"seed", "max_new_tokens"}),
            streaming=True,
            voice_cloning=False,
            fixed_voices=True,
        )

    def resolve_voice(self, voice: str) -> str:
        if voice.lower() in ("", VOICE):
            return VOICE
        raise InvalidField("voice", "VOICE_NOT_SUPPORTED",
                           f"invalid voice {voice!r}; Gepard supports only 'default' (voice cloning from reference audio is not available yet)")

    def stage_input(self, params: RequestParams) -> GepardInput:
        fields = params.fields
        frames = DEFAULT_MAX_NEW_TOKENS
        if "max_new_tokens" in fields:
            frames = checked_max_new_tokens(params, self.positions)
        seed = int(fields["seed"]) if "seed" in fields else None
        return GepardInput(SamplingParams(max_new_tokens=int(frames), seed=seed))
