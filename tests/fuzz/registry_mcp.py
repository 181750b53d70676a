"""Fuzz entries for `juno_bind_trio.mcp` (only where the ``mcp`` extra is installed).

The connecting functions get junk, or well-typed arguments naming a server
that is not there (a missing executable, a closed loopback port): they must
refuse the first with a ``TypeError``/``ValueError`` naming themselves and
the second with ``MCPConnectionError``. Nothing here starts a real program.
"""

from __future__ import annotations

import importlib.util

import hypothesis.strategies as st
from fuzz_support import JUNK, Entry, auto, call

ENTRIES: list[Entry] = []

if importlib.util.find_spec("mcp") is not None:
    from juno_bind_trio.mcp import (
        MCPConnectionError,
        MCPToolInfo,
        MCPToolset,
        open_mcp_client,
        open_mcp_http,
        open_mcp_stdio,
    )

    MISSING_PROGRAM = "/nonexistent/juno-fuzz-mcp-server"
    CLOSED_PORT = "http://127.0.0.1:9/mcp"

    ENTRIES = [
        Entry(MCPToolInfo),
        Entry(MCPToolset),
        Entry(open_mcp_client, raises=(MCPConnectionError,)),
        Entry(
            open_mcp_stdio,
            args=st.builds(
                lambda command, args: call(command, args),
                st.one_of(st.just(MISSING_PROGRAM), JUNK.filter(lambda v: not isinstance(v, str))),
                st.one_of(st.lists(st.text(max_size=3), max_size=2), JUNK),
            ),
            raises=(MCPConnectionError,),
        ),
        Entry(
            open_mcp_http,
            args=st.one_of(
                st.just(call(CLOSED_PORT)),
                JUNK.filter(lambda v: not isinstance(v, str)).map(call),
                auto(open_mcp_http, url=st.just(CLOSED_PORT)),
            ),
            raises=(MCPConnectionError,),
        ),
    ]
