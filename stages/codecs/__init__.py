"""Neural audio codecs shared by more than one model family (ARCHITECTURE.md: a family reuses another's component
only from the shared floor)."""
