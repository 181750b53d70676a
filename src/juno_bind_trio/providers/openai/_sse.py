"""The server-sent-event reading of a chat-completions body, as the openai SDK reads it.

The lean stream path (``stream_path="lean"`` in ``_stream.py``) lets the SDK
send the request and reads the body itself, because the SDK's own reader
builds a pydantic ``ChatCompletionChunk`` per chunk, which is most of its
cost, and the turn needs a plain ``dict``. Reading it differently from the
SDK would be worse than slow: a provider whose stream the SDK accepts and
this package refused (or the other way round) would route differently
depending on an option. So the decoder follows the SDK's rules (openai's
``_streaming.py``, ``SSEDecoder``), quirks included, and a differential test
(``tests/providers/test_openai_lean_stream.py``) holds it to them:

* a line ends at ``\\n``, ``\\r`` or ``\\r\\n``, a ``\\r\\n`` split across
  two reads included; each line is decoded as UTF-8 on its own (an invalid
  byte raises ``UnicodeDecodeError`` when its line is complete);
* a blank line dispatches the event when it has an event name, data, a
  retry, *or an id seen on any earlier event* (the last event id is never
  reset, as the HTML specification says, so after one ``id:`` line every
  blank line dispatches an event, with empty data: ``json.loads("")`` then
  fails, in both paths);
* ``:`` starts a comment; ``data`` lines of one event are joined by ``\\n``;
  one space after the colon is dropped; an unknown field is ignored;
* text after the last line end never dispatches an event, but it is still
  decoded (a truncated multi-byte character raises, as in the SDK).
"""

from __future__ import annotations

import contextlib
import ssl
import sys
from collections.abc import Iterable, Iterator
from typing import Final, final

import anyio

__all__ = ["SSEDataDecoder", "drain_errors", "request_errors", "timeout_errors"]

_LF: Final = b"\n"
_CR: Final = b"\r"
_END: Final = b"\n\n"
_DATA: Final = b"data: "


@final
class SSEDataDecoder:
    """Bytes in, ``(event name or None, data)`` pairs out, one pair per dispatched event.

    Synchronous and incremental: ``feed()`` each piece of the body as it
    arrives, ``finish()`` once at its end.
    """

    __slots__ = ("_cr", "_data", "_event", "_id", "_partial", "_retry")

    def __init__(self) -> None:
        self._partial = b""  # the bytes of a line not ended yet
        self._cr = False  # the last piece ended in "\r": a "\n" first in the next one is its pair
        self._event: str | None = None
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, piece: bytes) -> Iterable[tuple[str | None, str]]:
        """The events completed by *piece*, one at a time.

        Lazily, as the SDK's decoder yields them: a line that is not UTF-8
        raises only after the events before it were handled, so a fault they
        raise (an ``error`` event) comes first, as it does in the SDK.
        """
        # The common piece, one whole ``data:`` event and nothing else, read
        # without splitting lines: what the general rules make of it, exactly,
        # when nothing of an earlier event is pending.
        if (
            piece[-2:] == _END
            and piece[:6] == _DATA
            and not self._partial
            and not self._cr
            and not self._data
            and self._event is None
            and self._retry is None
        ):
            rest = piece[6:-2]
            if _LF not in rest and _CR not in rest:
                return ((None, rest.decode("utf-8")),)
        return self._events(piece)

    def _events(self, piece: bytes) -> Iterator[tuple[str | None, str]]:
        if not piece:
            return
        if self._cr:
            self._cr = False
            if piece[:1] == _LF:
                piece = piece[1:]
        if _CR in piece:
            if piece[-1:] == _CR:
                # The line is ended either way; whether by "\r" or "\r\n" the
                # next piece says, and its "\n" must not end an empty line.
                self._cr = True
            piece = piece.replace(b"\r\n", _LF).replace(_CR, _LF)
        if self._partial:
            piece = self._partial + piece
        lines = piece.split(_LF)
        self._partial = lines.pop()
        for raw in lines:
            if raw:
                self._line(raw.decode("utf-8"))
            elif self._data or self._event or self._id or self._retry is not None:
                # A blank line ends an event.
                event = (self._event or None, "\n".join(self._data))
                self._event = None
                self._data = []
                self._retry = None
                yield event

    def finish(self) -> None:
        """The body ended: decode the unended line (it dispatches nothing)."""
        if self._partial:
            self._line(self._partial.decode("utf-8"))
            self._partial = b""

    def _line(self, line: str) -> None:
        if line[0] == ":":
            return  # a comment
        field, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\0" not in value:
                self._id = value
        elif field == "retry":
            with contextlib.suppress(ValueError):
                self._retry = int(value)


def timeout_errors() -> tuple[type[Exception], ...]:
    """What a read of the body raises for a read timeout: the SDK's ``APITimeoutError`` cases."""
    import httpx2

    legacy = sys.modules.get("httpx")
    if legacy is None:
        return (httpx2.TimeoutException,)
    return (httpx2.TimeoutException, legacy.TimeoutException)


def request_errors() -> tuple[type[Exception], ...]:
    """What a read of the body raises for a lost connection: the SDK's ``APIConnectionError``
    cases (a TLS failure that the transport does not map, and an ended TCP stream, included)."""
    import httpx2

    legacy = sys.modules.get("httpx")
    errors: tuple[type[Exception], ...] = (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream)
    return errors if legacy is None else (*errors, legacy.RequestError)


def drain_errors() -> tuple[type[Exception], ...]:
    """What reading the rest of a finished body may raise and is ignored (the answer is in)."""
    import httpx2

    return (*request_errors(), httpx2.StreamConsumed, httpx2.StreamClosed)
