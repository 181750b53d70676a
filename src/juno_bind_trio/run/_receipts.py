"""Tool-call receipts: on resume, reuse what was done, redo what is safe, refuse the rest.

A run that stopped part-way (a crash, a deploy, a cancel, a suspend for a
human) is resumed from its transcript. Some of the tool calls in its last
batch finished and some did not, and the resume has to decide, for each,
whether to run it again. Getting that wrong in one direction loses work; in
the other it sends the email twice, charges the card twice, posts the
comment twice.

A host keeps a **receipt** per call: a record, keyed by
[`ToolCallReceiptKey`][juno_bind_trio.run.ToolCallReceiptKey], of how far the call got
([`ReceiptState`][juno_bind_trio.run.ReceiptState]). On resume,
[`decide_tool_call_receipt()`][juno_bind_trio.run.decide_tool_call_receipt] turns that record and
what the host knows about the tool ([`EffectResumability`][juno_bind_trio.run.EffectResumability])
into one of three actions. The table is the whole policy:

=================  ===============  ===================
state              ``repeatable``   ``non_repeatable``
=================  ===============  ===================
``"absent"``       run              run
``"not_run"``      run              run
``"started"``      run              **refuse**
``"interrupted"``  run              **refuse**
``"succeeded"``    reuse            reuse
``"failed"``       reuse            reuse
=================  ===============  ===================

* A call that never started (no receipt, or the harness's own ``not_run``
  refusal) has no effect to repeat, so it runs whatever the tool is.
* A call that finished, well or badly, has a recorded answer, and the
  transcript must say what it said the first time: reuse it. Re-running a
  failed call is the *model's* decision, made by asking again, never the
  resume's.
* A call that **started and did not finish** (``started`` with no final
  record: the process died; ``interrupted``: a cancel cut it off) may or may
  not have had its effect. Running a repeatable one again is safe by
  definition. A non-repeatable one is refused: the host answers it with
  [`INTERRUPTED_TOOL_CALL_MESSAGE`][juno_bind_trio.INTERRUPTED_TOOL_CALL_MESSAGE] (check the effect
  before repeating it) or asks a person. It is never silently run twice.

Keys and hashes
---------------

The key holds the arguments' hash as well as the call id: a provider that
reuses ids (``call_0`` in every turn) would otherwise hand a new call the
old call's result. The hash is over [`canonical_json()`][juno_bind_trio.run.canonical_json], so key
order and whitespace in the model's JSON do not make the same call look different.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeAlias, final
from urllib.parse import quote

import attrs

from juno_bind_trio._calls import ToolCall
from juno_bind_trio._json import canonical, canonical_json, sha256_hex
from juno_bind_trio._validate import error_kind

__all__ = [
    "DigestFn",
    "EffectResumability",
    "ReceiptAction",
    "ReceiptDecision",
    "ReceiptState",
    "ToolCallReceiptKey",
    "canonical_json",
    "decide_tool_call_receipt",
    "tool_call_args_hash",
    "tool_call_idempotency_key",
    "tool_call_receipt_key",
    "tool_call_receipt_key_string",
]

ReceiptState: TypeAlias = Literal[
    "absent", "not_run", "started", "interrupted", "succeeded", "failed"
]
"""How far a call got, as the host's receipt records it.

``"absent"``: no receipt. ``"not_run"``: the harness refused it before it
started. ``"started"``: it began and nothing recorded its end.
``"interrupted"``: a cancel cut it off. ``"succeeded"`` / ``"failed"``: it
ran and its result is recorded.
"""

EffectResumability: TypeAlias = Literal["repeatable", "non_repeatable"]
"""Whether running the tool twice is safe: ``"repeatable"`` (a read, or an
idempotent write) or ``"non_repeatable"`` (an email, a charge, a POST).
When unsure, say ``"non_repeatable"``: the cost is a question, not a duplicate."""

ReceiptAction: TypeAlias = Literal["reuse", "run", "refuse"]
"""What a resume does with one call."""

DigestFn: TypeAlias = Callable[[bytes], str]
"""Turns the canonical JSON's UTF-8 bytes into a digest string (default: SHA-256 hex)."""

_STATES: frozenset[str] = frozenset(ReceiptState.__args__)  # type: ignore[attr-defined]
_RESUMABILITIES: frozenset[str] = frozenset(EffectResumability.__args__)  # type: ignore[attr-defined]


def tool_call_args_hash(args: object, *, digest: DigestFn | None = None) -> str:
    """The digest of *args*' [`canonical_json()`][juno_bind_trio.run.canonical_json] (SHA-256,
    lowercase hex, by default).

    *args* is the **parsed** arguments (parse the model's string first), so
    that whitespace and key order do not change the hash. *digest* replaces
    SHA-256: it receives the canonical text's UTF-8 bytes and returns a
    non-empty string (an HMAC with a secret, for a key that must not reveal
    the arguments).

    :raises TypeError: *digest* returned something else; see
        [`canonical_json()`][juno_bind_trio.run.canonical_json] for what *args* may hold.
    """
    data = canonical(args, "tool_call_args_hash").encode("utf-8")
    if digest is None:
        return sha256_hex(data)
    result: object = digest(data)
    if not isinstance(result, str) or result == "":
        raise TypeError(
            f"tool_call_args_hash: digest must return a non-empty string, got {result!r}"
        )
    return result


def _non_empty(_instance: object, attribute: attrs.Attribute[str], value: object) -> None:
    if not isinstance(value, str) or value == "":
        raise error_kind(value, str)(
            f"ToolCallReceiptKey: {attribute.name} must be a non-empty string, got {value!r}"
        )


@final
@attrs.frozen(kw_only=True)
class ToolCallReceiptKey:
    """What identifies one tool call's effect: run, call id, tool and arguments' hash."""

    run_id: str = attrs.field(validator=_non_empty)
    tool_call_id: str = attrs.field(validator=_non_empty)
    tool_name: str = attrs.field(validator=_non_empty)
    args_hash: str = attrs.field(validator=_non_empty)


def tool_call_receipt_key(run_id: str, call: object) -> ToolCallReceiptKey:
    """The receipt key of *call* in run *run_id*: its id, its tool and its arguments' hash.

    The hash is the call's [`ToolCall.digest`][juno_bind_trio.run.ToolCall.digest]:
    over the arguments as the package's one rule parses them, so key order,
    whitespace and the ways of sending no arguments (``""``, ``"null"``,
    ``"{}"``) do not change it; arguments the rule refuses are hashed as
    their raw text. *call* is a [`ToolCall`][juno_bind_trio.run.ToolCall]
    (whose digest is then computed once for every reader) or either shape
    [`ToolCallLike`][juno_bind_trio.run.ToolCallLike] names.

    :raises TypeError: *run_id* is not a string, or *call* is not a
        function tool call with an id and a tool name.
    :raises ValueError: *run_id* is empty.
    """
    given: object = run_id
    if not isinstance(given, str) or not given:
        raise error_kind(given, str)(
            f"tool_call_receipt_key: run_id must be a non-empty string, got {run_id!r}"
        )
    try:
        made = ToolCall.of(call)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"tool_call_receipt_key: {exc}") from None
    try:
        return ToolCallReceiptKey(
            run_id=run_id, tool_call_id=made.id, tool_name=made.name, args_hash=made.digest
        )
    except TypeError as exc:
        raise TypeError(f"tool_call_receipt_key: {exc}") from None


def tool_call_idempotency_key(key: ToolCallReceiptKey) -> str:
    """The idempotency key a tool hands its effect's service, for the call *key* names.

    Derived from the run id, the call id and the arguments' hash only (the
    same value as [RunContext.idempotency_key][juno_bind_trio.agent.RunContext]
    and [DurableRun.idempotency_key][juno_bind_trio.store.DurableRun.idempotency_key]),
    so the same call asks with the same key in every process that ever
    dispatches it: the first run, and every resume after a crash. 64
    lowercase hex digits, safe for an HTTP header (``Idempotency-Key``) or
    a database column.
    """
    if not isinstance(key, ToolCallReceiptKey):
        raise TypeError(f"tool_call_idempotency_key: key must be a ToolCallReceiptKey, got {key!r}")
    return tool_call_args_hash([key.run_id, key.tool_call_id, key.args_hash])


def tool_call_receipt_key_string(key: ToolCallReceiptKey) -> str:
    """The key as one string, for a database column or a cache key.

    ``"v1:" + run_id + ":" + tool_call_id + ":" + tool_name + ":" + args_hash``,
    each part percent-encoded, so no id containing ``:`` can make two
    different keys collide, and the string says which format it is in.
    """
    if not isinstance(key, ToolCallReceiptKey):
        raise TypeError(
            f"tool_call_receipt_key_string: key must be a ToolCallReceiptKey, got {key!r}"
        )
    parts = (key.run_id, key.tool_call_id, key.tool_name, key.args_hash)
    return "v1:" + ":".join(quote(part, safe="") for part in parts)


@final
@attrs.frozen
class ReceiptDecision:
    """What to do with one call on resume: ``action`` and the ``reason``, in a sentence."""

    action: ReceiptAction
    reason: str


def _decide(state: str, resumability: str) -> ReceiptDecision:
    if state in ("succeeded", "failed"):
        return ReceiptDecision("reuse", f"the call {state}; its recorded result is the answer")
    if state in ("absent", "not_run"):
        return ReceiptDecision("run", "the call never started, so running it is safe")
    if resumability == "repeatable":
        return ReceiptDecision(
            "run", f"the call {state} without finishing, and repeating it is safe"
        )
    return ReceiptDecision(
        "refuse",
        f"the call {state} without finishing and is not safe to repeat: its effect is "
        "unknown, so check it before running the call again",
    )


# Twelve answers, built once: deciding is a lookup, and the table is checkable.
_TABLE: dict[tuple[str, str], ReceiptDecision] = {
    (state, resumability): _decide(state, resumability)
    for state in _STATES
    for resumability in _RESUMABILITIES
}


def decide_tool_call_receipt(
    state: ReceiptState, resumability: EffectResumability
) -> ReceiptDecision:
    """Decide, on resume, whether to reuse a call's recorded result, run it, or refuse.

    See the table in this module's documentation. ``"refuse"`` means: do not
    run it; answer the call with
    [`INTERRUPTED_TOOL_CALL_MESSAGE`][juno_bind_trio.INTERRUPTED_TOOL_CALL_MESSAGE], or ask a
    person.

    :raises ValueError: *state* or *resumability* is not one of its values.
    """
    try:
        return _TABLE[state, resumability]
    except (KeyError, TypeError):  # TypeError: an unhashable value
        pass
    given: object = state
    if not isinstance(given, str) or given not in _STATES:
        raise error_kind(given, str)(
            f"decide_tool_call_receipt: state must be one of {sorted(_STATES)}, got {state!r}"
        )
    raise error_kind(resumability, str)(
        "decide_tool_call_receipt: resumability must be one of "
        f"{sorted(_RESUMABILITIES)}, got {resumability!r}"
    )
