"""Voxtral TTS (mistralai/Voxtral-4B-TTS-2603): a Mistral-format checkpoint; per 12.5 Hz frame a semantic code from the
decoder's hidden state and 36 acoustic FSQ codes by flow matching; the audio tokenizer's decoder makes 24 kHz audio.

What is checked against what (tests/stages/models/voxtral, tests/goldens/voxtral):
- request -> token ids: mistral-common 1.13.1's `encode_speech_request`, id for id (an upstream oracle);
- the decoder: transformers' MistralModel on the tiny checkpoint's weights (an oracle for the layers and the RoPE
  permutation of Mistral's consolidated wq/wk);
- the acoustic transformer: transformers' MistralDecoderLayer without rotation or mask; the Euler loop, the guidance and
  FSQ around it follow vLLM-Omni's description (no oracle: no Voxtral TTS implementation installs from PyPI; the only
  one is vLLM-Omni's, which needs CUDA vLLM);
- the audio tokenizer's decoder (ALiBi windowed attention, layer scale, causal convs): no oracle; self-consistency only
  (chunked == whole decode, causality and the measured receptive field), with the published key set and shapes;
- the audio tokenizer's encoder (cloning from `ref_audio`): no oracle and no published weights (the open release
  lacks them); built as vLLM-Omni describes it, loaded only when a checkpoint has it, the prompt's row count checked
  against mistral-common;
- self-consistency of the whole: batch invariance of the codes, seed determinism, every tensor matters.
"""
