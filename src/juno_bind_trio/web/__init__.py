"""A live web view of a run: an ASGI app, an SSE relay, and the JavaScript client.

Needs the ``web`` extra (Starlette, Hypercorn and ag-ui-protocol): ``pip install -e '.[web]'``
in the checkout.

* [LiveRuns][juno_bind_trio.web.LiveRuns] starts runs of an agent and keeps
  each one's newest events as a numbered log; with a run store, runs no
  longer in memory are read back from it;
* [create_app][juno_bind_trio.web.create_app] serves them: ``POST /runs``,
  ``GET /runs/{id}/events`` (Server-Sent Events, resumable with
  ``Last-Event-ID``), ``GET /runs/{id}`` (snapshot), ``POST /runs/{id}/stop``
  and ``/cancel``, behind a host check (on every path), a cross-site check
  (on every run path), a request-body bound and the host's authorization hook;
* [serve][juno_bind_trio.web.serve] runs it with Hypercorn on 127.0.0.1;
* the frontends' own protocols:
  [create_ui_message_stream_app][juno_bind_trio.web.create_ui_message_stream_app]
  (what the Vercel AI SDK's ``useChat`` posts to) and
  [create_agui_app][juno_bind_trio.web.create_agui_app] (AG-UI: ``HttpAgent``,
  CopilotKit), ASGI endpoints behind the same gate; and for any framework
  the async generators of their frames,
  [ui_message_stream][juno_bind_trio.web.ui_message_stream] and
  [agui_events][juno_bind_trio.web.agui_events];
* ``STATIC_DIR`` holds the ES modules a page imports as they are:
  ``turn-view.js`` (the reader rules, in agreement with
  [TurnTextView][juno_bind_trio.completion.TurnTextView]), ``renderer.js``
  (one element per turn, ``aria-busy`` while it streams) and
  ``live-view.js`` (wires both to the SSE stream and the snapshot).
"""

from __future__ import annotations

from pathlib import Path as _Path
from typing import Final as _Final

from juno_bind_trio._extras import require as _require

_require("web", "juno_bind_trio.web")

STATIC_DIR: _Final[_Path] = _Path(__file__).resolve().parent / "static"
"""The directory of the JavaScript client's modules, to serve under any URL prefix."""

from juno_bind_trio._errors import RunLimitError as RunLimitError  # noqa: E402
from juno_bind_trio._public import publish as _publish  # noqa: E402

from ._agui import AGUIEncoder as AGUIEncoder  # noqa: E402
from ._agui import agui_events as agui_events  # noqa: E402
from ._agui_request import AGUIInputError as AGUIInputError  # noqa: E402
from ._agui_request import chat_from_run_input as chat_from_run_input  # noqa: E402
from ._agui_request import client_tools as client_tools  # noqa: E402
from ._agui_request import read_run_input as read_run_input  # noqa: E402
from ._app import DEFAULT_ALLOWED_HOSTS as DEFAULT_ALLOWED_HOSTS  # noqa: E402
from ._app import DEFAULT_MAX_BODY_BYTES as DEFAULT_MAX_BODY_BYTES  # noqa: E402
from ._app import KEEPALIVE_INTERVAL as KEEPALIVE_INTERVAL  # noqa: E402
from ._app import Action as Action  # noqa: E402
from ._app import Authorize as Authorize  # noqa: E402
from ._app import create_app as create_app  # noqa: E402
from ._endpoints import ChatRunSource as ChatRunSource  # noqa: E402
from ._endpoints import OnDisconnect as OnDisconnect  # noqa: E402
from ._endpoints import ProtocolApp as ProtocolApp  # noqa: E402
from ._endpoints import create_agui_app as create_agui_app  # noqa: E402
from ._endpoints import (  # noqa: E402
    create_ui_message_stream_app as create_ui_message_stream_app,
)
from ._live_run import DEFAULT_MAX_KEPT_EVENTS as DEFAULT_MAX_KEPT_EVENTS  # noqa: E402
from ._live_run import LiveRun as LiveRun  # noqa: E402
from ._live_run import RunHandle as RunHandle  # noqa: E402
from ._live_run import RunSource as RunSource  # noqa: E402
from ._live_run import RunStatus as RunStatus  # noqa: E402
from ._live_run import WireEvent as WireEvent  # noqa: E402
from ._runs import DEFAULT_MAX_ACTIVE_RUNS as DEFAULT_MAX_ACTIVE_RUNS  # noqa: E402
from ._runs import DEFAULT_MAX_KEPT_RUNS as DEFAULT_MAX_KEPT_RUNS  # noqa: E402
from ._runs import LiveRuns as LiveRuns  # noqa: E402
from ._serve import serve as serve  # noqa: E402
from ._ui_request import UIMessageError as UIMessageError  # noqa: E402
from ._ui_request import chat_from_ui_messages as chat_from_ui_messages  # noqa: E402
from ._ui_stream import UI_MESSAGE_STREAM_HEADERS as UI_MESSAGE_STREAM_HEADERS  # noqa: E402
from ._ui_stream import UIMessageStreamEncoder as UIMessageStreamEncoder  # noqa: E402
from ._ui_stream import ui_message_stream as ui_message_stream  # noqa: E402

__all__ = [
    "DEFAULT_ALLOWED_HOSTS",
    "DEFAULT_MAX_ACTIVE_RUNS",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_KEPT_EVENTS",
    "DEFAULT_MAX_KEPT_RUNS",
    "KEEPALIVE_INTERVAL",
    "STATIC_DIR",
    "UI_MESSAGE_STREAM_HEADERS",
    "AGUIEncoder",
    "AGUIInputError",
    "Action",
    "Authorize",
    "ChatRunSource",
    "LiveRun",
    "LiveRuns",
    "OnDisconnect",
    "ProtocolApp",
    "RunHandle",
    "RunLimitError",
    "RunSource",
    "RunStatus",
    "UIMessageError",
    "UIMessageStreamEncoder",
    "WireEvent",
    "agui_events",
    "chat_from_run_input",
    "chat_from_ui_messages",
    "client_tools",
    "create_agui_app",
    "create_app",
    "create_ui_message_stream_app",
    "read_run_input",
    "serve",
    "ui_message_stream",
]

_publish(__name__, globals(), __all__)
