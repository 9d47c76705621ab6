"""Goldens of the GLM-TTS speech LM from transformers' LlamaForCausalLM on the tiny checkpoint's llm/ directory.

No upstream GLM-TTS installs from PyPI, so the LM's oracle is the library the published code itself loads the LM with:
`LlamaForCausalLM.from_pretrained(llm/)`, fed the published input layout [prompt text, text, <|begin_of_audio|>,
prompt speech as <|audio_k|> ids] and decoded greedily with the stop tokens masked for the first min_len steps.
Run in the reference venv (torch + transformers, no vocalis):

    .venv/bin/python -m tests.goldens.glm_tts.tiny /tmp/glm-tiny
    /work/refvenv/tf/bin/python tests/goldens/glm_tts/make_goldens.py /tmp/glm-tiny

writes lm_goldens.safetensors and lm_goldens.json beside this script.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import LlamaForCausalLM

HERE = Path(__file__).parent
# The tiny tokenizer's ids (tests check them): "hello world" + " ", "this is a tiny voice", then <|begin_of_audio|>.
PROMPT_TEXT = [259, 306, 32]
TEXT = [266, 312, 313, 316, 321]
BEGIN_OF_AUDIO, AUDIO_START, STOPS = 356, 358, [350, 354]
PROMPT_SPEECH = [5, 17, 63, 0, 42, 42, 7, 30]
STEPS, MIN_LEN = 24, 10


def main(checkpoint: Path) -> None:
    model = LlamaForCausalLM.from_pretrained(checkpoint / "llm", dtype=torch.float32, attn_implementation="eager").eval()
    ids = PROMPT_TEXT + TEXT + [BEGIN_OF_AUDIO] + [AUDIO_START + t for t in PROMPT_SPEECH]
    with torch.no_grad():
        out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        prompt_logits, prompt_hidden = out.logits[0], out.hidden_states[-1][0]
        tokens, past, step_ids = [], None, torch.tensor([ids])
        for step in range(STEPS):
            out = model(input_ids=step_ids, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1].clone()
            if step < MIN_LEN:
                logits[STOPS] = float("-inf")
            token = int(logits.argmax())
            if token in STOPS:
                break
            tokens.append(token)
            step_ids = torch.tensor([[token]])
    save_file({"prompt_logits": prompt_logits.contiguous(), "prompt_hidden": prompt_hidden.contiguous()}, str(HERE / "lm_goldens.safetensors"))
    digest = hashlib.sha256((checkpoint / "llm" / "model.safetensors").read_bytes()).hexdigest()
    (HERE / "lm_goldens.json").write_text(json.dumps({
        "model_safetensors_sha256": digest, "prompt_text": PROMPT_TEXT, "text": TEXT, "begin_of_audio": BEGIN_OF_AUDIO,
        "audio_start": AUDIO_START, "stops": STOPS, "prompt_speech": PROMPT_SPEECH, "min_len": MIN_LEN, "steps": STEPS,
        "greedy_ids": tokens, "transformers": __import__("transformers").__version__, "torch": torch.__version__,
    }, indent=1) + "\n")
    print(len(tokens), tokens)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
