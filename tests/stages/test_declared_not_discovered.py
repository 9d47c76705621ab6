"""Rules decided once, held by reading the code: inference mode is entered in one place, and no optional member of a
model or stage is found by probing for it.

- `inference_mode` is entered by the stage worker alone (stages/runtime/worker.py, `inference_mode_if_torch`); code
  that runs a model outside a worker thread (PrepareStage's encoder thread, the forced aligner, a precompute command)
  goes through that helper, never through `torch.inference_mode` itself.
- An optional member of a stage model, stage, adapter or loaded model is declared on its protocol with a default
  (stages/api/model.py, stages/runtime/stage.py, stages/runtime/autoregressive.py), so nothing under stages/ or
  server/ calls getattr/hasattr but the few reads below, none of which probes a model or a stage.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = sorted((ROOT / "stages").rglob("*.py")) + sorted((ROOT / "server").rglob("*.py"))

INFERENCE_MODE_OWNER = "stages/runtime/worker.py"
INFERENCE_MODE_PENDING: set[str] = set()
"""Families being rebuilt on the shared stage kinds (issue 30 point 2), which drop their own entry then: take a file
out of this set when it no longer enters inference mode (the last test says when)."""

ATTRIBUTE_READS = {
    ("stages/runtime/output.py", "_pending", "'items'"): "a thread-local",
    ("stages/runtime/utterance.py", "_lane", "'solo'"): "a thread-local",
    ("stages/runtime/deploy.py", "torch", "self.dtype"): "a dtype by its name in a deploy file",
    ("stages/runtime/deploy.py", "merged", "field.name"): "a dataclass's fields, in turn",
    ("stages/runtime/attention.py", "cache", "'decode_context'"): "the KV cache (paged or a test's dense one), not a model",
    ("stages/runtime/attention.py", "cache", "'gather_buffers'"): "the KV cache (paged or a test's dense one), not a model",
    ("stages/api/family.py", "importlib.import_module(module)", "'FAMILY'"): "a family plug-in module's entry, checked",
    ("stages/layers/audio_blocks.py", "self", "name"): "a block's own sub-layers, by their declared names",
    ("stages/components/causal_stream.py", "module", "'stream'"): "a layer's Streamable (isinstance on a Protocol is slow per layer)",
    ("stages/components/causal_stream.py", "module", "name"): "a residual unit's own sub-layers, by their declared names",
    ("stages/models/higgs_audio_v2/config.py", "config", "name"): "a config's fields, in turn",
    ("stages/models/auk/runtime.py", "job", "name"): "a job's fields, in turn",
    ("server/errors.py", "code_pb2", "code.name"): "a proto enum value by name",
    ("stages/models/drama3/config.py", "config", "f.name"): "a config's fields, in turn",
    ("server/field_lengths.py", "config", "name"): "a session config's string fields, in turn, to bound their lengths",
    ("stages/runtime/openmp_teams.py", "library", "'omp_pause_resource_all'"): "a C function of the OpenMP runtime (5.0 on)",
    ("stages/layers/quantized_linear.py", "parent", "name"): "a layer's own linears, by the names it declares (JoinsInputs)",
}
"""(file, object, name) of every getattr/hasattr under stages/ and server/, with why it is no probe of a model or stage."""


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _inference_mode_entries(path: Path) -> list[int]:
    """Lines that name torch's inference_mode (a call, a decorator, an import) rather than the worker's helper."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr == "inference_mode":
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id == "inference_mode":
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and any(alias.name == "inference_mode" for alias in node.names):
            lines.append(node.lineno)
    return lines


def _attribute_reads(path: Path, label: str | None = None) -> list[tuple[str, str, str, int]]:
    """(file, object, name, line) of each getattr/hasattr call; `label` names a file outside the repository."""
    reads = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            target, name = (ast.unparse(arg) for arg in node.args[:2])
            reads.append((label or _relative(path), target, name, node.lineno))
    return reads


def test_only_the_worker_enters_inference_mode():
    assert SCANNED
    entries = [
        f"{_relative(path)}:{line}"
        for path in SCANNED
        if _relative(path) not in (INFERENCE_MODE_OWNER, *INFERENCE_MODE_PENDING)
        for line in _inference_mode_entries(path)
    ]
    assert not entries, (
        "a stage's model runs in the worker's inference mode (stages/runtime/worker.py); code that runs a model on "
        f"another thread uses inference_mode_if_torch: {entries}"
    )
    assert _inference_mode_entries(ROOT / INFERENCE_MODE_OWNER)


def test_no_getattr_or_hasattr_probes_a_model_or_stage():
    reads = [read for path in SCANNED for read in _attribute_reads(path)]
    unexplained = [f"{file}:{line} getattr({target}, {name})" for file, target, name, line in reads
                   if (file, target, name) not in ATTRIBUTE_READS]
    assert not unexplained, (
        "declare an optional member on its protocol with a default (AutoregressiveModel, Stage, LoadedModel) and read "
        f"it plainly; or, if this is no probe of a model or stage, add it to ATTRIBUTE_READS saying why: {unexplained}"
    )
    stale = set(ATTRIBUTE_READS) - {(file, target, name) for file, target, name, _ in reads}
    assert not stale, f"no longer in the code, drop them from ATTRIBUTE_READS: {sorted(stale)}"


def test_the_pending_families_still_need_their_exemption():
    done = sorted(file for file in INFERENCE_MODE_PENDING if not (ROOT / file).exists() or not _inference_mode_entries(ROOT / file))
    assert not done, f"take {done} out of INFERENCE_MODE_PENDING"


def test_the_scan_sees_a_probe(tmp_path):
    """The readers above find what they look for (a rule checked by a reader that sees nothing would pass anyway)."""
    probe = tmp_path / "probe.py"
    probe.write_text("import torch\n\n@torch.inference_mode()\ndef f(model):\n    return getattr(model, 'state_shape', None)\n")
    assert _inference_mode_entries(probe) == [3]
    assert [(target, name) for _, target, name, _ in _attribute_reads(probe, "probe.py")] == [("model", "'state_shape'")]
