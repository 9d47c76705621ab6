"""One server per model family on its tiny checkpoint (tests/tiny_checkpoints.py), started once per test session and shared by every file that
serves that family (its own tests/e2e/test_<family>.py and the conformance suite, test_family_conformance.py).

`FamilyServers.get(key)` starts a family's server the first time it is asked for; tests/e2e/conftest.py stops it as
soon as no test still to run needs it (servers are ~0.8 GB each: they must not all stay up), and runs the
conformance rows of a family right before its own file so that the two share one start-up.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests import tiny_checkpoints as tiny
from tests.serving import RunningServer, start_server

ONE_THREAD = {"OMP_NUM_THREADS": "1"}
"""Thousands of tiny ops: one thread is much faster for these tiny checkpoints."""


def _qwen3(variant: str) -> Callable[[Path], RunningServer]:
    def start(root: Path) -> RunningServer:
        overrides = json.dumps({"talker": {"max_len": 128}})  # the talker's cache (4096 as deployed)
        return start_server(root, "--log-level", "info", str(tiny.qwen3_tts(root, variant)), "--stage-overrides", overrides, timeout=120)
    return start


def _voxcpm2(root: Path) -> RunningServer:
    from tests.goldens.voxcpm2.cases import HERE

    checkpoint = tiny.voxcpm2(root)
    precomputed = root / "precomputed"
    precomputed.mkdir()
    shutil.copy(HERE / "prompt.wav", precomputed / "narrator.wav")
    (precomputed / "manifest.json").write_text(
        json.dumps({"voices": [{"name": "narrator", "audio": "narrator.wav", "ref_text": "a short prompt."}]})
    )
    overrides = json.dumps({"latent_generator": {"max_len": 56},
                            "audio_vae": {"chunk_frames": 2, "chunk_growth": 1.0, "left_context_frames": 11}})
    return start_server(root, "--log-level", "info", "--custom-voice-dir", str(precomputed), "--stage-overrides", overrides, str(checkpoint), env=ONE_THREAD)


def _omnivoice(root: Path) -> RunningServer:
    return start_server(root, "--log-level", "info", str(tiny.omnivoice(root)), timeout=120)


def _higgs(root: Path) -> RunningServer:
    path = tiny.higgs_audio_v2(root)
    overrides = json.dumps({"talker": {"max_len": 512}})  # room for the peer demo's 300 frames, a cap under 4096
    return start_server(root, "--log-level", "info", str(path), "--served-model-name", "higgs_audio_v2", "--stage-overrides", overrides, timeout=120)


def _fish(root: Path) -> RunningServer:
    checkpoint = tiny.fish_speech(root)
    # A 320-position cache (16384 as deployed), so that a prompt under the 5,000-character input limit can overfill it.
    overrides = json.dumps({"slow_ar": {"max_len": 320},
                            "dac_decoder": {"first_chunk_frames": 1, "chunk_frames": 2, "max_chunk_frames": 2, "left_context_frames": 16}})
    return start_server(root, "--log-level", "info", "--stage-overrides", overrides, "--served-model-name", "fishaudio/s2-pro", str(checkpoint))


def _drama3(root: Path) -> RunningServer:
    checkpoint = tiny.drama3(root)
    overrides = json.dumps({"talker": {"max_len": 320}, "dac_decoder": {"first_chunk_frames": 1, "chunk_frames": 2, "max_chunk_frames": 2,
                                                                       "left_context_frames": 16}})
    return start_server(root, "--log-level", "info", "--stage-overrides", overrides, "--served-model-name", "fishaudio/drama-3", str(checkpoint))


COSYVOICE3_OVERRIDES = {"llm": {"max_len": 160}, "flow": {"chunk_frames": 4, "max_chunk_frames": 4, "lookahead_frames": 10}}
"""The tiny DiT's attention chunks are 8 mel frames: 10 tokens of lookahead make streams exact (the published 31 would too).
A 160-position LM cache: the peer's max_new_tokens 4096 ends there (the published deploy holds 4096)."""
GLM_TTS_OVERRIDES = {"flow": {"chunk_frames": 4, "max_chunk_frames": 4, "lookahead_frames": 8}}


def _cosyvoice3(root: Path) -> RunningServer:
    checkpoint = tiny.cosyvoice3(root)
    return start_server(root, "--log-level", "info", "--stage-overrides", json.dumps(COSYVOICE3_OVERRIDES), str(checkpoint), env=ONE_THREAD)


def _glm_tts(root: Path) -> RunningServer:
    checkpoint = tiny.glm_tts(root)
    overrides = json.dumps(GLM_TTS_OVERRIDES)
    # root holds ref.wav for ref_audio as a file:// URI, as vLLM-Omni's GLM-TTS client documents it (test_glm_tts.py)
    return start_server(root, "--log-level", "info", "--stage-overrides", overrides, "--ref-audio-dir", str(root),
                        # the checkpoint's own name, then vLLM-Omni's GLM-TTS client's default model id as an alias
                        "--served-model-name", "glm-tts-tiny", "--served-model-name", "glm-tts", str(checkpoint), env=ONE_THREAD)


def _voxtral(root: Path) -> RunningServer:
    checkpoint = tiny.voxtral(root)
    overrides = json.dumps({"frame_generator": {"max_len": 48, "kv_cache_bytes": 8388608}})
    return start_server(root, "--log-level", "info", str(checkpoint), "--served-model-name", "mistralai/Voxtral-4B-TTS-2603", "--stage-overrides", overrides,
                        timeout=180, env=ONE_THREAD)


def _gepard(root: Path) -> RunningServer:
    checkpoint = tiny.gepard(root)
    overrides = json.dumps({"gepard": {"max_len": 96}, "nanocodec": {"first_chunk_frames": 4, "chunk_frames": 8, "max_chunk_frames": 8,
                                                                   "left_context_frames": 17}})
    return start_server(root, "--log-level", "info", "--stage-overrides", overrides, str(checkpoint), env=ONE_THREAD)


def _auk(root: Path) -> RunningServer:
    return start_server(root, "--log-level", "info", str(tiny.auk(root)), timeout=180)


STARTERS: dict[str, Callable[[Path], RunningServer]] = {
    "qwen3-cv": _qwen3("cv-1b7"),
    "qwen3-vd": _qwen3("vd-1b7"),
    "qwen3-base": _qwen3("base-1b7"),
    "voxcpm2": _voxcpm2,
    "omnivoice": _omnivoice,
    "higgs": _higgs,
    "fish": _fish,
    "drama3": _drama3,
    "cosyvoice3": _cosyvoice3,
    "glm-tts": _glm_tts,
    "voxtral": _voxtral,
    "gepard": _gepard,
    "auk": _auk,
}
"""How each family's shared server starts (its checkpoint, its stage overrides), by key."""

HOME_FILES: dict[str, tuple[str, ...]] = {
    "test_qwen3_tts.py": ("qwen3-cv", "qwen3-vd", "qwen3-base"),
    "test_voxcpm2.py": ("voxcpm2",),
    "test_omnivoice.py": ("omnivoice",),
    "test_higgs_audio_v2.py": ("higgs",),
    "test_fish_speech.py": ("fish",),
    "test_drama3.py": ("drama3",),
    "test_cosyvoice3.py": ("cosyvoice3",),
    "test_glm_tts.py": ("glm-tts",),
    "test_voxtral.py": ("voxtral",),
    "test_gepard.py": ("gepard",),
    "test_auk.py": ("auk",),
}
"""The family file whose tests use each shared server (the conformance rows run right before it)."""

CONFORMANCE = "test_family_conformance.py"
"""The file of the checks every family passes, one row per family server key."""


def home_file(key: str) -> str | None:
    """The family file that uses the shared server `key` (None for Piper: its tests share the session's `server`)."""
    return next((name for name, keys in HOME_FILES.items() if key in keys), None)


class FamilyServers:
    """The session's family servers: started on first use, stopped by `keep_only` when no later test needs them."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self._tmp = tmp_path_factory
        self._running: dict[str, RunningServer] = {}

    def get(self, key: str) -> RunningServer:
        running = self._running.get(key)
        if running is None or not running.alive():
            running = self._running[key] = STARTERS[key](self._tmp.mktemp(key))
        return running

    def keep_only(self, keys: set[str]) -> None:
        for key in [k for k in self._running if k not in keys]:
            self._running.pop(key).stop()

    def stop_all(self) -> None:
        self.keep_only(set())
