"""Every exception this package defines, in one tree.

Whose fault an error is shows in where it hangs::

    JunoBindError                      base of everything raised on purpose here
    ├── UsageError (RuntimeError)      you: the caller broke a lifetime or call-order rule
    │   └── TurnStreamUsageError       observe() before begin_attempt()
    ├── WireFormatError (ValueError)   them: a peer sent an event this protocol cannot parse
    ├── ToolCallError                  a tool call the harness refused or lost (a *result*
    │   │                              in the transcript, raised only inside outcome.Error)
    │   ├── AbortedToolCallError       never claimed: the soft stop fired first
    │   └── InterruptedToolCallError   claimed, then cut off by a cancel: effect unknown
    ├── StreamStallError               them: a provider stream went silent past a budget
    ├── CompletionDefectError          them: a completion that cannot be used as it is
    ├── RoutingError                   them: every route failed (carries the whole trail)
    └── RunTimeoutError (TimeoutError) the run's own deadline expired

Argument validation at a public boundary raises the builtin that means the
same thing (``TypeError`` for a wrong type, ``ValueError`` for a wrong value),
with a message that names the function and the value, as the TypeScript
package's own messages do. ``trio.Cancelled`` / anyio's cancellation exception
are never caught, wrapped or translated by this package.

Subpackages add their exceptions to this module, in this tree, and re-export
them from their own ``__init__``.
"""

from __future__ import annotations

__all__ = [
    "JunoBindError",
    "TurnStreamUsageError",
    "UsageError",
    "WireFormatError",
]


class JunoBindError(Exception):
    """Base class of every exception this package raises on purpose."""


class UsageError(JunoBindError, RuntimeError):
    """The caller broke a lifetime or call-order rule of an API."""


class TurnStreamUsageError(UsageError):
    """A :class:`~juno_bind_trio.completion.TurnTextStream` was driven out of order."""


class WireFormatError(JunoBindError, ValueError):
    """A wire event could not be parsed; the message names the field and the value."""
