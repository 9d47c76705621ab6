"""A stage of each runtime kind, built from its deploy settings: one place maps StageDeploy onto the constructors."""

from __future__ import annotations

import logging

from vocalis.stages.runtime.autoregressive import AutoregressiveModel, AutoregressiveStage
from vocalis.stages.runtime.chunk_stage import ChunkDecoder, ChunkStage
from vocalis.stages.runtime.deploy import StageDeploy

log = logging.getLogger(__name__)


def autoregressive_stage(model: AutoregressiveModel, deploy: StageDeploy, next_stage: StageDeploy | None = None) -> AutoregressiveStage:
    """`next_stage`: the chunk stage fed by this one; frames are handed over once per its chunk, not every step."""
    return AutoregressiveStage(deploy.name, model, max_num_seqs=deploy.max_num_seqs, max_num_batched_tokens=deploy.max_num_batched_tokens,
                               dtype=deploy.torch_dtype, device=deploy.device, **deploy.kv_cache_options(), **deploy.graph_options(),
                               handover=None if next_stage is None else next_stage.chunk_policy())


def chunk_stage(decoder: ChunkDecoder, deploy: StageDeploy, receptive_field_frames: int | None = None) -> ChunkStage:
    """`receptive_field_frames`: the decoder's exact left context; a shorter configured one is logged (chunks then
    approximate a whole-utterance decode at their starts)."""
    if receptive_field_frames is not None and deploy.left_context_frames < receptive_field_frames:
        log.info("%s left context (%d frames) is shorter than the decoder's receptive field (%d): streamed chunks "
                 "approximate a whole-utterance decode at their starts", deploy.name, deploy.left_context_frames, receptive_field_frames)
    return ChunkStage(deploy.name, decoder, deploy.chunk_policy(), max_num_seqs=deploy.max_num_seqs, device=deploy.device)
