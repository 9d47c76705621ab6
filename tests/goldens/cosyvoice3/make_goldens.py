"""Goldens of the CosyVoice3 speech LM from transformers' Qwen2ForCausalLM on the tiny checkpoint's weights.

No upstream CosyVoice3 installs from PyPI, so the LM's oracle is the standard block it is built on: the
`llm.model.*` tensors of llm.pt loaded into transformers' Qwen2ForCausalLM (config from CosyVoice-BlankEN/), the
published input layout [sos, text, task id, prompt speech tokens] and the published greedy decode (stop tokens
masked for the first min_len steps). Run in the reference venv (torch + transformers, no vocalis):

    .venv/bin/python -m tests.goldens.cosyvoice3.tiny /tmp/cosy-tiny
    /work/refvenv/tf/bin/python tests/goldens/cosyvoice3/make_goldens.py /tmp/cosy-tiny

writes lm_goldens.safetensors and lm_goldens.json beside this script.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import Qwen2Config, Qwen2ForCausalLM

HERE = Path(__file__).parent
TEXT_IDS = [72, 101, 108, 108, 111, 269, 44, 277, 282, 284, 287, 295, 46]
PROMPT_SPEECH = [5, 17, 63, 0, 42, 42, 7, 30, 12, 9]
SPEECH_TOKENS, SOS, TASK_ID = 64, 64, 66
STEPS, MIN_LEN = 24, 20


def main(checkpoint: Path) -> None:
    torch.manual_seed(0)
    state = torch.load(checkpoint / "llm.pt", map_location="cpu", weights_only=True)
    config = Qwen2Config.from_pretrained(checkpoint / "CosyVoice-BlankEN")
    config._attn_implementation = "eager"
    model = Qwen2ForCausalLM(config).eval()
    prefix = "llm.model."
    missing, unexpected = model.load_state_dict({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    decoder = state["llm_decoder.weight"]
    speech = state["speech_embedding.weight"]
    with torch.no_grad():
        embeds = torch.cat([speech[SOS][None], model.model.embed_tokens(torch.tensor(TEXT_IDS)), speech[TASK_ID][None],
                            speech[torch.tensor(PROMPT_SPEECH)]])[None]
        prompt_hidden = model.model(inputs_embeds=embeds).last_hidden_state[0]
        prompt_logits = prompt_hidden @ decoder.T
        tokens, past, step_input = [], None, embeds
        for step in range(STEPS):
            out = model.model(inputs_embeds=step_input, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.last_hidden_state[0, -1] @ decoder.T
            if step < MIN_LEN:
                logits[SPEECH_TOKENS:] = float("-inf")
            token = int(logits.argmax())
            if token >= SPEECH_TOKENS:
                break
            tokens.append(token)
            step_input = speech[token][None, None]
    save_file({"prompt_logits": prompt_logits.contiguous(), "prompt_hidden": prompt_hidden.contiguous()}, str(HERE / "lm_goldens.safetensors"))
    digest = hashlib.sha256((checkpoint / "llm.pt").read_bytes()).hexdigest()
    (HERE / "lm_goldens.json").write_text(json.dumps({
        "llm_pt_sha256": digest, "text_ids": TEXT_IDS, "prompt_speech": PROMPT_SPEECH, "min_len": MIN_LEN, "steps": STEPS,
        "greedy_tokens": tokens, "transformers": __import__("transformers").__version__, "torch": torch.__version__,
    }, indent=1) + "\n")
    print(len(tokens), tokens)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
