"""Vocalis: a gRPC-first streaming text-to-speech server."""

__version__ = "0.1.0"
