"""Which model family loads a model spec given on the command line."""

from __future__ import annotations

from pathlib import Path

from vocalis.stages.model import LoadedModel

DEFAULT_MODEL = "en_US-joe-medium"


def load_model(spec: str | None = None) -> LoadedModel:
    """Load `spec`: empty or "en_US-joe-medium" for the embedded Piper voice, or a path to a Piper .onnx."""
    from vocalis.stages.models.piper.loader import load_piper

    if not spec or spec in (DEFAULT_MODEL, "piper"):
        return load_piper()
    path = Path(spec)
    if path.suffix == ".onnx" and path.is_file():
        return load_piper(path)
    raise ValueError(f"cannot load model {spec!r}: give {DEFAULT_MODEL!r} or the path to a Piper .onnx voice")
