"""Each model family's tiny checkpoint, found or built in one place, for every test that loads a family as the
server does: the shared family servers (tests/e2e/family_servers.py), the checks run across families
(tests/stages/models/test_prompt_room.py, tests/family_cases.py) and the serving bench's tiny cases
(bench/gpu.py).

`<family>(root)`, named as the family's folder under stages/models, is its checkpoint directory (Piper has none: the
server embeds a Piper voice). A committed checkpoint read as it is (Qwen3-TTS, OmniVoice, AuK) is returned in place;
one built by a script (or copied, where a server may write beside it) lands under `root`. Builders import lazily:
importing this file loads no torch.
"""

from __future__ import annotations

import shutil
from pathlib import Path

GOLDENS = Path(__file__).resolve().parent / "goldens"


def qwen3_tts(root: Path, variant: str = "cv-1b7") -> Path:
    """The committed tiny Qwen3-TTS checkpoint of `variant` (cv-1b7 CustomVoice, vd-1b7 VoiceDesign, base-1b7 Base)."""
    return GOLDENS / "qwen3_tts" / variant


def voxcpm2(root: Path) -> Path:
    return Path(shutil.copytree(GOLDENS / "voxcpm2" / "tiny", root / "voxcpm2-tiny"))


def omnivoice(root: Path) -> Path:
    return GOLDENS / "omnivoice" / "tiny"


def higgs_audio_v2(root: Path) -> Path:
    from tests.goldens.higgs_audio_v2.checkpoint import native

    return native(root / "tiny-higgs")


def fish_speech(root: Path) -> Path:
    return Path(shutil.copytree(GOLDENS / "fish_speech" / "tiny", root / "s2-pro-tiny"))


def drama3(root: Path) -> Path:
    from tests.tiny_drama3.build import build_checkpoint

    return build_checkpoint(root / "drama-3-tiny")


def cosyvoice3(root: Path) -> Path:
    from tests.goldens.cosyvoice3.tiny import build

    return build(root / "cosyvoice3-tiny")


def glm_tts(root: Path) -> Path:
    from tests.goldens.glm_tts.tiny import build

    return build(root / "glm-tts-tiny")


def voxtral(root: Path) -> Path:
    from tests.goldens.voxtral.build_tiny import build

    return build(root / "Voxtral-4B-TTS-2603")


def gepard(root: Path) -> Path:
    from tests.tiny_gepard.build import build_checkpoint

    return build_checkpoint(root / "gepard-tiny")


def auk(root: Path) -> Path:
    return GOLDENS / "auk" / "tiny"

