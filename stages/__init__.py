"""The stage runtime and the model families that run on it."""
