"""Which request fields CosyVoice3 honours, and how a request becomes its stage-0 input.

Every request clones: `ref_audio` + `ref_text`, or a stored voice with its transcript (400 otherwise, with the peer's
messages). Sampling is RAS by default (top_p 0.8, top_k 25, window 10, as published); `extra_params.sampler =
"standard"` switches to temperature/top-k/top-p with a repetition penalty (the peer's H200 profile: 0.7, 20, 0.8, 1.21).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vocalis.stages.api.errors import InvalidField, UnknownVoice
from vocalis.stages.api.extra_params import ExtraParam, ExtraParams
from vocalis.stages.api.max_new_tokens import checked_max_new_tokens
from vocalis.stages.api.model import Capabilities
from vocalis.stages.api.reference_policy import ReferencePolicy
from vocalis.stages.models.cosyvoice3.config import CosyVoice3Config
from vocalis.stages.models.cosyvoice3.frontend import MAX_REFERENCE_SECONDS, RECOMMENDED_SECONDS
from vocalis.stages.models.cosyvoice3.runtime import CosyVoice3Input
from vocalis.stages.models.cosyvoice_common.ras_sampling import RASParams
from vocalis.stages.runtime.request import RequestParams
from vocalis.stages.runtime.sampling import SamplingParams

VOICE = "default"
STANDARD = {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.21}
EXTRA_PARAMS = ExtraParams("CosyVoice3", [
    ExtraParam("sampler", str, "ras (default: repetition-aware nucleus sampling, as published) or standard "
               "(temperature, top-k, top-p and repetition penalty).", choices=("ras", "standard")),
    ExtraParam("temperature", float, "Sampling temperature; 0 is greedy. Default 1 (ras), 0.7 (standard).", minimum=0),
    ExtraParam("top_k", int, "Tokens kept at most. Default 25 (ras), 20 (standard).", minimum=1),
    ExtraParam("top_p", float, "Nucleus probability, in (0, 1]. Default 0.8.", minimum=0, maximum=1, exclusive_minimum=True),
    ExtraParam("repetition_penalty", float, "Standard sampler only: penalty on tokens already generated. Default 1.21.",
               minimum=0, exclusive_minimum=True),
    ExtraParam("win_size", int, "RAS only: tokens looked back for repetition. Default 10.", minimum=1),
    ExtraParam("tau_r", float, "RAS only: share of the window that makes a pick a repetition. Default 0.1.", minimum=0, maximum=1),
])
REFERENCE = ReferencePolicy("CosyVoice3", required=True, max_seconds=MAX_REFERENCE_SECONDS, recommended_seconds=RECOMMENDED_SECONDS)
"""The speech tokenizer takes at most 30 s; 3 to 10 s clone best."""


class CosyVoice3Adapter:
    def __init__(self, config: CosyVoice3Config, positions: int | None = None) -> None:
        self.config = config
        self.positions = positions
        """The LM's KV cache length, which ends generation before a larger max_new_tokens does."""
        self.capabilities = Capabilities(
            sample_rate=config.sample_rate,
            voices=(VOICE,),
            default_voice=VOICE,
            accepted_fields=frozenset({"ref_audio", "ref_text", "seed", "max_new_tokens", "extra_params", "initial_codec_chunk_frames"}),
            extra_params=tuple(EXTRA_PARAMS),
            streaming=True,
            voice_cloning=True,
        )

    def resolve_voice(self, voice: str) -> str:
        if voice.lower() in ("", VOICE):
            return VOICE
        raise UnknownVoice(voice, [VOICE])

    def stage_input(self, params: RequestParams) -> CosyVoice3Input:
        fields = params.fields
        reference = REFERENCE.check(params)
        assert reference is not None  # required
        text = (reference.text or "").strip()
        extra = EXTRA_PARAMS.parse(fields.get("extra_params"))
        standard = extra.pop("sampler", "ras") == "standard"
        settings: dict[str, Any] = {}
        if "max_new_tokens" in fields:
            settings["max_new_tokens"] = checked_max_new_tokens(params, self.positions)
        if "initial_codec_chunk_frames" in fields:
            value = fields["initial_codec_chunk_frames"]
            if value < 1:
                raise InvalidField("initial_codec_chunk_frames", "OUT_OF_RANGE", "initial_codec_chunk_frames must be at least 1")
            settings["initial_codec_chunk_frames"] = int(value)
        seed = int(fields["seed"]) if "seed" in fields else None
        lm = self.config.lm
        if standard:
            for key in ("win_size", "tau_r"):
                if key in extra:
                    raise InvalidField(f"extra_params.{key}", "FIELD_NOT_SUPPORTED", f"{key} applies to the ras sampler only")
            sampling = SamplingParams(**(STANDARD | {k: extra[k] for k in STANDARD if k in extra}), seed=seed)
            ras = None
        else:
            if "repetition_penalty" in extra:
                raise InvalidField("extra_params.repetition_penalty", "FIELD_NOT_SUPPORTED", "repetition_penalty applies to the standard sampler only")
            ras = RASParams(top_p=extra.get("top_p", lm.top_p), top_k=extra.get("top_k", lm.top_k), win_size=extra.get("win_size", lm.win_size),
                            tau_r=extra.get("tau_r", lm.tau_r))
            sampling = SamplingParams(temperature=extra.get("temperature", 1.0), seed=seed)
        return CosyVoice3Input(ref_text=text, samples=np.asarray(reference.samples, dtype=np.float32).reshape(-1),
                               sample_rate=int(reference.sample_rate), sampling=sampling, ras=ras, **settings)
