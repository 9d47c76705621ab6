"""Shared sub-models with two or more users among the families: codecs, HiFT, the flow DiT and its matching, causal
streams and stateful codec decoding, speech encoders (Whisper, wav2vec2), CAMPPlus and speech features. Built from
`layers`; never imports a family."""
