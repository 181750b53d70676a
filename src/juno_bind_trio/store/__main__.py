"""``python -m juno_bind_trio.store DATABASE COMMAND``: list runs, show one, resume one.

DATABASE is an existing SQLite file or a PostgreSQL DSN (``postgresql://...``,
or a libpq ``key=value`` string); a DSN's password is never printed. A bad
argument, a database that is not there, a handler that cannot be loaded or a
stored run that cannot be read prints ``error: ...`` and exits 1.

* ``list [--status STATUS] [--limit N]``: one line per run: id, status,
  iteration, lease holder.
* ``show RUN_ID``: the run's record, transcript and receipts, as JSON.
* ``resume RUN_ID --handler MODULE:FUNCTION [--owner NAME]``: claim the run
  and ``await FUNCTION(run)`` with its
  [DurableRun][juno_bind_trio.store.DurableRun], as
  [serve_runs][juno_bind_trio.store.serve_runs] would.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import socket
import sys
from collections.abc import Sequence
from typing import Any, Final, TextIO

import anyio

from juno_bind_trio._errors import StoreError

from ._durable import open_durable_run
from ._postgres import PostgresRunStore
from ._records import RUN_STATUSES, ReceiptRecord, RunRecord
from ._sqlite import SqliteRunStore
from ._store import RunStore

__all__ = ["main"]


# A libpq "key=value ..." connection string starts with a parameter name and "=".
_KEYWORD_DSN: Final = re.compile(r"\s*[A-Za-z_]+\s*=")


def _open(database: str, connect_timeout: float = 10.0) -> RunStore:
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
        "lineage": record.chain.to_dict(),
        "iteration": record.iteration,
        "open_iteration": record.pending_iteration,
        "lease_owner": record.lease_owner,
        "lease_token": record.lease_token,
        "lease_expires_at": record.lease_expires_at,
        "heartbeat_at": record.heartbeat_at,
        "progress": record.progress,
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


async def _list(store: RunStore, status: str | None, limit: int, out: TextIO) -> None:
    runs = await store.list_runs(status=status, limit=limit)  # type: ignore[arg-type]
    for run in runs:
        lease = run.lease_owner or "-"
        out.write(f"{run.run_id}\t{run.status}\titeration {run.iteration}\tlease {lease}\n")


async def _show(store: RunStore, run_id: str, out: TextIO) -> None:
    loaded, receipts = await store.load_with_receipts(run_id)  # one moment, not two
    document = {
        "run": _record(loaded.record),
        "messages": loaded.messages,
        "open_turn": loaded.pending_turn,
        "receipts": [_receipt(r) for r in receipts],
    }
    out.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")


async def _resume(store: RunStore, run_id: str, handler: str, owner: str) -> None:
    module_name, _, attribute = handler.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--handler must be MODULE:FUNCTION, got {handler!r}")
    try:
        handle = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--handler {handler!r} cannot be loaded: {exc}") from None
    if not callable(handle):
        raise TypeError(f"--handler {handler!r} is not callable: {handle!r}")
    async with open_durable_run(store, run_id, owner=owner) as run:
        await handle(run)


async def _main(args: argparse.Namespace, out: TextIO) -> None:
    if args.command == "list" and args.limit < 1:
        raise ValueError(f"--limit must be a positive number of runs, got {args.limit}")
    async with _open(args.database, args.connect_timeout) as store:
        if args.command == "list":
            await _list(store, args.status, args.limit, out)
        elif args.command == "show":
            await _show(store, args.run_id, out)
        else:
            await _resume(store, args.run_id, args.handler, args.owner)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit status (0, or 1 with the error on stderr)."""
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
    resume = commands.add_parser("resume", help="claim a run and hand it to your handler")
    resume.add_argument("run_id")
    resume.add_argument("--handler", required=True, help="MODULE:FUNCTION, awaited with the run")
    resume.add_argument("--owner", default=f"{socket.gethostname()}:{os.getpid()}")
    args = parser.parse_args(argv)
    try:
        anyio.run(_main, args, sys.stdout if out is None else out)
    except (StoreError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
