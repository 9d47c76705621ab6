"""Shared transformer building blocks for model families (nano-vllm's `layers/`).

Each block keeps the attribute names the published checkpoints use (`q_proj`, `input_layernorm`, ...), so a family
built from them loads its state dict unchanged. The real differences between families are parameters here (RMSNorm's
upcast, q/k-norm, projection bias, residual and layer scales, the RoPE variant), not look-alike copies.
"""
