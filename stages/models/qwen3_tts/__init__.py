"""Qwen3-TTS (12 Hz): CustomVoice, VoiceDesign and Base (voice cloning) checkpoints, loaded as published."""
