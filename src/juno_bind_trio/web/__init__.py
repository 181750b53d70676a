"""A live web view of a run: an ASGI app, an SSE relay, and the JavaScript client.

Needs the ``web`` extra (Starlette and Hypercorn): ``pip install -e '.[web]'``
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

from ._app import DEFAULT_ALLOWED_HOSTS as DEFAULT_ALLOWED_HOSTS  # noqa: E402
from ._app import DEFAULT_MAX_BODY_BYTES as DEFAULT_MAX_BODY_BYTES  # noqa: E402
from ._app import KEEPALIVE_INTERVAL as KEEPALIVE_INTERVAL  # noqa: E402
from ._app import Action as Action  # noqa: E402
from ._app import Authorize as Authorize  # noqa: E402
from ._app import create_app as create_app  # noqa: E402
from ._runs import DEFAULT_MAX_ACTIVE_RUNS as DEFAULT_MAX_ACTIVE_RUNS  # noqa: E402
from ._runs import DEFAULT_MAX_KEPT_EVENTS as DEFAULT_MAX_KEPT_EVENTS  # noqa: E402
from ._runs import DEFAULT_MAX_KEPT_RUNS as DEFAULT_MAX_KEPT_RUNS  # noqa: E402
from ._runs import LiveRun as LiveRun  # noqa: E402
from ._runs import LiveRuns as LiveRuns  # noqa: E402
from ._runs import RunHandle as RunHandle  # noqa: E402
from ._runs import RunSource as RunSource  # noqa: E402
from ._runs import RunStatus as RunStatus  # noqa: E402
from ._runs import WireEvent as WireEvent  # noqa: E402
from ._serve import serve as serve  # noqa: E402

__all__ = [
    "DEFAULT_ALLOWED_HOSTS",
    "DEFAULT_MAX_ACTIVE_RUNS",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_KEPT_EVENTS",
    "DEFAULT_MAX_KEPT_RUNS",
    "KEEPALIVE_INTERVAL",
    "STATIC_DIR",
    "Action",
    "Authorize",
    "LiveRun",
    "LiveRuns",
    "RunHandle",
    "RunLimitError",
    "RunSource",
    "RunStatus",
    "WireEvent",
    "create_app",
    "serve",
]

_publish(__name__, globals(), __all__)
