"""The ChatML prompt AuK's thinker was trained on, as token ids.

`<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{instruction}` + (with a clip)
`<|audio_bos|>` + one `<|AUDIO|>` per audio-tower output + `<|audio_eos|>`, or (text only) the literal
`|<no_prompt_audio>|`, then `<|im_end|>\n<|im_start|>assistant\n`. The audio ids come from config.json.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from vocalis.stages.models.auk.config import NO_PROMPT_AUDIO_MARKER, AuKConfig

SYSTEM = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
ASSISTANT = "<|im_end|>\n<|im_start|>assistant\n"


class PromptBuilder:
    def __init__(self, tokenizer: Tokenizer, config: AuKConfig) -> None:
        self.tokenizer = tokenizer
        self.config = config

    @classmethod
    def from_dir(cls, path: Path, config: AuKConfig) -> PromptBuilder:
        file = path / "tokenizer.json"
        if not file.is_file():
            raise ValueError(f"{path} has no tokenizer.json (the Qwen2.5-Omni tokenizer)")
        return cls(Tokenizer.from_file(str(file)), config)

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def ids(self, instruction: str, audio_tokens: int | None) -> list[int]:
        """The prompt of `instruction`, with `audio_tokens` placeholders for a clip (None: text only)."""
        if audio_tokens is None:
            if not instruction.endswith(NO_PROMPT_AUDIO_MARKER):
                instruction += NO_PROMPT_AUDIO_MARKER
            return self._encode(SYSTEM + instruction + ASSISTANT)
        config = self.config
        audio = [config.audio_start_token_id, *[config.audio_token_id] * audio_tokens, config.audio_end_token_id]
        return self._encode(SYSTEM + instruction) + audio + self._encode(ASSISTANT)
