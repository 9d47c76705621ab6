"""Writes tekken_tiny.json and prompt_goldens.json: run with mistral-common 1.13.1 installed (a separate venv, e.g.
`python3 -m venv /tmp/vx && /tmp/vx/bin/pip install 'mistral-common[audio]==1.13.1' && /tmp/vx/bin/python make_tekken.py`).

tekken_tiny.json is mistral-common's own tekken_240911.json cut to its first VOCAB ranks (BPE ranks are merge order,
so a prefix is a valid tokenizer: mistral-common itself cuts vocabularies that way), with the speech special tokens
at the ranks the Voxtral TTS checkpoint uses ([AUDIO] 24, [BEGIN_AUDIO] 25, [NEXT_AUDIO_TEXT] 35,
[REPEAT_AUDIO_TEXT] 36) and an `audio` section with preset voices. The goldens are mistral-common's
`encode_speech_request` ids for each case on this file, preset voices and reference clips of several lengths.
"""

from __future__ import annotations

import json
from pathlib import Path

import mistral_common
from mistral_common.protocol.speech.request import SpeechRequest
from mistral_common.tokens.tokenizers.base import SpecialTokens
from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

HERE = Path(__file__).parent
VOCAB = 3000
SPECIALS = {1: "<s>", 2: "</s>", 24: "[AUDIO]", 25: "[BEGIN_AUDIO]", 35: "[NEXT_AUDIO_TEXT]", 36: "[REPEAT_AUDIO_TEXT]"}
NUM_SPECIAL = 1000
VOICES = {"neutral_female": 3, "neutral_male": 4, "casual_male": 5, "fr_female": 2}
CASES = [
    ("Hello world, this is a tiny voice.", "neutral_female"),
    ("Bonjour à tous ! Ça va très bien, merci.", "fr_female"),
    ("Numbers 1234 and symbols <s> [AUDIO] stay text.", "casual_male"),
    ("  Leading spaces,\nnew lines\tand tabs.", "neutral_female"),
    ("日本語のテキストも大丈夫です。", "casual_male"),
]


def tekken(vocab: list[dict], vocab_size: int, pattern: str) -> dict:
    names = dict(SPECIALS)
    free = (i for i in range(NUM_SPECIAL) if i not in SPECIALS)
    for token in SpecialTokens:  # every control token mistral-common's instruct tokenizer looks up, at free ranks
        if token.value not in names.values():
            names[next(free)] = token.value
    special = [{"rank": i, "token_str": names.get(i, f"<SPECIAL_{i}>"), "is_control": True} for i in range(NUM_SPECIAL)]
    return {
        "config": {"pattern": pattern, "num_vocab_tokens": len(vocab), "default_vocab_size": vocab_size,
                   "default_num_special_tokens": NUM_SPECIAL, "version": "v7"},
        "vocab": vocab,
        "special_tokens": special,
        "audio": {"sampling_rate": 24000, "frame_rate": 12.5, "voice_num_audio_tokens": VOICES,
                  "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400}},
    }


REFERENCE_SAMPLES = [1, 1919, 1920, 1921, 24000, 25000]
"""Lengths (at 24 kHz) of reference clips whose prompts are recorded: the [AUDIO] count is frames + 1."""


def encode(path: Path) -> list[dict]:
    tokenizer = MistralTokenizer.from_file(str(path))
    return [{"text": text, "voice": voice, "ids": tokenizer.encode_speech_request(SpeechRequest(input=text, voice=voice)).tokens}
            for text, voice in CASES]


def encode_references(path: Path) -> list[dict]:
    import io

    import numpy as np
    import soundfile as sf

    tokenizer = MistralTokenizer.from_file(str(path))
    cases = []
    for n in REFERENCE_SAMPLES:
        buffer = io.BytesIO()
        sf.write(buffer, (0.3 * np.sin(np.arange(n) / 24000 * 2 * np.pi * 200)).astype(np.float32), 24000, format="WAV")
        request = SpeechRequest(input=CASES[0][0], ref_audio=buffer.getvalue())
        cases.append({"text": CASES[0][0], "ref_samples": n, "ids": tokenizer.encode_speech_request(request).tokens})
    return cases


def main() -> None:
    real = json.loads((Path(mistral_common.__file__).parent / "data" / "tekken_240911.json").read_text())
    pattern = real["config"]["pattern"]
    tiny = tekken(real["vocab"][:VOCAB], NUM_SPECIAL + VOCAB, pattern)
    (HERE / "tekken_tiny.json").write_text(json.dumps(tiny, ensure_ascii=False))
    goldens = {"mistral_common": mistral_common.__version__, "cases": encode(HERE / "tekken_tiny.json"),
               "references": encode_references(HERE / "tekken_tiny.json")}
    (HERE / "prompt_goldens.json").write_text(json.dumps(goldens, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
