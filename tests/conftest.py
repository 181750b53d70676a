"""Every async test runs on both anyio backends, each on a virtual clock.

Each test gets a fresh clock starting at zero.

* trio: ``trio.testing.MockClock(autojump_threshold=0)``, with :class:`QuietAutojump`
  so that it waits on real I/O instead of spinning while no deadline is pending.
* asyncio: :class:`virtual_asyncio.VirtualClockEventLoop`, which jumps the same way.

``--backend trio`` / ``--backend asyncio`` narrows the run (the nox sessions
use it). A test marked ``one_backend_by_default`` (a real-time test: a
subprocess, a browser, a burst the SDK's parsing paces) runs in the default run
on one backend per set of its other parameters, picked by a hash of them so
that the sets alternate between the two; ``--backend`` runs it on the one named,
so ``nox -s tests_trio tests_asyncio`` runs every set on both.

Tests that want a plain synchronous body (hypothesis over whole scenarios)
call :func:`run_on` with the ``backend`` fixture's value.

The suite runs on pytest-xdist workers (``-n auto`` in pyproject's addopts):
one per CPU this process may use, at most :data:`MAX_WORKERS`;
``PYTEST_XDIST_AUTO_NUM_WORKERS`` sets the number, ``-n 0`` runs serially.
Each worker's ``JUNO_TEST_POSTGRES_DSN`` names a schema of its own
(``tests/store/store_helpers.py`` makes it).
"""

from __future__ import annotations

import math
import os
import urllib.parse
import zlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import hypothesis
import pytest
import trio.testing

from virtual_asyncio import VirtualClockEventLoop

# Hypothesis's per-example deadline is a timed assertion: on a loaded two-core
# CI machine a 50 ms example can take 250 ms, and the test fails for nothing
# the code did. Speed is measured in benchmarks/, never asserted here.
hypothesis.settings.register_profile("juno", deadline=None)
hypothesis.settings.load_profile("juno")

T = TypeVar("T")
BACKENDS = ("trio", "asyncio")

# Past eight workers the suite's longest tests (the browser's, on the wall
# clock) bound the run, and every worker holds PostgreSQL connections of its own.
MAX_WORKERS = 8


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: the CPUs this process may run on, at most :data:`MAX_WORKERS`."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_WORKERS, cpus))


POSTGRES_DSN_ENV = "JUNO_TEST_POSTGRES_DSN"


def worker_schema() -> str | None:
    """This xdist worker's PostgreSQL schema (``juno_gw0``), or ``None`` in a serial run."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker:
        return None
    if not worker.isalnum():
        raise ValueError(f"PYTEST_XDIST_WORKER is not a plain name: {worker!r}")
    return f"juno_{worker}"


def with_search_path(dsn: str, schema: str) -> str:
    """*dsn* with *schema* as its sessions' ``search_path``, in the DSN's own form.

    A URL stays a URL (the kill worker and the store's CLI tell PostgreSQL
    from SQLite by the ``postgresql://`` prefix); a keyword string gets one
    more keyword.
    """
    option = f"-csearch_path={schema}"
    if dsn.startswith(("postgresql://", "postgres://")):
        url = urllib.parse.urlsplit(dsn)
        query = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        given = [v for k, v in query if k == "options"]
        if option in given:
            return dsn
        others = [(k, v) for k, v in query if k != "options"]
        options = " ".join([*given, option])
        # %20, not +: libpq decodes percent escapes in a URL, never a plus.
        query_text = urllib.parse.urlencode(
            [*others, ("options", options)], quote_via=urllib.parse.quote
        )
        return url._replace(query=query_text).geturl()
    try:
        from psycopg.conninfo import conninfo_to_dict, make_conninfo
    except ImportError:  # then the PostgreSQL tests skip, saying so
        return dsn
    given_options = conninfo_to_dict(dsn).get("options")
    if given_options and option in str(given_options):
        return dsn
    return make_conninfo(dsn, options=f"{given_options} {option}" if given_options else option)


def pytest_configure(config: pytest.Config) -> None:
    # An xdist worker's PostgreSQL tests use a schema of their own: narrowed in
    # the variable itself, whatever reads it (a fixture, a test, a subprocess).
    schema = worker_schema()
    dsn = os.environ.get(POSTGRES_DSN_ENV)
    if schema is not None and dsn:
        os.environ[POSTGRES_DSN_ENV] = with_search_path(dsn, schema)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        choices=("all", *BACKENDS),
        default="all",
        help="which anyio backend(s) to run async tests on (default: all)",
    )


def selected_backends(config: pytest.Config) -> list[str]:
    choice = config.getoption("--backend")
    return list(BACKENDS) if choice == "all" else [choice]


class QuietAutojump(trio.abc.Instrument):
    """Lets an autojump ``MockClock`` sleep on real I/O while no deadline is pending.

    With ``autojump_threshold=0`` trio polls its I/O with a zero timeout
    whenever every task is blocked, to jump the clock at once; with no deadline
    to jump to, it polls again, and again: a loop spinning a core (and holding
    the GIL) for as long as a task waits on a thread, a socket or a process.
    A store test waiting on PostgreSQL spun some 6,500 times a query (measured:
    20 reads, 130,000 polls, 1.6 s of CPU against 0.03). The asyncio twin blocks
    in that case (virtual_asyncio.py); this does the same for trio: while no
    deadline is pending the threshold is relaxed to :data:`RELAXED` (nothing to
    jump to, so nothing changes but the polling), and it is back to zero from
    the task step that sets a deadline, before the loop computes its next wait.
    A deadline set outside any task step would jump :data:`RELAXED` late in real
    time, never wrong in virtual time.
    """

    RELAXED = 0.05

    def __init__(self, clock: trio.testing.MockClock) -> None:
        self._clock = clock
        self._relaxed = False

    def _set(self, relaxed: bool) -> None:
        self._relaxed = relaxed
        self._clock.autojump_threshold = self.RELAXED if relaxed else 0

    def before_io_wait(self, timeout: float) -> None:
        pending = trio.lowlevel.current_statistics().seconds_to_next_deadline < math.inf
        if pending == self._relaxed:
            self._set(not pending)

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if self._relaxed and trio.lowlevel.current_statistics().seconds_to_next_deadline < math.inf:
            self._set(False)


def backend_options(name: str) -> dict[str, Any]:
    if name == "trio":
        clock = trio.testing.MockClock(autojump_threshold=0)
        return {"clock": clock, "instruments": [QuietAutojump(clock)]}
    return {"loop_factory": VirtualClockEventLoop}


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """The backend under test, with a clock made for this test alone.

    Built here, per test, rather than once at collection: every test of a
    parametrized function would otherwise share one MockClock, start where the
    previous one left it, and lose exactness far from zero.
    """
    name: str = request.param
    return (name, backend_options(name))


_BACKEND_PARAMS = ("anyio_backend", "backend", "event_loop")


def default_backend_for(item: pytest.Item) -> str | None:
    """The one backend the default run takes a ``one_backend_by_default`` test on."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    others = sorted((k, str(v)) for k, v in callspec.params.items() if k not in _BACKEND_PARAMS)
    key = f"{item.module.__name__ if item.module else ''}::{item.originalname}:{others}"  # type: ignore[attr-defined]
    return BACKENDS[zlib.crc32(key.encode()) % len(BACKENDS)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--backend") != "all":
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = next(
            (callspec.params[k] for k in _BACKEND_PARAMS if callspec and k in callspec.params),
            None,
        )
        marked = item.get_closest_marker("one_backend_by_default") is not None
        if marked and backend is not None and backend != default_backend_for(item):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = selected_backends(metafunc.config)
    if "anyio_backend" in metafunc.fixturenames:
        metafunc.parametrize("anyio_backend", names, indirect=True)
    elif "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", names)


def run_on(backend: str, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``fn(*args)`` to completion on *backend*, on a fresh virtual clock."""
    return anyio.run(fn, *args, backend=backend, backend_options=backend_options(backend))
