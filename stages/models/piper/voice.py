"""Loading a Piper voice (an ONNX VITS model and its .onnx.json) into a ready object."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import onnxruntime
from piper import PiperVoice
from piper.config import PiperConfig

from vocalis.stages.models.piper.graph_cache import voice_graphs
from vocalis.stages.models.piper.phonemizer_pool import PhonemizerPool
from vocalis.stages.models.piper.seeded_noise import SeededNoiseSession

MAX_PHONEMIZERS = 4
"""Phonemizer processes per voice at most: a sentence phonemizes in about a millisecond and synthesizes in a
hundred, so a few serve every lane of a large machine (each process holds about 50 MiB)."""


@dataclass
class LoadedPiperVoice:
    """A Piper voice with its sessions, ready to synthesize."""

    name: str
    """Voice name, from the model file name (e.g. "en_US-joe-medium")."""
    voice: PiperVoice
    """Piper's own voice object: phonemizer, id map and the stock ONNX session."""
    model_path: Path
    sample_rate: int
    language: str
    """Language code from the voice config (e.g. "en_US")."""
    seeded: SeededNoiseSession | None
    """A session whose noise comes from seeds, or None where the onnx package is missing and the patched graphs are not
    cached (graph_cache.py)."""
    phonemizer: PhonemizerPool
    """Piper's text front end (espeak-ng) in child processes, so that its crashes end no more than one request."""
    lane_session: onnxruntime.InferenceSession | None = None
    """A one-thread session on the same model, run from several lane threads at once when several requests are
    active (the stock session, with every core, serves a lone request); None when the voice has a single lane."""
    durations_output: str | None = None
    """Name of the graph output that gives the frames of each phoneme id (piper.patch_voice_with_alignment), present
    in every session of the voice; None without the onnx package (then the voice gives no word times)."""

    @property
    def config(self) -> PiperConfig:
        return self.voice.config


def session_options(intra_op_threads: int) -> onnxruntime.SessionOptions:
    options = onnxruntime.SessionOptions()
    if intra_op_threads > 0:
        options.intra_op_num_threads = intra_op_threads
    # The CPU arena keeps the peak of the largest run for good (gigabytes after one long unit); without it,
    # memory goes back after each run, at no measurable cost in speed for Piper's sizes (bench/piper_memory.py).
    options.enable_cpu_mem_arena = False
    options.log_severity_level = 3
    return options


def lane_count(intra_op_threads: int) -> int:
    """Requests advanced at once when several are active: one per core the stage may use."""
    return intra_op_threads if intra_op_threads > 0 else len(os.sched_getaffinity(0))


def load(model_path: Path, config_path: Path | None = None, intra_op_threads: int = 0) -> LoadedPiperVoice:
    """Load the voice at `model_path` (config beside it as `<model>.json` unless given)."""
    config_path = config_path or model_path.with_name(model_path.name + ".json")
    config_dict = json.loads(config_path.read_text(encoding="utf-8"))
    lanes = lane_count(intra_op_threads)
    phonemizer = PhonemizerPool(config_path, size=min(lanes, MAX_PHONEMIZERS))
    options = session_options(intra_op_threads)
    graphs = voice_graphs(model_path)
    session = onnxruntime.InferenceSession(graphs.model, sess_options=options, providers=["CPUExecutionProvider"])
    lane_session = (
        onnxruntime.InferenceSession(graphs.model, sess_options=session_options(1), providers=["CPUExecutionProvider"])
        if lanes > 1
        else None
    )
    voice = PiperVoice(session=session, config=PiperConfig.from_dict(config_dict))
    language = config_dict.get("language", {}).get("code") or voice.config.espeak_voice
    return LoadedPiperVoice(
        name=model_path.name.removesuffix(".onnx"),
        voice=voice,
        model_path=model_path,
        sample_rate=voice.config.sample_rate,
        language=language,
        seeded=None if graphs.seeded is None else SeededNoiseSession(graphs.seeded, session_options(intra_op_threads)),
        phonemizer=phonemizer,
        lane_session=lane_session,
        durations_output=graphs.durations_output,
    )
