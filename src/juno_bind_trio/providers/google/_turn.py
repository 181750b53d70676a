"""One Gemini turn folded from its streamed parts, whichever path read them.

Both stream paths of the adapter end here: the SDK path hands over the parts
of each ``GenerateContentResponse`` model, the lean path (``_lean.py``) the
parts of each chunk as ``json.loads`` made it. One folder for both is what
makes the paths agree: a part means the same thing whoever parsed it. It
feeds the text stream and the watchdog as parts arrive, keeps every thought
signature by the part it came on (base64 text, as the wire carries it), and
at the end judges the turn (a body without a finish reason is cut off, a
blocked prompt is the content filter) and builds the
[`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult].
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any, Final, final

from juno_bind_trio.completion import StreamWatchdog
from juno_bind_trio.loop import ModelTurnResult
from juno_bind_trio.providers._adapter import PROVIDER_STATE_KEY
from juno_bind_trio.providers._reader import StreamReader, refuse_a_defect

from ._convert import NAME, arguments_text

if TYPE_CHECKING:
    from juno_bind_trio.completion import TurnTextStream

__all__ = ["TurnFolder"]

_FINISH: Final = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
}


def _new_call_id() -> str:
    return "call_" + secrets.token_hex(12)


@final
class TurnFolder(StreamReader):
    """Parts in (``thought()``, ``text()``, ``call()``, ``signature()``), a turn out (``result()``).

    A method per kind of part, called in stream order; ``answered()`` /
    ``alive()`` once per chunk for the watchdog; ``finish()``, ``usage()``
    and ``blocked()`` for what a chunk says about the turn.
    """

    __slots__ = (
        "_blocked",
        "_call_signatures",
        "_calls",
        "_content",
        "_finish_reason",
        "_own_ids",
        "_signed_thoughts",
        "_text_signature",
        "_thoughts",
        "_usage",
        "alive",
        "answered",
    )

    def __init__(self, watchdog: StreamWatchdog, text_stream: TurnTextStream | None) -> None:
        super().__init__(watchdog, text_stream)
        # Public: the chunk readers (``_lean.py``, ``_adapter.py``) call them once a chunk.
        self.answered = self._answer
        """Call for a chunk that carried answer (text or a call)."""
        self.alive = self._alive
        """Call for any other chunk."""
        self._content: list[str] = []
        self._thoughts: list[str] = []
        self._signed_thoughts: list[dict[str, str]] = []
        self._call_signatures: dict[str, str] = {}
        self._own_ids: list[str] = []
        self._text_signature: str | None = None
        self._finish_reason: str | None = None
        self._blocked = False
        self._calls = 0
        self._usage = (0, 0, 0, 0)

    def thought(self, text: str, signature: str | None) -> None:
        """A thought part: reasoning, liveness, never the answer's first token."""
        self._thoughts.append(text)
        reason = self._reason
        if reason is not None and text:
            reason(text)
        self._thinking()
        if signature is not None:
            self._signed_thoughts.append({"text": text, "signature": signature})

    def text(self, text: str, signature: str | None) -> bool:
        """A text part; whether it was answer (an empty one is not)."""
        if signature is not None:
            self._text_signature = signature
        if not text:
            return False
        self._content.append(text)
        observe = self._observe
        if observe is not None:
            observe(text)
        return True

    def call(self, call_id: object, name: object, args: object, signature: str | None) -> None:
        """A ``functionCall`` part, whole (Gemini never streams one in pieces)."""
        if call_id:
            self._own_ids.append(call_id)  # type: ignore[arg-type]
        else:
            call_id = _new_call_id()
        if signature is not None:
            self._call_signatures[call_id] = signature  # type: ignore[index]
        self._add_call(
            {
                "index": self._calls,
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments_text(args)},
            }
        )
        self._calls += 1

    def signature(self, signature: str) -> None:
        """A part with only a signature: the text's."""
        self._text_signature = signature

    def finish(self, reason: str) -> None:
        """The candidate's ``finishReason``, as the wire spells it (``"STOP"``)."""
        self._finish_reason = reason

    def usage(self, prompt: int, candidates: int, thoughts: int, cached: int) -> None:
        """``usageMetadata``: the harness's output is candidates and thoughts, as the other
        wires count it."""
        self._usage = (prompt, candidates + thoughts, cached, thoughts)

    def blocked(self) -> None:
        """A chunk without candidates said the prompt was blocked."""
        self._blocked = True

    def result(self, started: float) -> ModelTurnResult:
        """The turn, or the defect that makes it unusable."""
        content = self._content
        text_out = "".join(content) if content else None
        finish_reason = self._finish_reason
        if self._blocked and finish_reason is None:
            finish: str | None = "content_filter"
        elif finish_reason is None:
            finish = None  # the body ended without one: cut off, whatever it said before
        else:
            finish = _FINISH.get(finish_reason, finish_reason.lower())
            if finish == "stop" and self._calls:
                finish = "tool_calls"
        accumulator = self._accumulator
        refuse_a_defect(text_out, accumulator.assembled(), finish, None)
        extra: dict[str, Any] = {}
        state: dict[str, Any] = {}
        if self._call_signatures:
            state["calls"] = self._call_signatures
        if self._text_signature is not None:
            state["text"] = self._text_signature
        if self._signed_thoughts:
            state["thoughts"] = self._signed_thoughts
        if self._own_ids:
            state["ids"] = self._own_ids
        if state:
            extra[PROVIDER_STATE_KEY] = {"provider": NAME, **state}
        input_tokens, output_tokens, cached, reasoned = self._usage
        thoughts = self._thoughts
        return ModelTurnResult(
            content=text_out,
            tool_calls=accumulator.tool_calls(),
            reasoning="".join(thoughts) if thoughts else None,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_tokens=cached,
            reasoning_tokens=reasoned,
            time_to_first_token=self._time_to_first_token(started),
            extra=extra,
        )
