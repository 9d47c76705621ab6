"""Families register by existing: every stages/models/*/family.py is found, without importing torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from vocalis.stages.api import family as families

BUILTIN = {"piper", "qwen3_tts", "omnivoice", "voxcpm2", "voxtral", "auk", "gepard", "higgs_audio_v2", "cosyvoice3", "fish_speech",
           "glm_tts", "drama3"}


def test_shipped_families_are_discovered_without_torch():
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # any import of torch (or onnxruntime) now fails
        sys.modules["onnxruntime"] = None
        from vocalis.stages.api import family
        print(sorted(f.name for f in family.discover()))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert set(eval(out.stdout)) == BUILTIN


def test_the_template_family_is_not_shipped_and_registers_without_torch():
    assert "vocalis.stages.models._template.family" not in families.builtin_family_modules()
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None
        from vocalis.stages.api import family
        print(family.import_family_module("vocalis.stages.models._template.family").name)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "tiny_tts"


def test_a_new_family_folder_is_the_whole_registration(tmp_path, monkeypatch):
    package = tmp_path / "fake_models"
    (package / "newfam").mkdir(parents=True)
    (package / "notafamily").mkdir()
    (package / "_template").mkdir()
    for folder in (package, package / "newfam", package / "notafamily", package / "_template"):
        (folder / "__init__.py").write_text("")
    for name in ("newfam", "_template"):  # a folder starting with `_` is not shipped, family.py or not
        (package / name / "family.py").write_text(textwrap.dedent(f"""
            from pathlib import Path
            from vocalis.stages.api.family import ModelFamily
            FAMILY = ModelFamily(name="{name}", model_types=("{name}_tts",), deploy_defaults=Path("deploy.yaml"), load=lambda p, d: None)
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(families, "BUILTIN_PACKAGE", "fake_models")
    assert families.builtin_family_modules() == ["fake_models.newfam.family"]
    families.discover()
    config = tmp_path / "ckpt"
    config.mkdir()
    (config / "config.json").write_text('{"model_type": "newfam_tts"}')
    assert families.family_for_checkpoint(config).name == "newfam"


def test_a_family_module_must_define_family():
    with pytest.raises(ValueError, match="defines no FAMILY"):
        families.import_family_module("vocalis.stages.runtime.chunking")
