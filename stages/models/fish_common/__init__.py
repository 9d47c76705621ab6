"""The model line Fish Speech S2 Pro and Fish Audio Drama 3 share (a lineage package): Fish Audio's DAC codec, its
gpt-fast blocks, and the codec's reference encoder and chunk decoder. Families import it; it imports no family."""
