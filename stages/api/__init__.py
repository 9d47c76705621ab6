"""The family API: what a model family declares and raises (the family and stage-model protocols, errors, extra
params, references, max_new_tokens, config readers). Torch-free."""
