"""The Gepard-1.0 family as the registry sees it: a `qwen3_5_text` config.json with gepard_config.json beside it.

The published config.json names only the backbone, so the sidecar is what says Gepard; a Qwen3.5 checkpoint without
it is not loaded as Gepard (nor as anything else: the registry says which file is missing). No torch imported here.
"""

from __future__ import annotations

from vocalis.stages.api.family import checkpoint_family

FAMILY = checkpoint_family("gepard", ("qwen3_5_text",), __package__, sidecar="gepard_config.json")
