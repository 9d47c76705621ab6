"""Which request fields Voxtral TTS honours, and how a request becomes its stage-0 input (the peer's rules, §5.9):
`voice` (a preset, lower-cased) is required unless `ref_audio` is given; `ref_audio` (or an uploaded voice) clones only
with the audio tokenizer's encoder, which the open release lacks (a 400 saying so), and a preset `voice` beside it wins; `max_new_tokens` caps the frames; `seed` seeds
the flow's noise; `extra_params.cfg_alpha` sets the flow's guidance (the peer's deploy: 1.2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.standard_adapter import StandardAdapter, Voices
from vocalis.stages.runtime.request import RequestParams

DEFAULT_CFG_ALPHA = 1.2
VOICE_REQUIRED = "Either 'voice' (preset speaker) or 'ref_audio' (voice cloning) must be provided"
NO_ENCODER = ("Voice cloning with 'ref_audio' requires the full Voxtral checkpoint with encoder weights. "
              "The open-source variant only supports preset voices via the 'voice' parameter.")


@dataclass(frozen=True, eq=False)
class VoxtralInput:
    voice: str
    """The preset ("" when `reference` clones a voice)."""
    reference: tuple[np.ndarray, int] | None = None
    """A clip to clone (mono float32 samples, rate), encoded on the stage thread; only with the encoder's weights."""
    cfg_alpha: float = DEFAULT_CFG_ALPHA
    seed: int | None = None
    max_new_tokens: int | None = None
    noise: torch.Tensor | None = None
    """Flow start noise to inject, [frames, 36] (tests); None draws it."""


class VoxtralAdapter(StandardAdapter[VoxtralInput]):
    MODEL = "Voxtral TTS"
    EXTRA_PARAMS = ExtraParams(MODEL, [
        ExtraParam("cfg_alpha", float, "Classifier-free guidance of the acoustic flow, 0 to 10 (default 1.2, the peer's deploy).",
                   minimum=0, maximum=10),
    ])

    def __init__(self, voices: tuple[str, ...], sample_rate: int, encoder_weights: bool) -> None:
        self.encoder_weights = encoder_weights
        # No default voice: a preset must be named unless ref_audio clones (VOICE_REQUIRED); no ReferencePolicy, as
        # the clip is this adapter's to check (the preset wins beside it, and the open release cannot clone).
        super().__init__(sample_rate=sample_rate, voices=Voices.preset(voices),
                         fields={"seed", "max_new_tokens", "ref_audio"}, voice_cloning=encoder_weights, preset_over_reference=True)

    def stage_input(self, params: RequestParams) -> VoxtralInput:
        reference = params.reference  # inline ref_audio, or a stored (uploaded) voice, which clones from its audio too
        if reference is not None and not self.encoder_weights:
            raise InvalidField("voice" if reference.name else "ref_audio", "VOICE_CLONING_UNAVAILABLE", NO_ENCODER)
        clip = None
        if reference is not None and not params.voice:  # with both, the preset wins (as the peer)
            if reference.samples is None or len(reference.samples) == 0:
                raise InvalidField("voice" if reference.name else "ref_audio", "VOICE_NOT_SUPPORTED", "the voice has no audio to clone")
            clip = (np.asarray(reference.samples, dtype=np.float32), int(reference.sample_rate))
        elif not params.voice:
            raise InvalidField("voice", "VOICE_REQUIRED", VOICE_REQUIRED)
        request = self.prologue(params)
        return VoxtralInput(voice=params.voice, reference=clip, cfg_alpha=request.extra.get("cfg_alpha", DEFAULT_CFG_ALPHA),
                            seed=request.seed, max_new_tokens=request.max_new_tokens)
