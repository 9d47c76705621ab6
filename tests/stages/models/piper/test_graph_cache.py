"""The patched Piper graphs kept on disk: read back they serve exactly as freshly patched ones."""

from __future__ import annotations

import shutil

import numpy as np
import onnxruntime as ort

from vocalis.stages.models.piper import graph_cache
from vocalis.stages.models.piper.loader import default_voice_path
from vocalis.stages.models.piper.seeded_noise import SeededNoiseSession

IDS = np.array([[1, 0, 20, 0, 59, 0, 24, 0, 27, 0, 2]], dtype=np.int64)
SCALES = np.array([0.667, 1.0, 0.8], dtype=np.float32)


def outputs(graphs: graph_cache.VoiceGraphs) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    served = ort.InferenceSession(graphs.model, sess_options=options, providers=["CPUExecutionProvider"])
    noiseless = np.array([0.0, 1.0, 0.0], dtype=np.float32)
    stock = served.run(None, {"input": IDS, "input_lengths": np.array([IDS.shape[1]]), "scales": noiseless})
    assert graphs.seeded is not None
    seeded = SeededNoiseSession(graphs.seeded, options).run_all(IDS, SCALES, seed=3, sentence_index=0)
    return stock, seeded


def test_a_second_start_reads_the_graphs_back(tmp_path):
    fresh = graph_cache.voice_graphs(default_voice_path(), tmp_path)
    assert isinstance(fresh.model, bytes) and fresh.durations_output is not None
    (entry,) = tmp_path.iterdir()
    assert sorted(p.name for p in entry.iterdir()) == ["meta.json", "seeded.onnx", "served.onnx"]

    cached = graph_cache.voice_graphs(default_voice_path(), tmp_path)
    assert cached.model == str(entry / "served.onnx") and cached.durations_output == fresh.durations_output
    assert cached.seeded is not None and fresh.seeded is not None
    assert cached.seeded.noise_names == fresh.seeded.noise_names
    assert cached.seeded.values_per_step == fresh.seeded.values_per_step
    (stock_a, seeded_a), (stock_b, seeded_b) = outputs(fresh), outputs(cached)
    assert len(stock_a) == 2 and all(np.array_equal(a, b) for a, b in zip(stock_a, stock_b, strict=True))
    assert seeded_a.keys() == seeded_b.keys()
    assert all(np.array_equal(seeded_a[name], seeded_b[name]) for name in seeded_a)


def test_the_entry_follows_the_voice_files_content(tmp_path):
    cache = tmp_path / "cache"
    graph_cache.voice_graphs(default_voice_path(), cache)
    copy = tmp_path / "copy.onnx"
    shutil.copyfile(default_voice_path(), copy)
    assert isinstance(graph_cache.voice_graphs(copy, cache).model, str)  # the copy finds the original's entry
    changed = tmp_path / "changed.onnx"
    changed.write_bytes(default_voice_path().read_bytes() + b"\0")  # not a graph onnx reads: only its key matters here
    assert graph_cache._key(changed) != graph_cache._key(copy)
    assert len(list(cache.iterdir())) == 1


def test_a_cache_that_cannot_be_written_only_costs_the_patching(tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    graphs = graph_cache.voice_graphs(default_voice_path(), blocked / "cache")
    assert isinstance(graphs.model, bytes) and graphs.seeded is not None
    stock, seeded = outputs(graphs)
    assert stock[0].size > 0 and seeded["output"].size > 0


def test_a_damaged_entry_is_made_again(tmp_path):
    graph_cache.voice_graphs(default_voice_path(), tmp_path)
    (entry,) = tmp_path.iterdir()
    (entry / "meta.json").write_text("{not json")
    assert isinstance(graph_cache.voice_graphs(default_voice_path(), tmp_path).model, bytes)  # patched again
    assert graph_cache.voice_graphs(default_voice_path(), tmp_path).model == str(entry / "served.onnx")
