"""Fuzz entries for `juno_bind_trio.web` (only where the ``web`` extra is installed).

``serve`` binds only an ephemeral loopback port (``port=0``) when its
arguments are well typed, so the fuzz never takes a real port.
"""

from __future__ import annotations

import importlib.util

import hypothesis.strategies as st
from fuzz_support import JUNK, Call, Entry, call

ENTRIES: list[Entry] = []

if importlib.util.find_spec("starlette") is not None and importlib.util.find_spec("hypercorn"):
    from juno_bind_trio.web import (
        AGUIEncoder,
        AGUIInputError,
        LiveRun,
        LiveRuns,
        ProtocolApp,
        UIMessageError,
        UIMessageStreamEncoder,
        agui_events,
        chat_from_run_input,
        chat_from_ui_messages,
        client_tools,
        create_agui_app,
        create_app,
        create_ui_message_stream_app,
        read_run_input,
        serve,
        ui_message_stream,
    )

    def _serve_call(app: object, host: object, port: object) -> Call:
        return call(app, host=host, port=port)

    SERVE_CALLS = st.one_of(
        # Well typed: loopback, a port the system picks, an app of any kind.
        st.builds(_serve_call, JUNK, st.just("127.0.0.1"), st.just(0)),
        # Refused before anything is bound.
        st.builds(
            _serve_call,
            JUNK,
            st.one_of(st.just(""), JUNK.filter(lambda v: not isinstance(v, str))),
            st.just(0),
        ),
        st.builds(
            _serve_call,
            JUNK,
            st.just("127.0.0.1"),
            st.one_of(
                st.sampled_from([-1, 65536, 10**400]), JUNK.filter(lambda v: not isinstance(v, int))
            ),
        ),
    )

    ENTRIES = [
        Entry(LiveRun),
        Entry(LiveRuns),
        Entry(create_app),
        Entry(serve, args=SERVE_CALLS),
        Entry(AGUIEncoder),
        Entry(AGUIInputError),
        Entry(UIMessageError),
        Entry(ProtocolApp),
        Entry(UIMessageStreamEncoder),
        Entry(chat_from_run_input),
        Entry(client_tools),
        Entry(chat_from_ui_messages, raises=(UIMessageError,)),
        Entry(read_run_input, raises=(AGUIInputError,)),
        Entry(create_agui_app),
        Entry(create_ui_message_stream_app),
        # Async generators: nothing runs until the first frame is asked for.
        Entry(agui_events),
        Entry(ui_message_stream),
    ]
