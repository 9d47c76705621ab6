"""OpenAI-compatible HTTP/WebSocket gateway: a gRPC client that translates."""
