"""The fuzz registry: one entry per public callable, gathered from ``registry_*.py``.

How to add coverage for a public name
-------------------------------------

``test_fuzz_walker.py`` fails when a callable in any subpackage's ``__all__``
(a function, or a class a host constructs) has no entry. To add one, open
(or create) ``tests/fuzz/registry_<subpackage>.py`` and append to its
``ENTRIES`` list::

    from fuzz_support import Entry, auto, call
    from juno_bind_trio.store import SqliteStore, open_store

    ENTRIES = [
        Entry(SqliteStore),                       # arguments drawn from the signature
        Entry(open_store, raises=(StoreError,)),  # may raise a package error on purpose
        Entry(
            load_run,
            args=st.builds(call, run_ids, st.just(fake_store)),  # your own strategy
            check=lambda c, result: ...,          # assert what a good call returned
        ),
    ]

* ``Entry(target)`` alone fuzzes it with [auto][fuzz_support.auto]: each
  parameter gets a value of its annotated type or junk. Teach ``auto`` your
  own types with ``register_example(MyType, strategy)``, at the top of your
  registry module, so other entries taking a ``MyType`` get real ones too.
* ``raises`` lists the package errors the callable documents
  (``SchemaError``, ``TranscriptError``); ``TypeError`` / ``ValueError`` are
  always allowed if their message names the callable.
* ``args`` is a strategy of ``call(*args, **kwargs)`` values; give one when the
  interesting inputs are structured, so the fuzz gets past the first check.
* ``check(call, result)`` asserts the callable's own contract on success.
* An async function is run on trio under a virtual clock; a function that
  returns an async context manager is entered and left.
* Public methods may have entries too (``Entry(CircuitBreaker.acquire, ...)``).

The default test run draws 25 examples per entry; ``nox -s fuzz`` draws
thousands. Keep strategies cheap: the whole fuzz should stay within seconds.
"""

from __future__ import annotations

import importlib
import pathlib

from fuzz_support import Entry

__all__ = ["ENTRIES"]


def _gather() -> list[Entry]:
    entries: list[Entry] = []
    for path in sorted(pathlib.Path(__file__).parent.glob("registry_*.py")):
        entries.extend(importlib.import_module(path.stem).ENTRIES)
    return entries


ENTRIES: list[Entry] = _gather()
