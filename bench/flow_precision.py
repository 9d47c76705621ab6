"""The CosyVoice line's flow stage (CosyVoice3, GLM-TTS) at real size on this CPU under each of its deploy settings
(`VARIANTS`: float32 with nn.Linear, float32 with packed linears (the default), bfloat16, int8-dynamic weights): the
time of one flow decode and how far its mel moves (signal-to-error ratio against float32 with nn.Linear).

Why: at real size on two cores the flow (a DiT, 10 Euler steps with two guidance rows over the voice's prompt mel
plus the new frames) is most of a request's compute for both families (BENCHMARKS.md, "CosyVoice3 and GLM-TTS against
the goldens' LM code path"), and its products run near this CPU's float32 rate; `dtype: bfloat16` on the flow stage
runs the DiT in bfloat16 (native here: avx512_bf16). The decode is the whole-utterance one both families' first chunk
and GLM-TTS's every chunk run: --tokens new speech tokens after a prompt of --prompt-tokens (its mel, twice as many
frames), random tokens, log-mel-like prompt values, a random speaker embedding. The settings alternate within each of
--repeats rounds; the median round is reported.

    python bench/flow_precision.py --families cosyvoice3,glm-tts     # bench/real_size_cpu.py's checkpoints
    python bench/flow_precision.py --tiny --repeats 1                # CI-sized: the tiny checkpoints
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import real_size_cpu  # noqa: E402
from bench.half_precision_drift import ser_db  # noqa: E402
from bench.report import write_json  # noqa: E402

LOADERS = {"cosyvoice3": "vocalis.stages.models.cosyvoice3.weights", "glm-tts": "vocalis.stages.models.glm_tts.weights"}


def checkpoint_of(key: str, work_dir: Path, tiny: bool) -> Path:
    if tiny:
        import importlib

        tiny_checkpoints = importlib.import_module("tests.tiny_checkpoints")
        return getattr(tiny_checkpoints, key.replace("-", "_"))(work_dir / "tiny")
    path = work_dir / key
    real_size_cpu.build(key, path)
    return path


VARIANTS: dict[str, dict] = {
    "float32, nn.Linear": {"packed_linears": False},  # the flow as loaded, before its DiT was declared for packing
    "float32": {},  # the default deploy: the DiT's linears packed for oneDNN
    "bfloat16": {"dtype": "bfloat16"},
    "int8-dynamic": {"quantize": "int8-dynamic"},
}
"""The flow stage's deploy settings compared, each applied as the family's loader applies it."""
BASELINE = "float32, nn.Linear"


def deployed(flow: torch.nn.Module, settings: dict) -> torch.nn.Module:
    from vocalis.stages.models.quantizable import Quantizable, quantize_stages
    from vocalis.stages.runtime.deploy import DeployConfig, StageDeploy

    stage = StageDeploy(name="flow", **settings)
    copied = copy.deepcopy(flow)
    copied.estimator.to(stage.torch_dtype)
    quantize_stages(DeployConfig([stage]), Quantizable.flow_dit("flow", copied.estimator))
    return copied


def measure(key: str, checkpoint: Path, tokens: int, prompt_tokens: int, repeats: int, steps: int = 10) -> dict:
    import importlib

    flow = importlib.import_module(LOADERS[key]).load_modules(checkpoint).flow  # the LM and vocoder are freed with the rest
    variants = {name: deployed(flow, settings) for name, settings in VARIANTS.items()}
    del flow
    generator = torch.Generator().manual_seed(0)
    plain = variants[BASELINE]
    vocab = (plain.input_embedding if hasattr(plain, "input_embedding") else plain.estimator.text_emb_layer.text_embed).num_embeddings - 1
    new = torch.randint(0, vocab, (1, tokens), generator=generator)
    prompt = torch.randint(0, vocab, (1, prompt_tokens), generator=generator)
    prompt_mel = torch.randn(1, prompt_tokens * plain.token_mel_ratio, getattr(plain, "mel_dim", getattr(plain, "output_size", 80)),
                             generator=generator) * 2 - 5
    embedding = torch.randn(1, 192, generator=generator)
    times: dict[str, list[float]] = {name: [] for name in variants}
    mels: dict[str, torch.Tensor] = {}
    with torch.inference_mode():
        for model in variants.values():  # oneDNN makes its kernels for each dtype once
            model.inference(new[:, :2], prompt, prompt_mel, embedding, n_timesteps=steps)
        for _ in range(repeats):
            for name, model in variants.items():
                start = time.perf_counter()
                mels[name] = model.inference(new, prompt, prompt_mel, embedding, n_timesteps=steps)
                times[name].append(time.perf_counter() - start)
    base_s = statistics.median(times[BASELINE])
    results = {name: {"s": times[name], "median_s": statistics.median(times[name]),
                      "over_plain_float32": statistics.median(times[name]) / base_s,
                      "mel_snr_db": ser_db(mels[BASELINE].double().flatten().numpy(), mels[name].double().flatten().numpy())}
               for name in variants}
    return {"family": key, "checkpoint": str(checkpoint), "tokens": tokens, "prompt_tokens": prompt_tokens,
            "mel_frames": int(mels[BASELINE].shape[-1]), "steps": steps, "blocks": len(plain.estimator.transformer_blocks),
            "variants": results}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="cosyvoice3,glm-tts")
    parser.add_argument("--tokens", type=int, default=24, help="new speech tokens decoded (25 per second of audio)")
    parser.add_argument("--prompt-tokens", type=int, default=75, help="the voice prompt's tokens (3 s at 25 Hz)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="the tiny checkpoints instead of real-size random weights")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "vocalis-real-size")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "flow_precision.json")
    args = parser.parse_args(argv)
    rows = []
    for key in args.families.split(","):
        checkpoint = checkpoint_of(key, args.work_dir, args.tiny)
        rows.append(measure(key, checkpoint, args.tokens, args.prompt_tokens, args.repeats))
    print(f"flow decode ({'tiny' if args.tiny else 'real-size random'} weights), {args.tokens} tokens after {args.prompt_tokens}, "
          f"{torch.get_num_threads()} threads, median of {args.repeats} alternating rounds; ratios and SNR against {BASELINE!r}")
    print("| family | DiT blocks | mel frames decoded | flow deploy | s | time ratio | mel SNR dB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        for name, v in r["variants"].items():
            print(f"| {r['family']} | {r['blocks']} | {r['mel_frames']} | {name} | {v['median_s']:.2f} | {v['over_plain_float32']:.2f} | "
                  f"{v['mel_snr_db']:.1f} |")
    result = {"threads": torch.get_num_threads(), "repeats": args.repeats, "rows": rows}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
