"""Which request fields Gepard-1.0 honours, as the peer serves it, and how a request becomes the talker's input.

Zero-shot only: the one voice is "default" (any other name is an unknown voice, 404, as on every family; voice cloning
is not available upstream yet). Sampling is fixed in-model (temperature and stop threshold from the checkpoint's
sidecar), so only `seed` and `max_new_tokens` (a frame budget, 1 to 4096; default 1000 frames, ~46 s, the peer's
backstop for a stop head that does not fire on every batched trajectory) are taken; other fields follow the server's
field policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from vocalis.stages.api.standard_adapter import StandardAdapter, Voices
from vocalis.stages.runtime.request import RequestParams
from vocalis.stages.runtime.sampling import SamplingParams

DEFAULT_MAX_NEW_TOKENS = 1000


@dataclass(frozen=True, eq=False)
class GepardInput:
    sampling: SamplingParams
    """seed and the frame budget (max_new_tokens); the heads' temperature is the checkpoint's."""


class GepardAdapter(StandardAdapter[GepardInput]):
    MODEL = "Gepard"

    def __init__(self, sample_rate: int) -> None:
        super().__init__(sample_rate=sample_rate, voices=Voices.single(), fields={"seed", "max_new_tokens"})

    def stage_input(self, params: RequestParams) -> GepardInput:
        request = self.prologue(params)
        return GepardInput(SamplingParams(max_new_tokens=request.max_new_tokens or DEFAULT_MAX_NEW_TOKENS, seed=request.seed))
