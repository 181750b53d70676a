"""Development sessions: tests per backend, lint, typecheck, docs, benchmarks."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests_trio", "tests_asyncio", "lint", "typecheck", "verifytypes", "docs"]


@nox.session
def tests_trio(session: nox.Session) -> None:
    """The whole suite on the trio backend (autojump MockClock)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "--backend", "trio", *session.posargs)


@nox.session
def tests_asyncio(session: nox.Session) -> None:
    """The whole suite on the asyncio backend (virtual-clock event loop)."""
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "--backend", "asyncio", *session.posargs)


@nox.session
def scripts_fresh(session: nox.Session) -> None:
    """The tests that run a file as a script, each in a fresh interpreter.

    The default run forks them from a server that has imported the package
    (tests/script_runner.py); ``JUNO_SCRIPT_RUNNER=subprocess`` starts each as
    ``python script.py`` instead.
    """
    session.install("-e", ".[test]")
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/test_docs_samples.py",
        "tests/test_examples.py",
        "tests/test_fallback_demo_cli.py",
        "tests/agent/test_readme.py",
        "tests/store/test_conversations_cli.py",
        "tests/store/test_kill.py",
        "tests/store/test_approvals_kill.py",
        "tests/store/test_handoff_kill.py",
        "tests/store/test_compaction_kill.py",
        *session.posargs,
        env={"JUNO_SCRIPT_RUNNER": "subprocess"},
    )


@nox.session
def lint(session: nox.Session) -> None:
    """ruff, with the async rules and the asyncio import ban."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the library, tests, benchmarks and examples."""
    session.install("-e", ".[test,lint]")
    session.run("mypy")


@nox.session
def verifytypes(session: nox.Session) -> None:
    """pyright --verifytypes: every public symbol has a known type."""
    session.install("-e", ".[test,lint]")
    session.run(
        "python", "-m", "pytest", "-p", "no:cacheprovider", "tests/test_type_completeness.py"
    )


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation; any warning fails the build."""
    session.install("-e", ".[docs]")
    session.run(
        "mkdocs", "build", "--strict", "--site-dir", "build/site", env={"NO_MKDOCS_2_WARNING": "1"}
    )


@nox.session
def bench(session: nox.Session) -> None:
    """Every benchmark script; each prints its ratio against a bare baseline.

    bench_web_latency.py drives Debian's Chromium (/usr/bin/chromium) through Playwright.
    """
    session.install("-e", ".[test]")
    for script in sorted(__import__("pathlib").Path("benchmarks").glob("bench_*.py")):
        session.run("python", str(script))


@nox.session
def fuzz(session: nox.Session) -> None:
    """The public-surface fuzz (tests/fuzz) with thousands of fresh examples per callable.

    ``nox -s fuzz -- 20000`` sets the number; the default run of the test
    suite draws 25 fixed ones.
    """
    session.install("-e", ".[test,mcp]")
    examples = session.posargs[0] if session.posargs else "3000"
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/fuzz",
        "-q",
        "-x",
        env={"JUNO_FUZZ_EXAMPLES": examples},
    )


@nox.session
def soak(session: nox.Session) -> None:
    """The randomized cancellation soaks: ToolLoop, then Agent.run / open_run, 10,000 seeded
    runs per backend each (``-- --runs N`` plays N instead)."""
    session.install("-e", ".[test]")
    session.run("python", "tests/loop/soak.py", "--runs", "10000", *session.posargs)
    session.run("python", "tests/agent/soak_agent.py", "--runs", "10000", *session.posargs)


@nox.session
def mcp_ctrl_c(session: nox.Session) -> None:
    """Ctrl-C with an MCP call in flight, 40 rounds per backend and transport (5 in the suite)."""
    session.install("-e", ".[test]")
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/mcp_servers/test_mcp_ctrl_c.py",
        *session.posargs,
        env={"JUNO_CTRL_C_ROUNDS": "40", "CI": "true"},
    )


@nox.session
def cancel_sweep(session: nox.Session) -> None:
    """The demo's fallback scenario cancelled before every 5th event-loop step, both backends.

    The default run of the suite cancels before every 30th step and at the
    steps of the one window where the cancel was lost before the fix.
    """
    session.install("-e", ".[test]")
    session.run(
        "python",
        "-m",
        "pytest",
        "tests/test_fallback_demo_native_cancel.py",
        *session.posargs,
        env={"JUNO_CANCEL_SWEEP": "full"},
    )


@nox.session
def mutation(session: nox.Session) -> None:
    """Mutation testing of the core modules (tools/mutation.py); CPU heavy, outside CI."""
    session.install("-e", ".[test]")
    session.run("python", "tools/mutation.py", *session.posargs)


@nox.session
def soak_store(session: nox.Session) -> None:
    """The run store's big crash tests: 50 SIGKILLed runs per store, and 8 workers
    draining 500 runs on PostgreSQL while a tenth are killed. Needs
    JUNO_TEST_POSTGRES_DSN (``.ci/run`` shows how to start a server)."""
    session.install("-e", ".[test]")
    session.run(
        "python",
        "-m",
        "pytest",
        "-s",
        "-n",
        "0",  # serially, so that -s shows each soak's figures as it ends
        "tests/store/test_kill.py",
        *session.posargs,
        env={"JUNO_STORE_SOAK": "1"},
    )
