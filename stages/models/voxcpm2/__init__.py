"""VoxCPM2 (OpenBMB): tokenizer-free TTS, continuous latent patches from a MiniCPM4 LM, LocDiT flow matching, AudioVAE v2 at 48 kHz."""
