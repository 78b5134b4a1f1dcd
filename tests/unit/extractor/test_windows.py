"""Overlapping windows: coverage, overlap, break preference, validation."""

from __future__ import annotations

from itertools import pairwise

import pytest

from extractor.windows import split_windows


def test_empty_and_short_text() -> None:
    assert split_windows("", size=10, overlap=2) == []
    (only,) = split_windows("short text", size=100, overlap=10)
    assert (only.start, only.end, only.text) == (0, 10, "short text")


def test_windows_cover_everything_and_overlap() -> None:
    text = " ".join(f"word{i}" for i in range(2000))
    windows = split_windows(text, size=500, overlap=100)
    assert windows[0].start == 0 and windows[-1].end == len(text)
    for w in windows:
        assert text[w.start : w.end] == w.text
        assert len(w.text) <= 500
    for prev, nxt in pairwise(windows):
        assert prev.start < nxt.start < prev.end  # overlapping, always progressing
        assert prev.end - nxt.start <= 100
        assert text[nxt.start - 1] == " "  # never opens mid-word


def test_prefers_sentence_and_paragraph_breaks() -> None:
    sentence = "This is a sentence about nothing in particular. "
    text = sentence * 40
    for w in split_windows(text, size=300, overlap=50)[:-1]:
        assert w.text.endswith(". ")
    paragraphs = ("x" * 150 + ". more words here.\n\n") * 10
    first = split_windows(paragraphs, size=400, overlap=20)[0]
    assert first.text.endswith("\n\n")


def test_hard_cut_without_whitespace() -> None:
    text = "a" * 1000
    windows = split_windows(text, size=300, overlap=30)
    assert [len(w.text) for w in windows[:-1]] == [300] * (len(windows) - 1)
    assert windows[-1].end == 1000


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_rejects_bad_parameters(size: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        split_windows("text", size=size, overlap=overlap)
