"""The committed Python stubs are what proto/generate.py makes from the .proto files today."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_stubs_are_fresh(tmp_path):
    spec = importlib.util.spec_from_file_location("generate", ROOT / "proto" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    generate.generate(tmp_path)
    fresh = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    committed_dir = ROOT / "proto"
    assert fresh, "the generator wrote nothing"
    stale = [str(name) for name, data in fresh.items() if (committed_dir / name).read_bytes() != data]
    assert not stale, f"stale stubs (run `python proto/generate.py`): {stale}"
    committed = {p.relative_to(committed_dir) for p in committed_dir.rglob("*_pb2*.py*") if "__pycache__" not in p.parts}
    assert committed == set(fresh), "stub files without a .proto, or missing ones"
