"""Python client library and client-side CLI commands."""
