"""Voxtral TTS (mistralai/Voxtral-4B-TTS-2603): Mistral-format checkpoint, semantic + flow-matched acoustic codes per frame."""
