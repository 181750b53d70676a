"""The package's JSON: read strictly, written canonically, so every party holds it alike.

A tool call's arguments are text a model wrote, read here and by a
TypeScript host, and hashed for receipts and idempotency keys that both must
agree on. So JSON is *read* only as standard JSON every party can hold (no
``NaN`` or ``Infinity``, no number past the largest double, no nesting past
the package's depth limit), and *written*, for hashing, in the one canonical
text a TypeScript host's ``JSON.stringify`` of the key-sorted value gives.
Floor 0 of the package: the tool-call value reads and hashes its arguments
with it; ``run`` publishes ``canonical_json``, ``completion`` reads
structured output with ``decode_strict_json``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring
from typing import Any, Final, NoReturn

from juno_bind_trio._validate import MAX_JSON_DEPTH, shown

__all__ = [
    "canonical",
    "canonical_json",
    "decode_strict_json",
    "follow_ref",
    "json_copy",
    "sha256_hex",
]

# --- copying ------------------------------------------------------------------------


def json_copy(value: Any) -> Any:
    """A copy of a JSON value that shares nothing mutable: each dict and list made anew
    (a tuple too, for the dicts in it), every other value (str, number, ...) shared.

    For what a host's function may edit in place (a schema, a request's messages)
    while the package keeps the original.
    """
    if isinstance(value, dict):
        return {key: json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_copy(item) for item in value]
    if isinstance(value, tuple):
        return tuple(json_copy(item) for item in value)
    return value


# --- reading ------------------------------------------------------------------------

_PAST: Final = "no party on the wire can hold it as a number"
_MAX_DOUBLE: Final = int(sys.float_info.max)


def _reject_constant(token: str) -> NoReturn:
    raise ValueError(f"{token} is not standard JSON")


def _finite_float(token: str) -> float:
    value = float(token)
    if value in (math.inf, -math.inf):
        raise ValueError(f"the number {token[:40]} is past the largest double ({_PAST})")
    return value


def _double_int(token: str) -> int:
    # int() itself refuses more than 4,300 digits (ValueError); below that, an
    # integer past the largest double is a number no other party can hold.
    value = int(token)
    if len(token) > 308 and not -_MAX_DOUBLE <= value <= _MAX_DOUBLE:
        raise ValueError(f"the number {token[:40]}... is past the largest double ({_PAST})")
    return value


_decode: Final = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_double_int
).decode
# The same decoder with integers read in C: an integer past the largest double
# has 309 digits at least, so a text shorter than that cannot hold one, and
# skips a Python call per integer (floats are read by the hook either way).
_decode_short: Final = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float
).decode
_DOUBLE_DIGITS: Final = 309


def _too_deep(value: object) -> bool:
    # Without recursion: the point is to refuse what recursion cannot take.
    if not isinstance(value, dict | list):
        return False
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return True
        items = node.values() if isinstance(node, dict) else node
        assert isinstance(items, Iterable)
        stack.extend((item, depth + 1) for item in items if isinstance(item, dict | list))
    return False


def decode_strict_json(text: str) -> Any:
    """``json.loads`` for standard JSON that every party can hold, or ``ValueError``.

    Refused: ``NaN`` and ``Infinity``, a number past the largest double
    (``1e400``, which Python would read as ``inf``), and nesting deeper than
    the package's JSON depth limit. The arguments rule and the
    structured-output check both read JSON through it.
    """
    value = (_decode if len(text) >= _DOUBLE_DIGITS else _decode_short)(text)
    # The length and the count are C-speed bounds on the depth: only a text with
    # that many brackets can nest that deep, and only then is the value walked.
    if (
        len(text) > MAX_JSON_DEPTH
        and text.count("[") + text.count("{") > MAX_JSON_DEPTH
        and _too_deep(value)
    ):
        raise ValueError(f"it nests more than {MAX_JSON_DEPTH} levels deep")
    return value


# --- writing ------------------------------------------------------------------------


# Strings: the standard library's C escaper writes exactly what JavaScript's
# JSON.stringify writes (the quote, the backslash, \b \f \n \r \t, other
# control characters as lowercase \u00xx, everything else as it is), except
# for lone surrogates, which it leaves raw. UTF-8 cannot encode those and
# JSON.stringify escapes them, so they are escaped on top: a rare case, found
# by one C-speed search.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _string(value: str) -> str:
    text: str = encode_basestring(value)
    if _SURROGATE.search(text) is not None:
        text = _SURROGATE.sub(_escape_surrogate, text)
    return text


def _number(value: float) -> str:
    # JavaScript's Number.prototype.toString, so a TypeScript host and this one
    # hash the same arguments alike: 1.0 is "1", 1e21 is "1e+21", 1e-7 is
    # "1e-7". Both write the shortest digits that round-trip; only where the
    # point and the exponent go differs.
    magnitude = abs(value)
    if 1e-4 <= magnitude < 1e16:
        # Here Python's repr is already positional, as JavaScript's is, and
        # differs only by the ".0" it gives an integral value.
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    if value == 0:
        return "0"  # and -0.0, as JavaScript writes it
    mantissa, _, exp = repr(magnitude).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    point = len(whole) + int(exp or 0) - (len(whole + frac) - len(digits))
    digits = digits.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        e = n - 1
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + ("e+" if e >= 0 else "e-")
        text += str(abs(e))
    return "-" + text if value < 0 else text


def _utf16_key(item: tuple[str, object]) -> bytes:
    # JavaScript sorts object keys by UTF-16 code units, Python str by code
    # points; they differ only above U+FFFF, and the hash must not.
    return item[0].encode("utf-16-be", "surrogatepass")


_SAFE_INT: Final = 2**53
"""Integers up to this magnitude are exact doubles, and so written as they are."""


class _Refused(Exception):
    """Raised on the first value that is not JSON; each container adds its key on the way out.

    The path is built only when something is refused: on the ordinary path
    no container formats a path it will never show.
    """

    def __init__(self, error: type[Exception], problem: str) -> None:
        super().__init__(problem)
        self.error = error
        self.problem = problem
        self.keys: list[str | int] = []


def _path(keys: list[str | int]) -> str:
    path = "$"
    steps: list[str | int | None] = list(reversed(keys))
    if len(steps) > 20:  # a path into a value nested hundreds deep: its two ends say enough
        skipped = len(steps) - 20
        steps = [*steps[:10], None, *steps[-10:]]
    for key in steps:
        if key is None:
            path += f"...{skipped} more..."
        elif isinstance(key, int):
            path += f"[{key}]"
        elif key.isidentifier():
            path += f".{key}"
        else:
            path += f"[{_string(key)}]"
    return path


_DIGITS: Final = frozenset("0123456789")
_MAX_INDEX: Final = 2**32 - 2


def _is_index(key: str) -> bool:
    # An array index, as JavaScript objects order their keys: the canonical
    # decimal string of an integer 0 ... 2**32 - 2 ("0", "7", "10"; not "01",
    # "-1", "1.0" or "4294967295").
    return (
        0 < len(key) <= 10
        and key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and int(key) <= _MAX_INDEX
    )


def _indices_first(items: list[tuple[str, object]]) -> list[tuple[str, object]]:
    # A JavaScript object enumerates its array-index keys first, in ascending
    # numeric order, and only then its other keys in insertion order, whatever
    # order they were added in. So the key-sorted object a TypeScript host
    # stringifies reads {"2":…,"10":…,"a":…}, and so must this text.
    indices = [item for item in items if _is_index(item[0])]
    if not indices:
        return items
    indices.sort(key=lambda item: int(item[0]))
    return indices + [item for item in items if not _is_index(item[0])]


def _enter(container: object, active: set[int]) -> None:
    # *active* holds the containers being written, outermost first: a repeat
    # is a cycle, and its size is the depth.
    if id(container) in active:
        raise _Refused(ValueError, "contains itself")
    if len(active) >= MAX_JSON_DEPTH:
        raise _Refused(
            ValueError, f"nests more than {MAX_JSON_DEPTH} containers deep (the JSON depth limit)"
        )
    active.add(id(container))


def _encode(value: object, out: list[str], active: set[int]) -> None:
    if isinstance(value, str):
        out.append(_string(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if -_SAFE_INT <= value <= _SAFE_INT:
            out.append(int.__repr__(value))  # int.__repr__: an IntEnum is its number
        else:
            # Past 2**53 a JavaScript number is the nearest double, and
            # JSON.stringify writes that double: 2**60 is 1152921504606847000.
            # Written the same way here, or a TypeScript host and this one would
            # hash the same arguments differently.
            try:
                nearest = float(value)
            except OverflowError:
                # Past the largest double there is no JSON number to write (a
                # TypeScript host holds Infinity, which JSON.stringify writes as null).
                raise _Refused(
                    ValueError,
                    f"is an integer of about {int(value.bit_length() * 0.30103) + 1} digits, "
                    "past the largest JSON number (about 1.8e308)",
                ) from None
            out.append(_number(nearest))
    elif isinstance(value, float):
        if value != value or value in (math.inf, -math.inf):
            raise _Refused(ValueError, f"is {value!r}, which JSON cannot represent")
        out.append(_number(value))
    elif isinstance(value, dict):
        _enter(value, active)
        items = list(value.items())
        for key, _ in items:
            if not isinstance(key, str):
                raise _Refused(TypeError, f"has a key {shown(key)} that is not a string")
        # Code point order is UTF-16 order for every key without an astral character.
        if all(key.isascii() for key, _ in items):
            items.sort()
        else:
            items.sort(key=_utf16_key)
        if any(key[:1] in _DIGITS for key, _ in items):
            items = _indices_first(items)
        out.append("{")
        first = True
        for key, item in items:
            if not first:
                out.append(",")
            first = False
            out.append(_string(key))
            out.append(":")
            try:
                _encode(item, out, active)
            except _Refused as refused:
                refused.keys.append(key)
                raise
        out.append("}")
        active.discard(id(value))
    elif isinstance(value, (list, tuple)):
        _enter(value, active)
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            try:
                _encode(item, out, active)
            except _Refused as refused:
                refused.keys.append(index)
                raise
        out.append("]")
        active.discard(id(value))
    else:
        raise _Refused(
            TypeError, f"is a {type(value).__name__} ({shown(value)}), which is not JSON"
        )


def canonical_json(value: object) -> str:
    """The one JSON text of *value*: keys sorted, no whitespace, numbers in shortest form.

    Two values that are equal as JSON give the same text, whatever their key
    order or how their numbers were written (``1`` and ``1.0`` are one
    number, as they are in JSON). Numbers and key order follow JavaScript's
    ``JSON.stringify`` of a key-sorted value, so a TypeScript host computes
    the same text: keys sort by UTF-16 code units, except that array-index
    keys (``"0"``, ``"2"``, ``"10"``: the decimal form of an integer up to
    2**32 - 2) come first, in numeric order, because a JavaScript object
    always enumerates them so (``{"10": 1, "2": 2, "a": 3}`` is written
    ``{"2":2,"10":1,"a":3}``). ``json.loads`` of the result equals *value*, reading
    each number as the double JSON means by it: an integral float past
    2**53 is written out in full, as JavaScript does, and so reads back as
    an ``int`` of the same value; an ``int`` past 2**53 is written as the
    nearest double, as JavaScript would hold it (``2**60`` is
    ``1152921504606847000``), so two such ints that share a double share a
    text, exactly as they would on a TypeScript host.

    Accepts ``dict`` (string keys), ``list``, ``tuple``, ``str``, ``int``,
    ``float``, ``bool`` and ``None``.

    :raises ValueError: a NaN or infinity, an integer past the largest
        double (about 1.8e308, where JSON numbers end), a container that
        contains itself, or nesting deeper than 500 containers (the
        package's JSON depth limit); the message names where
        (``$.items[2].price``).
    :raises TypeError: anything else that is not JSON (a set, bytes, a
        datetime, a non-string key), named the same way.
    """
    return canonical(value, "canonical_json")


def canonical(value: object, where: str) -> str:
    """[`canonical_json()`][juno_bind_trio.run.canonical_json] of *value*; *where* names the
    caller in the error."""
    out: list[str] = []
    try:
        _encode(value, out, set())
    except _Refused as refused:
        raise refused.error(f"{where}: {_path(refused.keys)} {refused.problem}") from None
    return "".join(out)


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of *data*, lowercase hex: the package's default digest."""
    return hashlib.sha256(data).hexdigest()


# How many local references in a row follow_ref follows before it stops (a cycle).
_MAX_REF_HOPS: Final = 32


def follow_ref(schema: object, root: Mapping[str, Any]) -> Any:
    """*schema* with its local ``$ref`` followed: a JSON pointer into *root*
    (``#/$defs/Name``), a bounded number of hops in a row.

    Lenient, for readers that only look a schema up: a reference that is not
    local, or that names nothing, leaves *schema* as it is.
    """
    for _ in range(_MAX_REF_HOPS):
        if not isinstance(schema, Mapping):
            return schema
        ref = schema.get("$ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return schema
        node: object = root
        for part in ref[2:].split("/"):
            if not isinstance(node, Mapping):
                return schema
            node = node.get(part.replace("~1", "/").replace("~0", "~"))
        schema = node
    return schema
