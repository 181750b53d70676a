"""A live web view of a run: the shipped JavaScript client.

``STATIC_DIR`` holds ES modules a page imports as they are, with no build
step: ``turn-view.js`` (the reader rules of the turn text protocol, in
agreement with [TurnTextView][juno_bind_trio.completion.TurnTextView]) and
``renderer.js`` (one element per turn, ``aria-busy`` while it streams).
"""

from __future__ import annotations

from pathlib import Path as _Path
from typing import Final as _Final

from juno_bind_trio._public import publish as _publish

__all__ = ["STATIC_DIR"]

STATIC_DIR: _Final[_Path] = _Path(__file__).resolve().parent / "static"
"""The directory of the JavaScript client's modules, to serve under any URL prefix."""

_publish(__name__, globals(), __all__)
