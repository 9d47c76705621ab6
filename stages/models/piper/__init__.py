"""Piper voices (VITS, ONNX): the embedded default model."""
