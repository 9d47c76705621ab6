"""The Vocalis server: process entry, gRPC services, engine, audio encoding."""
