"""Drama 3's modules under the checkpoint's names: the Qwen3.5-MoE backbone (`model.language_model.*`, the floor's
HybridDecoder with its sparse MoE; block-FP8 routed experts, as `bsgemm-moe` publishes them, kept FP8 by
`fp8_experts.py`), the untied `lm_head`, and the codebook tower (`tower.py`).

A frame is a row [main token id, code 0, ..., code K-1]: text positions carry a text token and zeros, audio positions
the semantic token `<|semantic:code0|>` and the frame's codes. The backbone's input at a semantic row adds the
summed embeddings of codes 1..vq_backbone_codebooks to the token's and divides by sqrt(1 + that count) (none with
the published `mtp_shared_pre` placement); the tower takes the rest.
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from vocalis.stages.components.hybrid import HybridDecoder
from vocalis.stages.layers.moe import Experts
from vocalis.stages.models.drama3.config import FP8_BLOCK, Drama3Config
from vocalis.stages.models.drama3.fp8_experts import BlockFp8Experts
from vocalis.stages.models.drama3.tower import CodebookTower


class LanguageModelHolder(nn.Module):
    """`model.language_model`: the published nesting of the backbone."""

    def __init__(self, config: Drama3Config) -> None:
        super().__init__()
        experts = partial(BlockFp8Experts, block=FP8_BLOCK) if config.fp8_experts else Experts
        self.language_model = HybridDecoder(config.text, experts)


class Drama3(nn.Module):
    def __init__(self, config: Drama3Config) -> None:
        super().__init__()
        self.config = config
        self.model = LanguageModelHolder(config)
        self.lm_head = nn.Linear(config.text.hidden_size, config.text.vocab_size, bias=False)
        self.tower = CodebookTower(config.decoder, config.semantic_start_token_id, config.semantic_end_token_id)
        candidates = sorted({config.eos_token_id, *config.semantic_ids})
        self.register_buffer("candidates", torch.tensor(candidates), persistent=False)
        """The main tokens a step may sample: end of speech and the semantic band (in id order)."""

    @property
    def backbone(self) -> HybridDecoder:
        return self.model.language_model

    def embed_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """[N, H] backbone inputs of frame rows [N, 1 + K]."""
        count = self.config.decoder.vq_backbone_codebooks
        text = self.backbone.embed_tokens(rows[:, 0])
        if not count:
            return text
        mixed = (text + self.tower.codebook_sum(rows, 1, 1 + count).to(text.dtype)) / math.sqrt(1 + count)
        return torch.where(self.tower.is_semantic(rows[:, 0])[:, None], mixed, text)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Full-vocabulary logits of final-normed hidden states."""
        return self.lm_head(hidden)

    def candidate_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[N, len(candidates)] float32: only the rows of lm_head a step can sample."""
        return F.linear(hidden, self.lm_head.weight[self.candidates]).float()
