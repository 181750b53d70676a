"""The package's fake OpenAI-compatible server in a process of its own, for benchmarks.

``python benchmarks/fake_endpoint.py CHUNKS`` answers every request with a
streamed text of CHUNKS chunks and prints its base URL on the first line;
``with serving(CHUNKS) as base_url:`` runs it for a benchmark. With
``--stall`` (``serving(CHUNKS, stall=True)``) every answer is its first chunk
and then silence, the connection held open: streams that are open and idle. In another
process, the server's CPU time is not counted against the client being
measured, and the client talks to it over real loopback sockets. With
``--wire anthropic`` or ``--wire responses`` (``serving(CHUNKS, wire=...)``) it
is the fake Anthropic Messages API or the fake Responses API instead, the same
answer spoken in that provider's events.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def answer_text(chunks: int) -> str:
    """The text every answer of a *chunks*-chunk server spells out."""
    return "".join(f"tok{i} " for i in range(chunks))


@contextmanager
def serving(chunks: int, *, stall: bool = False, wire: str = "openai") -> Iterator[str]:
    """Start the server, yield its base URL, stop it."""
    process = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            str(chunks),
            *(["--stall"] if stall else []),
            *(["--wire", wire] if wire != "openai" else []),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        if not base_url.startswith("http://"):
            raise RuntimeError(f"fake endpoint did not start: {base_url!r}")
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)


def main(chunks: int, *, stall: bool = False, wire: str = "openai") -> None:
    import math
    from functools import partial

    import trio

    from juno_bind_trio.testing import Pause, StreamResponse, TextDelta, serve_fake_openai

    if stall:
        answer = StreamResponse([TextDelta("tok0 "), Pause(math.inf)])
    else:
        answer = StreamResponse.of_text(*(f"tok{i} " for i in range(chunks)))

    async def serve() -> None:
        if wire != "openai":
            from juno_bind_trio.testing import (
                open_fake_anthropic_server,
                open_fake_responses_server,
            )

            opener: Any = (
                open_fake_anthropic_server if wire == "anthropic" else open_fake_responses_server
            )
            async with opener(lambda _request: answer) as fake:
                print(fake.base_url, flush=True)
                await trio.sleep_forever()
        async with trio.open_nursery() as nursery:
            server = await nursery.start(partial(serve_fake_openai, lambda _request: answer))
            print(server.base_url, flush=True)

    trio.run(serve)


if __name__ == "__main__":
    rest = sys.argv[2:]
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 200,
        stall="--stall" in rest,
        wire=rest[rest.index("--wire") + 1] if "--wire" in rest else "openai",
    )
