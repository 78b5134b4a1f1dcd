"""Overlapping windows over long text, for the LLM extraction path and bounded pattern scans.

Rules:
- Text of at most ``size`` characters is one window.
- Otherwise each window ends at the best break inside its last half (``MIN_FILL`` = 0.5 of
  ``size``), in this order of preference: paragraph break (blank line), sentence end
  (``.``/``!``/``?`` followed by whitespace), line break, any whitespace; with no break at
  all it cuts hard at ``size``.
- The next window starts ``overlap`` characters before the previous end, moved forward to
  the next word start (so it does not open mid-word), and always strictly after the
  previous start, so the split terminates and covers every character.
- ``Window.start``/``end`` are offsets into the original text: ``text[start:end] == window.text``.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_FILL = 0.5
_SENTENCE_ENDS = (". ", "! ", "? ", ".\n", "!\n", "?\n", ".\t")


@dataclass(frozen=True, slots=True)
class Window:
    start: int
    end: int
    text: str


def split_windows(text: str, *, size: int = 4000, overlap: int = 400) -> list[Window]:
    """Split ``text`` into windows of at most ``size`` characters overlapping by about ``overlap``."""
    if size < 1:
        raise ValueError(f"window size must be >= 1, got {size}")
    if overlap < 0 or overlap >= size:
        raise ValueError(f"overlap must be in [0, size), got overlap={overlap} size={size}")
    if not text:
        return []
    windows: list[Window] = []
    start = 0
    while True:
        if len(text) - start <= size:
            windows.append(Window(start, len(text), text[start:]))
            return windows
        end = _break(text, start, start + size)
        windows.append(Window(start, end, text[start:end]))
        start = _next_start(text, start, end, overlap)


def _break(text: str, start: int, limit: int) -> int:
    """Best break position in ``(start + MIN_FILL * size, limit]``."""
    low = start + max(1, int((limit - start) * MIN_FILL))
    para = text.rfind("\n\n", low, limit)
    if para != -1:
        return para + 2
    best = max(text.rfind(sep, low, limit) for sep in _SENTENCE_ENDS)
    if best != -1:
        return best + 2
    newline = text.rfind("\n", low, limit)
    if newline != -1:
        return newline + 1
    for pos in range(limit - 1, low - 1, -1):
        if text[pos].isspace():
            return pos + 1
    return limit


def _next_start(text: str, start: int, end: int, overlap: int) -> int:
    candidate = max(end - overlap, start + 1)
    if candidate >= end or candidate == 0 or text[candidate - 1].isspace():
        return candidate
    for pos in range(candidate, end):
        if text[pos].isspace():
            return pos + 1 if pos + 1 < end else candidate
    return candidate
