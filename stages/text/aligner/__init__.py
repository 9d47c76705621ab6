"""The forced-aligner stage: word times for models that cannot give their own, from a CTC acoustic model."""
