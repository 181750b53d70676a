"""Lease owners that name a process, and how to tell that such a process is gone.

A lease names its holder. The default name, ``host:pid:machine``, names one
process of one machine: *host* is the host name, *pid* the process id, and
*machine* eight hex digits that stand for this boot of this machine's kernel
and its process-id namespace (so two containers sharing a host name, or the
same host after a reboot, never read as one). When a process dies with its
run leased (a ``SIGKILL``, an out-of-memory kill, a power cut of a VM), its
lease would otherwise hold the run for the rest of its TTL; a process on the
same machine can see that the holder is gone and take the run at once
(`holder_is_gone` says when). That is safe because a claim always moves
the run's fencing token on: had the holder been alive after all, each of its
writes would be refused.

A holder is "gone" only when that is known: the name has the default shape,
its *host* and *machine* are this one's, its pid is not this process's, and
no process has that pid (or it is a zombie, dead but not yet reaped). Any
other name (``"worker-7"``, a holder on another machine) is never taken
over early; such a lease is waited out, as before.
"""

from __future__ import annotations

import functools
import hashlib
import os
import socket
import sys

__all__ = ["default_owner", "holder_is_gone"]


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip()
    except (OSError, ValueError):
        return ""


@functools.cache
def _machine() -> str:
    """This boot of this kernel, and this process-id namespace, as eight hex digits."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        namespace = ""
    return hashlib.sha256(f"{boot}|{namespace}".encode()).hexdigest()[:8]


def default_owner() -> str:
    """This process as a lease owner: ``host:pid:machine`` (see the module's docstring)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_machine()}"


def _pid_is_gone(pid: int) -> bool:
    if sys.platform == "win32":  # no signal 0 there (os.kill would end the process)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # PermissionError: another user's; or no pid at all
        return False
    # It exists; a zombie has exited and only waits for its parent to reap it.
    stat = _read(f"/proc/{pid}/stat")
    state = stat.rpartition(")")[2].split()[:1]
    return state in (["Z"], ["X"])


def holder_is_gone(holder: str) -> bool:
    """Whether *holder*, a lease owner, is known to be a process that no longer runs.

    True only for a name of `default_owner`'s shape from this machine (the
    same host and machine digits) whose pid is not this process's and runs no
    process. Anything else is ``False``: not known to be gone.
    """
    parts = holder.rsplit(":", 2)
    if len(parts) != 3:
        return False
    host, pid_text, machine = parts
    if host != socket.gethostname() or machine != _machine():
        return False
    if not pid_text.isdigit() or pid_text.startswith("0"):
        return False
    pid = int(pid_text)
    return pid != os.getpid() and _pid_is_gone(pid)
