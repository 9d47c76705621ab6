"""The two samplers of the CosyVoice line, chosen per request with `extra_params.sampler`: RAS (repetition-aware
nucleus sampling, the published default) or the family's alternative (CosyVoice3's standard sampler with a
repetition penalty, GLM-TTS's plain top-k). A key that only the other sampler reads is refused by name."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vocalis.stages.api.errors import InvalidField
from vocalis.stages.api.extra_params import ExtraParam
from vocalis.stages.api.standard_adapter import SamplingTable, sampling_params
from vocalis.stages.models.cosyvoice_common.ras_params import RASParams
from vocalis.stages.runtime.sampling import SamplingParams

RAS = "ras"
RAS_KEYS = ("top_p", "top_k", "win_size", "tau_r")
"""The extra params RAS reads (beside the temperature)."""
RAS_TEMPERATURE = 1.0
RAS_MINIMUMS = {"top_k": 1}
"""RAS keeps at least one token: the line's top_k starts at 1."""


@dataclass(frozen=True)
class SamplerChoice:
    alternative: str
    """The other sampler's name in `extra_params.sampler`."""
    description: str
    """What the alternative is, for the `sampler` key's description."""
    defaults: Mapping[str, Any]
    """The alternative's SamplingParams defaults; their keys are the extra params it reads."""

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(self.defaults)

    def extra_params(self) -> list[ExtraParam]:
        """The line's declaration: `sampler`, the sampling keys with each sampler's default, RAS's window."""
        ras = RASParams()
        published = {"temperature": RAS_TEMPERATURE, "top_k": ras.top_k, "top_p": ras.top_p}
        defaults, notes = {}, {}
        for key in dict.fromkeys([*published, *self.keys]):
            given = [(RAS, published.get(key)), (self.alternative, self.defaults.get(key))]
            defaults[key] = ", ".join(f"{value} ({sampler})" for sampler, value in given if value is not None)
            readers = [sampler for sampler, value in given if value is not None]
            if len(readers) == 1:
                notes[key] = f"{readers[0]} sampler only"
        return [
            ExtraParam("sampler", str, f"ras (default: repetition-aware nucleus sampling, as published) or {self.alternative} "
                       f"({self.description}).", choices=(RAS, self.alternative)),
            *sampling_params(defaults, notes, minimums=RAS_MINIMUMS),
            ExtraParam("win_size", int, f"RAS only: tokens looked back for repetition. Default {ras.win_size}.", minimum=1),
            ExtraParam("tau_r", float, f"RAS only: share of the window that makes a pick a repetition. Default {ras.tau_r}.",
                       minimum=0, maximum=1),
        ]

    def sampling(self, extra: dict[str, Any], ras: RASParams, seed: int | None) -> tuple[SamplingParams, RASParams | None]:
        """The request's sampling, and its RAS settings (None with the alternative) from `ras` and its extra params."""
        mode = extra.pop("sampler", RAS)
        reads = self.keys if mode == self.alternative else ("temperature", *RAS_KEYS)
        for key in extra:
            if key not in reads:
                other = RAS if mode == self.alternative else self.alternative
                raise InvalidField(f"extra_params.{key}", "FIELD_NOT_SUPPORTED", f"{key} applies to the {other} sampler only")
        if mode == self.alternative:
            return SamplingTable.same_names(*self.keys).params(extra, self.defaults, seed=seed), None
        chosen = dataclasses.replace(ras, **{key: extra[key] for key in RAS_KEYS if key in extra})
        return SamplingTable.same_names("temperature").params(extra, {"temperature": RAS_TEMPERATURE}, seed=seed), chosen
