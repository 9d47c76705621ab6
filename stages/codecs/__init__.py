"""Audio codecs that more than one model family uses, written once (a family never imports another family)."""
