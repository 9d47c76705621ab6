"""A CosyVoice-line checkpoint's modules (config, speech LM, flow, vocoder, text tokenizer), placed where they run
as both families' `load_modules` place them: the LM on the LM's device in the serving dtype, the flow and its vocoder
on the flow's device (the LM's unless set), the flow's DiT (`estimator`, the flow stage's compute) in the flow stage's
dtype and the rest as loaded (float32: token features, conditioning, the Euler state and the vocoder), all in eval
mode. Each family names its own module types: `CosyVoice3Modules`, `GLMTTSModules`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

import torch
from torch import nn

ConfigT = TypeVar("ConfigT")
LMT = TypeVar("LMT", bound=nn.Module)
FlowT = TypeVar("FlowT", bound=nn.Module)
HiFTT = TypeVar("HiFTT", bound=nn.Module)
TokenizerT = TypeVar("TokenizerT")


@dataclass
class LoadedModules(Generic[ConfigT, LMT, FlowT, HiFTT, TokenizerT]):
    config: ConfigT
    lm: LMT
    flow: FlowT
    hift: HiFTT
    tokenizer: TokenizerT

    @classmethod
    def placed(
        cls,
        config: ConfigT,
        lm: LMT,
        flow: FlowT,
        hift: HiFTT,
        tokenizer: TokenizerT,
        *,
        dtype: torch.dtype,
        device: str,
        flow_device: str | None = None,
        flow_dtype: torch.dtype = torch.float32,
    ) -> LoadedModules[ConfigT, LMT, FlowT, HiFTT, TokenizerT]:
        """The modules, moved (in place, as `nn.Module.to` does) and set to eval."""
        flow_device = flow_device or device
        flow.estimator.to(flow_dtype)
        return cls(
            config, lm.to(device=device, dtype=dtype).eval(), flow.to(flow_device).eval(), hift.to(flow_device).eval(), tokenizer
        )
