"""The band of the text vocabulary that holds the semantic tokens (codebook 0's codes), as Fish Audio's config.json
publishes it at its top level for S2 Pro and Drama 3 alike; torch-free, read with each family's config."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SemanticTokens:
    semantic_start_token_id: int
    semantic_end_token_id: int

    @property
    def semantic_ids(self) -> range:
        return range(self.semantic_start_token_id, self.semantic_end_token_id + 1)
