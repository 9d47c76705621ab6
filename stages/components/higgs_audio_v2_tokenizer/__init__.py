"""The Higgs Audio v2 tokenizer (`higgs_audio_v2_tokenizer`): OmniVoice's `audio_tokenizer/` and higgs-audio v2's codec."""
