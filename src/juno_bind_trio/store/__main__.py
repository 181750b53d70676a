"""``python -m juno_bind_trio.store DATABASE COMMAND``: list runs, show one, resume one,
list the runs waiting for a decision and the calls they wait on.

DATABASE is an existing SQLite file or a PostgreSQL DSN (``postgresql://...``,
or a libpq ``key=value`` string); a DSN's password is never printed.

Exit statuses, for every command: 0 when it did what it says; 2, with
``error: ...`` naming the value, for a usage error: an argument the command
cannot take (``--limit 0``, a ``--handler`` that cannot be loaded, is not
callable or is an Agent on another database), an id given on the command
line that is not there (a run, a conversation), or a database that is not
there or cannot be opened (a path with no database, a DSN that does not
connect); 1, with ``error: ...``, when the command could not finish for
another reason (a stored run that cannot be read, a run another worker
holds, a handler that failed, a conversation a run holds, a database whose
schema version is newer than this package's). A run the handler's own code
does not find (a ``RunNotFoundError`` raised while ``--handler`` runs) is
such a failure, not a mistake on the command line (the run typed was
found): ``error: --handler 'MODULE:NAME' failed: no run 'ID' is stored``, exit 1.

* ``list [--status STATUS] [--limit N]``: one line per run, tab-separated:
  id, status, iteration, lease holder (``-`` for none; ``(expired)`` once its
  time ran out), and how the run ended where the status does not say it
  (its [detail][juno_bind_trio.store.RunRecord], or ``-``), then ``agent NAME``:
  the agent in charge (the target of the run's last handoff, else the agent
  that started it; ``-`` for a run stored with no agent name). A row that
  cannot be read is listed as ``ID  unreadable  WHY``; the others still are.
* ``show RUN_ID``: the run's record (``agent``, the agent that started it, and
  ``agent_in_charge``), transcript and receipts, as JSON.
* ``waiting [--limit N]``: the suspended runs with calls waiting for a
  decision (a person's approval, a host's result), oldest first, one line
  each, tab-separated: id, how many calls wait, and ``name:id`` of each.
* ``pending RUN_ID``: every call the run waited on, as JSON, in order: its
  id, tool, validated arguments, kind, deadline, whether it still waits,
  and its decision (who decided what and when; ``null`` while it waits).
* ``resume RUN_ID --handler MODULE:NAME [--owner NAME] [--backend trio|asyncio]``:
  claim the run and ``await NAME(run)`` with its
  [DurableRun][juno_bind_trio.store.DurableRun], as
  [serve_runs][juno_bind_trio.store.serve_runs] would; or, when NAME is an
  [Agent][juno_bind_trio.agent.Agent] whose store is DATABASE,
  ``await agent.resume(RUN_ID)`` (under the agent's own ``store_owner``).
  The handler runs on Trio unless ``--backend asyncio``. Prints the run's id
  and how it ended.
* ``conversations [--limit N]``: the stored conversations
  (``Agent.run(prompt, conversation=...)``), oldest first, one line each,
  tab-separated: id, how many runs answered in it, the run whose transcript
  it holds (``-`` before the first answer), and the run holding it now
  (``-`` for none).
* ``conversation ID``: the conversation's messages, readable: one numbered
  block per message, its role, its text, the tool calls an assistant made
  (``-> name(arguments) [call id]``) and which call a tool message answers.
* ``delete-conversation ID``: delete the conversation and its runs (their
  receipts and waiting calls with them); refused while a run holds it.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import re
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any, Final, TextIO

import anyio

from juno_bind_trio._errors import (
    JunoBindError,
    RunNotFoundError,
    SchemaVersionError,
    StoreDataError,
)
from juno_bind_trio._validate import is_async_callable

from ._lease import open_durable_run
from ._owner import default_owner
from ._postgres import PostgresRunStore
from ._protocol import RunStore
from ._records import (
    RUN_STATUSES,
    ConversationRecord,
    PendingCallRecord,
    ReceiptRecord,
    RunRecord,
)
from ._sqlite import SqliteRunStore
from ._store import ThreadedRunStore

__all__ = ["main"]


class _Usage(ValueError):
    """A usage error (see the module's docstring): an argument the command cannot take,
    or what it names is not there (an id, the database itself): exit 2."""


class _Failed(Exception):
    """The command could not finish, and not for what the command line says (see the
    module's docstring): exit 1."""


def _not_there(exc: RunNotFoundError) -> _Usage:
    """The run id given on the command line is not stored: a usage error."""
    return _Usage(str(exc))


def _handler_failed(handler: str, exc: RunNotFoundError) -> _Failed:
    """The handler's code looked up a run that is not there: its failure, not the user's."""
    return _Failed(f"--handler {handler!r} failed: {exc}")


# A libpq "key=value ..." connection string starts with a parameter name and "=".
_KEYWORD_DSN: Final = re.compile(r"\s*[A-Za-z_]+\s*=")


def _open(database: str, connect_timeout: float = 10.0) -> ThreadedRunStore:
    if database.startswith(("postgresql://", "postgres://")) or _KEYWORD_DSN.match(database):
        return PostgresRunStore(database, connect_timeout=connect_timeout)
    if not os.path.exists(database):
        # Opening would create an empty database there: a typo must not look like
        # a store with no runs, nor leave a stray file behind.
        raise ValueError(f"no database at {database!r} (a SQLite file, or a PostgreSQL DSN)")
    return SqliteRunStore(database)


def _record(record: RunRecord) -> dict[str, Any]:
    return {
        "run_id": record.run_id,
        "status": record.status,
        "agent": record.agent,
        "agent_in_charge": record.agent_in_charge,
        "lineage": record.chain.to_dict(),
        "iteration": record.iteration,
        "open_iteration": record.pending_iteration,
        "lease_owner": record.lease_owner,
        "lease_token": record.lease_token,
        "lease_expires_at": record.lease_expires_at,
        "heartbeat_at": record.heartbeat_at,
        "progress": record.progress,
        "detail": record.detail,
    }


def _receipt(receipt: ReceiptRecord) -> dict[str, Any]:
    return {
        "iteration": receipt.iteration,
        "tool_call_id": receipt.tool_call_id,
        "tool_name": receipt.tool_name,
        "state": receipt.state,
        "resumability": receipt.resumability,
        "args_hash": receipt.args_hash,
        "answer": receipt.message,
    }


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _listed(run: RunRecord, now: float) -> str:
    expired = run.lease_expires_at is None or run.lease_expires_at <= now
    lease = "-" if run.lease_owner is None else run.lease_owner + (" (expired)" if expired else "")
    ending = run.detail
    if ending is None and run.status == "running" and run.lease_owner is not None and expired:
        ending = (
            "its worker stopped renewing the lease (it crashed, stalled or lost the run); "
            "any worker may claim it"
        )
    ending = "-" if ending is None else _one_line(ending)
    speaking = run.agent_in_charge or "-"
    return (
        f"{run.run_id}\t{run.status}\titeration {run.iteration}\tlease {lease}\t{ending}"
        f"\tagent {speaking}"
    )


async def _list(store: ThreadedRunStore, status: str | None, limit: int, out: TextIO) -> None:
    rows = await store._list_rows(status=status, limit=limit)  # type: ignore[arg-type]
    now = store.now()
    for row in rows:
        if isinstance(row, StoreDataError):  # marked, and the listing goes on
            out.write(f"{row.run_id or '?'}\tunreadable\t{_one_line(str(row))}\n")
        else:
            out.write(_listed(row, now) + "\n")


async def _show(store: RunStore, run_id: str, out: TextIO) -> None:
    loaded, receipts = await store.load_with_receipts(run_id)  # one moment, not two
    document = {
        "run": _record(loaded.record),
        "messages": loaded.messages,
        "open_turn": loaded.pending_turn,
        "receipts": [_receipt(r) for r in receipts],
    }
    out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


async def _waiting(store: RunStore, limit: int, out: TextIO) -> None:
    for run in await store.list_waiting(limit=limit):
        calls = await store.pending_calls(run.run_id)
        names = " ".join(f"{c.name}:{c.id}" for c in calls)
        out.write(f"{run.run_id}\t{len(calls)} waiting\t{names}\n")


def _pending_json(record: PendingCallRecord) -> dict[str, Any]:
    call, decision = record.call, record.decision
    return {
        "iteration": record.iteration,
        "id": call.id,
        "name": call.name,
        "kind": call.kind,
        "arguments": call.arguments,
        "expires_at": call.expires_at,
        "held_at": record.created_at,
        "waiting": record.waiting,
        "decision": None
        if decision is None
        else {
            "kind": decision.kind,
            "principal": decision.principal,
            "decided_at": decision.decided_at,
            "arguments": decision.arguments,
            "answer": decision.answer,
        },
    }


async def _pending(store: RunStore, run_id: str, out: TextIO) -> None:
    document = [_pending_json(r) for r in await store.call_decisions(run_id)]
    out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def _conversation_line(record: ConversationRecord) -> str:
    last = record.last_run_id or "-"
    holder = record.active_run_id or "-"
    return f"{record.conversation_id}\t{record.turns} turns\tlast {last}\theld by {holder}"


async def _conversations(store: RunStore, limit: int, out: TextIO) -> None:
    for record in await store.list_conversations(limit=limit):
        out.write(_conversation_line(record) + "\n")


def _text_of(content: object) -> str:
    """A message's content as text: a string as it is, a list of parts part by part."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        shown = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text" and isinstance(part.get("text"), str):
                shown.append(part["text"])
            else:
                shown.append(f"[{kind or 'part'}]")
        return "\n".join(shown)
    return json.dumps(content, ensure_ascii=False)


def _readable(number: int, message: dict[str, Any]) -> str:
    role = message.get("role", "?")
    head = f"--- {number} {role}"
    if role == "tool":
        head += f" (answers {message.get('tool_call_id')})"
    lines = [head]
    text = _text_of(message.get("content"))
    if text:
        lines.append(text)
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        lines.append(
            f"-> {function.get('name')}({function.get('arguments', '')}) [{call.get('id')}]"
        )
    return "\n".join(lines)


async def _conversation(store: ThreadedRunStore, conversation_id: str, out: TextIO) -> None:
    record = await store._get_conversation(conversation_id)
    if record is None:
        raise _Usage(f"no conversation {conversation_id!r} in this database")
    messages = await store.conversation_messages(conversation_id)
    out.write(_conversation_line(record) + "\n")
    for number, message in enumerate(messages, start=1):
        out.write(_readable(number, message) + "\n")


async def _delete_conversation(store: RunStore, conversation_id: str, out: TextIO) -> None:
    if not await store.delete_conversation(conversation_id):
        raise _Usage(f"no conversation {conversation_id!r} in this database; nothing deleted")
    out.write(f"{conversation_id}\tdeleted\n")


def _load_handler(handler: str) -> Any:
    module_name, _, attribute = handler.partition(":")
    if not module_name or not attribute:
        raise _Usage(f"--handler must be MODULE:NAME, got {handler!r}")
    try:
        handle = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise _Usage(f"--handler {handler!r} cannot be loaded: {exc}") from None
    if not callable(handle) and not _is_agent(handle):
        raise _Usage(f"--handler {handler!r} is not callable: {handle!r}")
    return handle


def _is_agent(handle: object) -> bool:
    """An Agent, read by its shape (this package's store does not import the agent):
    something with a ``store`` and an async ``resume`` method, not a function."""
    resume = getattr(handle, "resume", None)
    return not inspect.isroutine(handle) and hasattr(handle, "store") and is_async_callable(resume)


def _same_database(store: ThreadedRunStore, spec: object) -> bool:
    if isinstance(spec, SqliteRunStore):
        spec = spec.path
    if isinstance(spec, str | os.PathLike):
        if not isinstance(store, SqliteRunStore):
            return False
        try:
            return os.path.samefile(spec, store.path)
        except OSError:
            return False
    if isinstance(spec, PostgresRunStore):
        return isinstance(store, PostgresRunStore) and spec._safe_dsn == store._safe_dsn
    return False


async def _resume_agent(
    store: ThreadedRunStore, database: str, run_id: str, handler: str, agent: Any, out: TextIO
) -> None:
    spec = agent.store
    if spec is None:
        raise _Usage(f"--handler {handler!r} is an Agent without a store; give it store=")
    if not _same_database(store, spec):
        raise _Usage(
            f"--handler {handler!r} is an Agent whose store ({spec!r}) is not {database!r}; "
            "the command line resumes an agent's run on the agent's own store"
        )
    try:
        await store.get_run(run_id)  # the id typed: not there is a usage error
    except RunNotFoundError as exc:
        raise _not_there(exc) from None
    async with AsyncExitStack() as stack:
        if isinstance(spec, ThreadedRunStore) and not spec._opened:
            await stack.enter_async_context(spec)  # built at import, opened by nobody yet
        try:
            result = await agent.resume(run_id)
        except RunNotFoundError as exc:  # found above: the agent's (the host's) own lookup
            raise _handler_failed(handler, exc) from exc
    out.write(f"{run_id}\t{result.reason}\n")


async def _resume(
    store: ThreadedRunStore,
    database: str,
    run_id: str,
    handler: str,
    owner: str | None,
    out: TextIO,
) -> None:
    handle = _load_handler(handler)
    if _is_agent(handle):
        if owner is not None:
            raise _Usage(
                f"--owner: the Agent {handler!r} resumes under its own store_owner; leave it out"
            )
        await _resume_agent(store, database, run_id, handler, handle, out)
        return
    claimed = False
    try:
        async with open_durable_run(store, run_id, owner=owner or default_owner()) as run:
            claimed = True
            await handle(run)
    except RunNotFoundError as exc:
        if not claimed:  # the claim of the id typed
            raise _not_there(exc) from None
        raise _handler_failed(handler, exc) from exc
    record = await store.get_run(run_id)
    out.write(f"{run_id}\t{record.status}\n")


async def _main(args: argparse.Namespace, out: TextIO) -> None:
    if args.command in ("list", "waiting", "conversations") and args.limit < 1:
        raise _Usage(f"--limit must be a positive number, got {args.limit}")
    async with AsyncExitStack() as stack:
        try:
            store = await stack.enter_async_context(_open(args.database, args.connect_timeout))
        except SchemaVersionError as exc:
            # There, and opened: made by a newer package. Not the command line's mistake.
            raise _Failed(str(exc)) from None
        except (JunoBindError, ValueError, TypeError) as exc:
            raise _Usage(str(exc)) from None  # not there, or not a database to open
        if args.command == "conversations":
            await _conversations(store, args.limit, out)
        elif args.command == "conversation":
            await _conversation(store, args.conversation_id, out)
        elif args.command == "delete-conversation":
            await _delete_conversation(store, args.conversation_id, out)
        elif args.command == "list":
            await _list(store, args.status, args.limit, out)
        elif args.command in ("show", "pending"):
            try:
                if args.command == "show":
                    await _show(store, args.run_id, out)
                else:
                    await _pending(store, args.run_id, out)
            except RunNotFoundError as exc:
                raise _not_there(exc) from None
        elif args.command == "waiting":
            await _waiting(store, args.limit, out)
        else:
            await _resume(store, args.database, args.run_id, args.handler, args.owner, out)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit status (0; 2 with the error on stderr for a
    usage error, naming the value; 1 with the error for any other failure)."""
    parser = argparse.ArgumentParser(
        prog="python -m juno_bind_trio.store", description="Look at and resume stored runs."
    )
    parser.add_argument("database", help="a SQLite file, or a PostgreSQL DSN")
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="PostgreSQL: how long to keep trying to connect (default 10)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="list runs, oldest first")
    listing.add_argument("--status", choices=sorted(RUN_STATUSES))
    listing.add_argument("--limit", type=int, default=100)
    show = commands.add_parser("show", help="a run's record, transcript and receipts (JSON)")
    show.add_argument("run_id")
    waiting = commands.add_parser("waiting", help="runs with calls waiting for a decision")
    waiting.add_argument("--limit", type=int, default=100)
    pending = commands.add_parser(
        "pending", help="the calls a run waited on, and their decisions (JSON)"
    )
    pending.add_argument("run_id")
    resume = commands.add_parser("resume", help="claim a run and hand it to your handler")
    resume.add_argument("run_id")
    resume.add_argument(
        "--handler",
        required=True,
        help="MODULE:NAME: an async function awaited with the run, or an Agent",
    )
    resume.add_argument(
        "--owner", default=None, help="the lease owner (default: this process, host:pid:machine)"
    )
    resume.add_argument(
        "--backend",
        choices=("trio", "asyncio"),
        default="trio",
        help="the event loop the handler runs on (default trio)",
    )
    conversations = commands.add_parser(
        "conversations", help="the stored conversations, oldest first"
    )
    conversations.add_argument("--limit", type=int, default=100)
    conversation = commands.add_parser("conversation", help="a conversation's messages")
    conversation.add_argument("conversation_id")
    delete = commands.add_parser("delete-conversation", help="delete a conversation and its runs")
    delete.add_argument("conversation_id")
    args = parser.parse_args(argv)
    backend = getattr(args, "backend", "trio")
    try:
        anyio.run(_main, args, sys.stdout if out is None else out, backend=backend)
    except _Usage as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (_Failed, JunoBindError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
