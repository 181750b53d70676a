"""A script forked from the script server runs as the same script under ``python script.py``.

Each test runs one probe both ways, through the fork server and with
``JUNO_SCRIPT_RUNNER=subprocess`` (a fresh interpreter), and compares what
the probe saw and how it ended.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import script_runner
from script_runner import RUNNER_ENV, ForkedScript, run_script, start_script

fork_only = pytest.mark.skipif(
    not hasattr(os, "pidfd_open"), reason="the fork server needs os.pidfd_open (Linux)"
)
pytestmark = fork_only


@pytest.fixture(autouse=True)
def fork_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are of the fork server, whatever the run's JUNO_SCRIPT_RUNNER says."""
    monkeypatch.delenv(RUNNER_ENV, raising=False)


ENV = {
    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
    "PYTHONWARNINGS": "error::ResourceWarning,ignore:Async generator:ResourceWarning",
    "PYTHONUNBUFFERED": "1",
    "JUNO_PROBE": "yes",
}

PROBE = """
import json, os, signal, sys, warnings
try:
    import conftest  # the tests' folder is not on a script's path
    importable = True
except ImportError:
    importable = False
print(json.dumps({
    "argv": sys.argv,
    "cwd": os.getcwd(),
    "path0": sys.path[0],
    "name": __name__,
    "file": __file__,
    "env": dict(os.environ),
    "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
    "sigint_blocked": signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []),
    "filters": [(f[0], f[2].__name__) for f in warnings.filters[:3]],
    "stdout": [sys.stdout.encoding, sys.stdout.isatty()],
    "conftest": importable,
}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.argv[1]))
"""


def both_ways(
    monkeypatch: pytest.MonkeyPatch, source: str, folder: Path, *args: str
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    script = folder / "probe.py"
    script.write_text(textwrap.dedent(source), encoding="utf-8")
    forked = run_script(script, *args, cwd=folder, env=ENV, timeout=60)
    with monkeypatch.context() as patch:
        patch.setenv(RUNNER_ENV, "subprocess")
        fresh = run_script(script, *args, cwd=folder, env=ENV, timeout=60)
    return forked, fresh


def test_a_forked_script_sees_what_a_fresh_one_sees(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A server of this test's own, started with a variable the script's request lacks.
    monkeypatch.setattr(script_runner, "_servers", {})
    server = script_runner.fork_server_for({**ENV, "ONLY_THE_SERVERS": "1"})
    assert server is not None
    try:
        forked, fresh = both_ways(monkeypatch, PROBE, tmp_path, "3")
    finally:
        server.close()
    assert (
        (forked.returncode, forked.stderr)
        == (fresh.returncode, fresh.stderr)
        == (
            3,
            "to stderr\n",
        )
    )
    seen, expected = json.loads(forked.stdout), json.loads(fresh.stdout)
    assert seen == expected
    assert seen["argv"] == [str(tmp_path / "probe.py"), "3"]
    assert seen["cwd"] == seen["path0"] == str(tmp_path)
    assert seen["name"] == "__main__"
    assert seen["env"]["JUNO_PROBE"] == "yes"
    assert "ONLY_THE_SERVERS" not in seen["env"]
    assert not seen["conftest"]


def test_a_forked_module_runs_as_python_dash_m_runs_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "probe_module.py").write_text(textwrap.dedent(PROBE), encoding="utf-8")
    runs = []
    for runner in ("fork", "subprocess"):
        with monkeypatch.context() as patch:
            if runner == "subprocess":
                patch.setenv(RUNNER_ENV, "subprocess")
            runs.append(
                run_script("probe_module", "4", cwd=tmp_path, env=ENV, timeout=60, module=True)
            )
    forked, fresh = runs
    assert (forked.returncode, forked.stderr) == (fresh.returncode, fresh.stderr)
    assert forked.returncode == 4
    seen = json.loads(forked.stdout)
    assert seen == json.loads(fresh.stdout)
    assert seen["argv"] == [str(tmp_path / "probe_module.py"), "4"]
    assert seen["path0"] == str(tmp_path)
    assert seen["name"] == "__main__"


@pytest.mark.parametrize(
    ("ending", "code", "said"),
    [
        ("raise ValueError('boom')", 1, "ValueError: boom"),
        ("sys.exit('a message')", 1, "a message"),
        ("raise KeyboardInterrupt", -signal.SIGINT, "KeyboardInterrupt"),
        # Found at interpreter shutdown, after atexit, and a warning made an error there.
        ("leak = socket.socket()", 0, "Exception ignored"),
    ],
)
def test_a_forked_script_ends_as_a_fresh_one_ends(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ending: str, code: int, said: str
) -> None:
    source = f"""
    import atexit, socket, sys
    atexit.register(lambda: print("atexit ran"))
    print("started")
    {ending}
    """
    forked, fresh = both_ways(monkeypatch, source, tmp_path)
    assert forked.returncode == fresh.returncode == code
    assert forked.stdout == fresh.stdout == "started\natexit ran\n"
    assert said in forked.stderr
    assert said in fresh.stderr


WAITS_FOR_CTRL_C = """
import time
try:
    print("ready", flush=True)
    time.sleep(60)
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.parametrize("runner", ["fork", "subprocess"])
def test_ctrl_c_reaches_the_script(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, runner: str
) -> None:
    if runner == "subprocess":
        monkeypatch.setenv(RUNNER_ENV, "subprocess")
    script = tmp_path / "waits.py"
    script.write_text(WAITS_FOR_CTRL_C, encoding="utf-8")
    process = start_script(script, cwd=tmp_path, env=ENV)
    try:
        assert isinstance(process, ForkedScript) == (runner == "fork")
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:  # a failure above: leave no process behind
            process.kill()
            process.communicate()
    assert (process.wait(), out, err) == (0, "interrupted\n", "")


def test_a_script_starts_with_ctrl_c_on_though_this_process_ignores_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A pytest worker may inherit SIGINT ignored (or another test leaves it so): the
    # script still starts as it would at a terminal, on both roads.
    monkeypatch.setattr(script_runner, "_servers", {})
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forked, fresh = both_ways(monkeypatch, PROBE, tmp_path, "0")
    finally:
        signal.signal(signal.SIGINT, previous)
        for server in script_runner._servers.values():
            server.close()
    assert json.loads(forked.stdout)["sigint"] is json.loads(fresh.stdout)["sigint"] is True


def test_a_script_starts_with_ctrl_c_unblocked_though_this_thread_blocks_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A blocked signal is inherited by a child and across exec, as an ignored one is:
    # both roads (the fork server started from this thread, and a plain subprocess)
    # give the script SIGINT unblocked, and the test leaves the mask as it found it.
    monkeypatch.setattr(script_runner, "_servers", {})
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        forked, fresh = both_ways(monkeypatch, PROBE, tmp_path, "0")
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
        for server in script_runner._servers.values():
            server.close()
    seen = [json.loads(forked.stdout), json.loads(fresh.stdout)]
    assert [(s["sigint"], s["sigint_blocked"]) for s in seen] == [(True, False), (True, False)]


def test_no_child_is_started_with_a_preexec_fn(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A preexec_fn runs Python between fork and exec: not safe in a process with threads.
    started: list[dict[str, object]] = []
    real = subprocess.Popen

    def recording(*args: Any, **kwargs: Any) -> Any:
        started.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(script_runner, "_servers", {})
    monkeypatch.setattr(subprocess, "Popen", recording)
    try:
        forked, fresh = both_ways(monkeypatch, PROBE, tmp_path, "0")
    finally:
        for server in script_runner._servers.values():
            server.close()
    assert len(started) == 2  # the fork server's, then the plain subprocess's
    assert [kwargs.get("preexec_fn") for kwargs in started] == [None, None]
    assert json.loads(forked.stdout) == json.loads(fresh.stdout)


def test_a_script_past_its_timeout_is_killed(tmp_path: Path) -> None:
    script = tmp_path / "sleeps.py"
    script.write_text("import time\nprint('up', flush=True)\ntime.sleep(60)\n", encoding="utf-8")
    process = start_script(script, cwd=tmp_path, env=ENV)
    assert isinstance(process, ForkedScript)
    assert process.stdout is not None
    assert process.stdout.readline() == "up\n"
    with pytest.raises(subprocess.TimeoutExpired):
        process.communicate(timeout=0.2)
    assert process.wait() == -signal.SIGKILL


def test_one_server_serves_each_start_up_environment() -> None:
    first = script_runner.fork_server_for(ENV)
    assert first is not None
    assert script_runner.fork_server_for({**ENV, "PORT": "0"}) is first
    # What an interpreter reads as it starts tells the servers apart.
    key = script_runner.startup_key
    assert key({**ENV, "PORT": "0"}) == key(ENV)
    assert key({**ENV, "PYTHONWARNINGS": "ignore"}) != key(ENV)
    assert key({**ENV, "LANG": "C"}) != key(ENV)


def test_the_docs_server_preimports_top_level_packages_only() -> None:
    # A submodule imported before the fork is an attribute of its package in the child:
    # a page using juno_bind_trio.testing after a bare `import juno_bind_trio` would pass.
    import script_server

    assert all("." not in name for name in script_server.PREIMPORT)


@pytest.mark.parametrize("runner", ["fork", "subprocess"])
def test_a_timed_out_script_is_killed_with_what_it_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, runner: str
) -> None:
    # A child of the script's own holds stdout open: killed with the script's group, it
    # does not keep the caller waiting for the pipes' end.
    if runner == "subprocess":
        monkeypatch.setenv(RUNNER_ENV, "subprocess")
    script = tmp_path / "starts_a_child.py"
    script.write_text(
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        "print('up', flush=True)\n"
        "time.sleep(120)\n",
        encoding="utf-8",
    )
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_script(script, cwd=tmp_path, env=ENV, timeout=2)
    assert time.monotonic() - started < 20


def test_a_server_that_died_is_replaced() -> None:
    first = script_runner.fork_server_for({**ENV, "REPLACED": "1"})
    assert first is not None
    first.process.kill()
    first.process.wait()
    second = script_runner.fork_server_for({**ENV, "REPLACED": "1"})
    assert second is not None
    assert second is not first
    assert second.process.poll() is None
