"""A tool call's arguments as they stream: the event a live surface shows them from.

A tool call is not output (see ``completion/_text_stream.py``): it changes
nothing until it is dispatched, after the turn. But a user waiting on a long
argument (a file the model is writing, a query it is composing) wants to see
it arrive, and the frontends' protocols have a part for it. So the turn text
stream forwards each fragment as a
[ToolCallDeltaEvent][juno_bind_trio.completion.ToolCallDeltaEvent] to a sink
that asks for them, under the same attempt rules as text: a fallback's reset
withdraws what an abandoned attempt streamed of its calls along with its
text, and the retry's first fragment sends that reset first.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import attrs

__all__ = ["ToolCallDeltaEvent"]


@attrs.frozen
class ToolCallDeltaEvent:
    """One fragment of a streamed tool call of turn *turn_id*.

    *index* is the call's position in the assistant message (the provider's
    index); *tool_call_id* and *name* are ``None`` until a fragment carried
    them (most providers send both on the first fragment, some on every one);
    *delta* is the next piece of the raw JSON arguments, to concatenate
    (``""`` on a fragment that carried only the id or name).

    What the fragments add up to is the call as the model streamed it; the
    call the run dispatches is the assistant message's, once the turn ended.
    """

    kind: ClassVar[Literal["tool_call_delta"]] = "tool_call_delta"
    turn_id: str
    index: int
    tool_call_id: str | None
    name: str | None
    delta: str

    def to_wire(self) -> dict[str, Any]:
        """``{"kind": "tool_call_delta", "turnId", "index", "toolCallId", "toolName", "delta"}``."""
        return {
            "kind": "tool_call_delta",
            "turnId": self.turn_id,
            "index": self.index,
            "toolCallId": self.tool_call_id,
            "toolName": self.name,
            "delta": self.delta,
        }
