"""The model line CosyVoice3 and GLM-TTS share (a lineage package, as sglang's `deepseek_common`): the flow-matching +
HiFT chunk decoder, GLM-TTS's flow DiT it dispatches to, RAS sampling and the Qwen2 rope stack. Families import it;
it imports no family."""
