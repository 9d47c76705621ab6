"""The template family: a tiny two-stage talker -> codec family, loaded exactly like a real one, that
stages/models/README.md walks through ("Adding a family"). Its folder name starts with `_`, so the server does not
register it with the shipped families; tests build a random checkpoint (`build.py`) and serve it with
`--family-module vocalis.stages.models._template.family`.

This module is what registration imports: the family's name and the config.json `model_type` it loads; the loader
(and torch) are imported only when a checkpoint is loaded."""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family
from vocalis.stages.models._template.config import MODEL_TYPE

FAMILY = checkpoint_family("tiny_tts", (MODEL_TYPE,), __package__)
