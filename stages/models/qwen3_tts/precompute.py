"""Precompute a cloned voice for a Qwen3-TTS Base checkpoint: its x-vector and ICL reference codes, once.

    python -m vocalis.stages.models.qwen3_tts.precompute CHECKPOINT CLIP.wav --name narrator \\
        --ref-text "What the clip says." --out VOICES_DIR

writes VOICES_DIR/narrator.speaker_embedding.npy and narrator.ref_codes.npy, copies the clip, and adds
the voice to VOICES_DIR/manifest.json (the `--custom-voice-dir` layout the server loads at start-up:
`audio`, `ref_text`, `speaker_embedding`, plus `ref_codes` for loaders that read it).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalis.stages.models.qwen3_tts.voices import voice_artifacts
from vocalis.stages.models.qwen3_tts.weights import load_modules
from vocalis.stages.runtime.worker import inference_mode_if_torch


def precompute(checkpoint: Path, clip: Path, name: str, out: Path, ref_text: str | None = None) -> dict:
    modules = load_modules(checkpoint)
    if modules.speaker_encoder is None:
        raise SystemExit(f"{checkpoint} is a {modules.config.tts_model_type} checkpoint; voices are cloned by Base checkpoints")
    samples, rate = sf.read(str(clip), dtype="float32", always_2d=True)
    with inference_mode_if_torch():  # a command of its own, outside any stage worker
        vector, codes = voice_artifacts(modules, samples.mean(axis=1), rate, codes=ref_text is not None)
    out.mkdir(parents=True, exist_ok=True)
    entry: dict = {"name": name, "models": [checkpoint.name]}
    np.save(out / f"{name}.speaker_embedding.npy", vector)
    entry["speaker_embedding"] = f"{name}.speaker_embedding.npy"
    if codes is not None:
        np.save(out / f"{name}.ref_codes.npy", codes)
        entry |= {"ref_codes": f"{name}.ref_codes.npy", "ref_text": ref_text}
    audio_name = f"{name}{clip.suffix}"
    if clip.resolve() != (out / audio_name).resolve():
        shutil.copyfile(clip, out / audio_name)
    entry["audio"] = audio_name
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {"voices": []}
    manifest["voices"] = [v for v in manifest["voices"] if v.get("name") != name] + [entry]
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return entry


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("clip", type=Path)
    parser.add_argument("--name", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ref-text", help="the clip's transcript (for in-context cloning); without it, x-vector only")
    args = parser.parse_args(argv)
    print(json.dumps(precompute(args.checkpoint, args.clip, args.name, args.out, args.ref_text), indent=2))


if __name__ == "__main__":
    main()
