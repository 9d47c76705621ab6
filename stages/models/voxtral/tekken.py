"""The request -> token ids layer: tekken.json (Mistral's tiktoken-based BPE) and the speech prompt.

A speech prompt is [BOS] [BEGIN_AUDIO] [AUDIO] x N [NEXT_AUDIO_TEXT] text [REPEAT_AUDIO_TEXT] [BEGIN_AUDIO], N the
preset voice's embedding rows (`audio.voice_num_audio_tokens` of tekken.json), exactly as mistral-common's
`encode_speech_request` builds it (tests compare the two id for id; mistral-common itself is not a dependency: its
numpy pin conflicts with ours). Special ids are read from the file, never assumed.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass
from pathlib import Path

import tiktoken

BOS, AUDIO, BEGIN_AUDIO = "<s>", "[AUDIO]", "[BEGIN_AUDIO]"
TEXT_TO_AUDIO, AUDIO_TO_TEXT = "[NEXT_AUDIO_TEXT]", "[REPEAT_AUDIO_TEXT]"
REQUIRED_SPECIALS = (BOS, AUDIO, BEGIN_AUDIO, TEXT_TO_AUDIO, AUDIO_TO_TEXT)


@dataclass(frozen=True)
class SpeechPrompt:
    ids: list[int]
    voice_positions: list[int]
    """Positions of the [AUDIO] placeholders that the preset's embedding rows fill, in order."""


class Tekken:
    """tekken.json: `config` (pattern, default_vocab_size, default_num_special_tokens), `vocab` (rank, token_bytes),
    `special_tokens` (rank, token_str) and `audio` (voice_num_audio_tokens)."""

    def __init__(self, path: Path) -> None:
        data = json.loads(Path(path).read_text())
        config = data["config"]
        self.num_special = int(config["default_num_special_tokens"])
        self.vocab_size = int(config.get("default_vocab_size", self.num_special + len(data["vocab"])))
        inner = self.vocab_size - self.num_special
        if len(data["vocab"]) < inner:
            raise ValueError(f"{path}: {len(data['vocab'])} vocab entries, default_vocab_size needs {inner}")
        ranks = {base64.b64decode(entry["token_bytes"]): entry["rank"] for entry in data["vocab"][:inner]}
        self._bpe = tiktoken.Encoding(name=f"tekken:{path}", pat_str=config["pattern"], mergeable_ranks=ranks, special_tokens={})
        self.specials = {entry["token_str"]: int(entry["rank"]) for entry in data.get("special_tokens", [])}
        missing = [token for token in REQUIRED_SPECIALS if token not in self.specials]
        if missing:
            raise ValueError(f"{path}: special_tokens lack {missing}, which a speech prompt needs")
        audio = data.get("audio") or {}
        self.voice_tokens: dict[str, int] = {name.lower(): int(n) for name, n in (audio.get("voice_num_audio_tokens") or {}).items()}
        """Preset voice (lower-cased) -> embedding rows its prompt holds."""
        self.sampling_rate = int(audio.get("sampling_rate", 24000))
        self.frame_rate = float(audio.get("frame_rate", 12.5))

    def encode(self, text: str) -> list[int]:
        """Text ids (special-token strings in the text are plain text, as mistral-common treats them)."""
        return [token + self.num_special for token in self._bpe.encode(text, disallowed_special=())]

    def speech_prompt(self, text: str, voice: str) -> SpeechPrompt:
        """The prompt of a preset voice."""
        rows = self.voice_tokens.get(voice.lower())
        if rows is None:
            raise ValueError(f"tekken.json lists no audio tokens for voice {voice!r}; it has {sorted(self.voice_tokens)}")
        return self.speech_prompt_rows(text, rows)

    def reference_rows(self, samples: int) -> int:
        """[AUDIO] placeholders of a reference clip of `samples` at the audio rate: its frames and the [END_AUDIO] one."""
        return math.ceil(samples / self.sampling_rate * self.frame_rate) + 1

    def speech_prompt_rows(self, text: str, rows: int) -> SpeechPrompt:
        s = self.specials
        head = [s[BOS], s[BEGIN_AUDIO]]
        ids = [*head, *[s[AUDIO]] * rows, s[TEXT_TO_AUDIO], *self.encode(text), s[AUDIO_TO_TEXT], s[BEGIN_AUDIO]]
        return SpeechPrompt(ids, list(range(len(head), len(head) + rows)))
