"""higgs-audio v2 (bosonai/higgs-audio-v2-generation-3B-base): a Llama talker with a DualFFN audio expert emitting
8 delayed codebooks per step, decoded by the Higgs Audio v2 tokenizer (shared with OmniVoice, `stages/codecs/`).

Upstream oracle: transformers' native `HiggsAudioV2ForConditionalGeneration`, `HiggsAudioV2Processor` and
`HiggsAudioV2TokenizerModel` (tests/goldens/higgs_audio_v2/make_goldens.py): prompt ids, reference-clip codes in the
delay pattern, teacher-forced logits, the delay pattern's forced codebooks and the decoded audio. Without an oracle:
the chat template (the checkpoint's own Jinja template is not read; the layout written in `prompt.py` is the one
vLLM-Omni and Boson's examples build), Boson's original layout (checked to load into the same model as the native
one), repetition-aware sampling (written from transformers' loop, not compared draw for draw), chunked decoding
(checked against one whole decode).
"""
