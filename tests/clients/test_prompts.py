"""The bundled prompt set and prompt files."""

from __future__ import annotations

import pytest

from vocalis.clients import prompts


def test_bundled_prompts_cover_three_lengths():
    mixed = prompts.bundled()
    assert {p.category for p in mixed} == {"short", "medium", "long"}
    assert len({p.text for p in mixed}) == len(mixed), "every prompt is distinct"
    assert [p.category for p in mixed[:3]] == ["short", "medium", "long"], "lengths are interleaved"
    assert max(p.words for p in mixed if p.category == "short") < 15
    assert all(25 <= p.words <= 60 for p in mixed if p.category == "medium")
    assert all(180 <= p.words <= 230 for p in mixed if p.category == "long")


def test_bundled_by_category():
    assert {p.category for p in prompts.bundled(["long"])} == {"long"}
    with pytest.raises(ValueError, match="unknown prompt categories"):
        prompts.bundled(["huge"])


def test_prompt_files(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("First paragraph,\nwrapped over lines.\n\nSecond one.\n\n\n")
    assert [p.text for p in prompts.from_file(path)] == ["First paragraph, wrapped over lines.", "Second one."]
    assert [p.text for p in prompts.from_file(path, "lines")] == ["First paragraph,", "wrapped over lines.", "Second one."]
    assert {p.category for p in prompts.from_file(path)} == {"file"}
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(ValueError, match="holds no text"):
        prompts.from_file(tmp_path / "empty.txt")
