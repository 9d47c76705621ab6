"""The graphs a Piper voice is served with, patched once and kept on disk by the voice file's content.

Two patches of the published graph: one more output (each phoneme's frames, for word times) and seeded noise
(seeded_noise.py). Making them takes the onnx package (about 0.6 s to import), two parses of the graph and a shape
inference: about half of the CPU time of a Piper server's start. They depend only on the voice file and the code that
patches it, so the first start writes them under the user's cache directory and later starts read them back. A cache
that cannot be written (read-only home, full disk) only costs the patching again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from vocalis.stages.models.piper.seeded_noise import SeededGraph

log = logging.getLogger(__name__)

PATCH_VERSION = 1
"""Raise when a patch changes what it writes: entries made by older code are then not read."""


@dataclass(frozen=True)
class VoiceGraphs:
    """What a Piper voice's sessions open."""

    model: str | bytes
    """The graph served: a file's path, or a patched graph's bytes."""
    durations_output: str | None
    """The name of its phoneme-durations output; None when the voice cannot give one (then no word times)."""
    seeded: SeededGraph | None
    """The graph for seeded requests; None without the onnx package on a cache miss (seeds are then refused)."""


def default_cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("vocalis")) / "piper-graphs"


def voice_graphs(model_path: Path, cache_dir: Path | None = None) -> VoiceGraphs:
    """The voice's graphs, from `cache_dir` (default: the user's cache) when made before, else patched now."""
    entry = (cache_dir or default_cache_dir()) / _key(model_path)
    cached = _read(entry, model_path)
    if cached is not None:
        return cached
    graphs = _patched(model_path)
    if graphs.seeded is not None:
        _write(entry, graphs)
    return graphs


def _key(model_path: Path) -> str:
    """The voice file's content (a copy or a moved file finds its entry; 0.05 s for the 60 MB default voice), the
    versions of the packages that patch it, and PATCH_VERSION."""
    digest = hashlib.sha256()
    with model_path.open("rb") as file:
        digest.update(hashlib.file_digest(file, "sha256").digest())
    for package in ("onnx", "piper-tts"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            digest.update(f"{package}={metadata.version(package)}".encode())
    digest.update(f"patch={PATCH_VERSION}".encode())
    return digest.hexdigest()[:32]


def _patched(model_path: Path) -> VoiceGraphs:
    try:
        import onnx
        from piper.patch_voice_with_alignment import add_alignment_output

        from vocalis.stages.models.piper.seeded_noise import seeded_graph
    except ImportError:
        log.warning("the onnx package is missing: Piper requests with a seed (or word timestamps) will be refused")
        return VoiceGraphs(str(model_path), None, None)
    model = onnx.load(str(model_path))
    served: str | bytes = str(model_path)
    try:
        durations_output: str | None = add_alignment_output(model)
        served = model.SerializeToString()
    except ValueError as error:
        if "already marked as output" in str(error):
            durations_output = next(node.output[0] for node in model.graph.node if node.op_type == "Ceil")
        else:
            log.warning("no phoneme durations in %s (%s): it gives no word times", model_path.name, error)
            durations_output = None
    return VoiceGraphs(served, durations_output, seeded_graph(model))


def _read(entry: Path, model_path: Path) -> VoiceGraphs | None:
    """The entry's graphs; None where there is none, or where it is damaged (then it is removed, to be made again)."""
    if not (entry / "meta.json").exists():
        return None
    try:
        meta = json.loads((entry / "meta.json").read_text())
        seeded = SeededGraph(
            str(entry / "seeded.onnx"),
            tuple(meta["noise_names"]),
            tuple((int(count), bool(dynamic)) for count, dynamic in meta["values_per_step"]),
        )
        durations_output = meta["durations_output"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        log.info("a damaged entry of the Piper graph cache is made again (%s)", error)
        shutil.rmtree(entry, ignore_errors=True)
        return None
    served = entry / "served.onnx"
    return VoiceGraphs(str(served) if served.exists() else str(model_path), durations_output, seeded)


def _write(entry: Path, graphs: VoiceGraphs) -> None:
    """Write the entry whole or not at all: it is made in a folder beside it and renamed into place."""
    assert graphs.seeded is not None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        making = Path(tempfile.mkdtemp(prefix=".making-", dir=entry.parent))
    except OSError as error:
        log.info("the patched Piper graphs are not cached (%s): the next start patches them again", error)
        return
    try:
        if isinstance(graphs.model, bytes):
            (making / "served.onnx").write_bytes(graphs.model)
        seeded = graphs.seeded.model
        (making / "seeded.onnx").write_bytes(seeded if isinstance(seeded, bytes) else Path(seeded).read_bytes())
        meta = {
            "durations_output": graphs.durations_output,
            "noise_names": list(graphs.seeded.noise_names),
            "values_per_step": [list(step) for step in graphs.seeded.values_per_step],
        }
        (making / "meta.json").write_text(json.dumps(meta))
        os.rename(making, entry)  # fails where another process has just put its own entry there: that one serves
    except OSError as error:
        shutil.rmtree(making, ignore_errors=True)
        if not entry.exists():
            log.info("the patched Piper graphs are not cached (%s): the next start patches them again", error)
