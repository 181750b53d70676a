"""The example's app behind a connection breaker, for the browser's reconnect test.

    python tests/web/reconnect_server.py --backend trio --drop-turn 2 --drop-seq 5

Serves ``examples/live_view.py``'s page and runs on 127.0.0.1 (a free port; the
URL is the first line printed). The first event stream of a run is cut, from
the server's side, right after it carried a text event of turn
``<run>:<drop-turn>`` with seq ``drop-seq`` or later: the response ends there, as when a
proxy or a network drops it. The browser's EventSource then reconnects by
itself. Each event-stream request is printed as ``events <Last-Event-ID>``.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import anyio

from juno_bind_trio.web import serve

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "live_view.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("example_live_view", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def breaker(app: Any, *, turn: int, seq: int) -> Any:
    """An ASGI wrapper ending the first event stream after the given text event."""
    state = {"cut": False}
    marker = re.compile(rf'"kind":"text","turnId":"[^"]+:{turn}","epoch":\d+,"seq":(\d+),'.encode())

    def past_the_mark(body: bytes) -> bool:
        # At or past it: a reader that was resynced may have skipped the very event.
        return any(int(found) >= seq for found in marker.findall(body))

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/events"):
            await app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        print(f"events {headers.get(b'last-event-id', b'-').decode()}", flush=True)
        if state["cut"]:
            await app(scope, receive, send)
            return
        dropped = anyio.Event()

        async def watch_send(message: dict[str, Any]) -> None:
            if dropped.is_set():
                return  # the connection is gone: nothing more reaches the browser
            await send(message)
            body = message.get("body", b"")
            if message["type"] == "http.response.body" and past_the_mark(body):
                state["cut"] = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                dropped.set()

        async def watch_receive() -> dict[str, Any]:
            # The browser's own messages, or a disconnect once the stream is cut.
            got: dict[str, Any] = {}
            async with anyio.create_task_group() as tasks:

                async def real() -> None:
                    got.setdefault("message", await receive())
                    tasks.cancel_scope.cancel()

                async def cut() -> None:
                    await dropped.wait()
                    got.setdefault("message", {"type": "http.disconnect"})
                    tasks.cancel_scope.cancel()

                tasks.start_soon(real)
                tasks.start_soon(cut)
            message: dict[str, Any] = got["message"]
            return message

        await app(scope, watch_receive, watch_send)

    return wrapped


async def main(*, drop_turn: int, drop_seq: int, pace: float, max_kept_events: int) -> None:
    example = load_example()
    async with (
        example.open_live_view(pace=pace, tool_seconds=0.2, max_kept_events=max_kept_events) as (
            _runs,
            app,
        ),
        anyio.create_task_group() as tasks,
    ):
        url = await tasks.start(
            functools.partial(serve, breaker(app, turn=drop_turn, seq=drop_seq), port=0)
        )
        print(f"Live view: {url}/", flush=True)
        await anyio.sleep_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("trio", "asyncio"), default="trio")
    parser.add_argument("--drop-turn", type=int, default=2)
    parser.add_argument("--drop-seq", type=int, default=5)
    parser.add_argument("--pace", type=float, default=0.08)
    parser.add_argument("--max-kept-events", type=int, default=4096)
    args = parser.parse_args()
    anyio.run(
        functools.partial(
            main,
            drop_turn=args.drop_turn,
            drop_seq=args.drop_seq,
            pace=args.pace,
            max_kept_events=args.max_kept_events,
        ),
        backend=args.backend,
    )
