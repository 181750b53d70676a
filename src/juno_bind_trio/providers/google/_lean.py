"""Gemini's lean stream path: the SDK builds the request, this package reads the stream.

``google-genai`` turns every chunk of a streamed answer into a pydantic
``GenerateContentResponse`` (after decoding it from JSON, encoding it again
and decoding it once more), which is most of what a streamed turn costs the
client; the turn needs only the parts, and a ``dict`` has them. So by default
(``GeminiAdapter(stream_path="lean")``):

* **The request is the SDK's**, but for its largest values: the contents,
  the system instruction and the function declarations are built in the
  wire's shape here (``_wire.py``, the same bytes) and the SDK's builder is
  given placeholders in their place. Its own request builder makes the body, the
  URL, the headers (the API key, ``x-goog-api-client``, the user agent) and
  the timeout exactly as ``generate_content_stream`` would
  (``types._GenerateContentParameters``, ``models._GenerateContentParameters_to_mldev``
  and the API client's ``_build_request``: private names of google-genai
  3.x; where the installed SDK lacks one, the adapter reads through the SDK
  instead). The request goes out on the httpx client the SDK was handed (the
  harness's), and an error status raises what the SDK raises
  (``errors.APIError.raise_for_async_response``: ``ClientError`` /
  ``ServerError`` with the API's status and details).
* **The stream is read by the SDK's rules** (google-genai 3.6,
  ``_api_client.HttpResponse._aiter_response_stream``), quirks included, so
  that a body means the same on both paths: lines end at ``\\r``, ``\\n``
  or ``\\r\\n`` (a ``\\r`` at the end of a read waits for the next), decoded
  as UTF-8 with replacement; ``data: `` lines of one event are joined by
  ``\\n`` and dispatched by a blank line; any other line is raw JSON,
  buffered until its braces balance (how the API sends an error body), so a
  stray line that is not JSON is a chunk that fails to parse; what is left at
  the end is dispatched. A chunk that is not JSON raises
  ``errors.UnknownApiResponseError``; a chunk whose first key is ``error``
  raises through ``errors.APIError.raise_error_async`` with its ``code``, as
  the SDK does mid-stream; transport errors are httpx2's, unwrapped, as the
  SDK leaves them.
* **Chunks are read as dicts** in the API's own spelling (``functionCall``,
  ``thoughtSignature`` as the base64 text the wire carries, ``finishReason``,
  ``usageMetadata``) and folded by the same ``TurnFolder`` as the SDK path's.

Where the paths differ, by design: a chunk of the wrong shape (a
``candidates`` that is not a list, a part that is not an object) is an
``UnknownApiResponseError`` here, the endpoint's fault, retried; the SDK path
raises pydantic's ``ValidationError`` for it, which routing propagates. The
SDK's automatic continuation (``finishReason: CONTINUATION`` with a
continuation token, for very long answers) is not followed: such a turn ends
with an unknown finish reason.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final, NoReturn, final

import anyio
import anyio.lowlevel

from juno_bind_trio.providers._reader import EVENTS_PER_CHECKPOINT

from ._wire import wire_contents, wire_system, wire_tools

if TYPE_CHECKING:
    import httpx2
    from google import genai

    from ._turn import TurnFolder

__all__ = ["lean_available", "read_lean"]

_DATA: Final = "data: "
_END: Final = b"\r\n\r\n"


def lean_available(client: genai.Client) -> bool:
    """Whether the installed SDK has the request builder the lean path uses, on this client."""
    try:
        from google.genai import _common, models, types
    except ImportError:
        return False
    api = getattr(client, "_api_client", None)
    return (
        hasattr(types, "_GenerateContentParameters")
        and hasattr(models, "_GenerateContentParameters_to_mldev")
        and hasattr(_common, "convert_to_dict")
        and hasattr(_common, "encode_unserializable_types")
        and callable(getattr(api, "_build_request", None))
        and getattr(api, "vertexai", None) is False
        and getattr(getattr(api, "_http_options", None), "httpx_async_client", None) is not None
    )


def _request(
    client: genai.Client, model: str, contents: list[dict[str, Any]], config: dict[str, Any]
) -> Any:
    # As AsyncModels._generate_content_stream builds it (google-genai 3.6), Gemini API side.
    from urllib.parse import urlencode

    from google.genai import _common, models, types

    api: Any = client._api_client  # no public request builder
    # The large values are built here (_wire.py); the SDK gets a placeholder in their place.
    built: dict[str, Any] = {}
    wire = wire_contents(contents) if contents else None
    if wire is not None:
        built["contents"] = wire
        contents = [{"parts": [], "role": "user"}]  # a placeholder, cheap to validate
    system = config.get("system_instruction")
    tools = config.get("tools")
    if system.__class__ is str or tools:
        config = dict(config)
        if system.__class__ is str:
            built["systemInstruction"] = wire_system(system)
            config["system_instruction"] = "."
        wire = wire_tools(tools) if tools else None
        if wire is not None:
            built["tools"] = wire
            config["tools"] = []
    parameters = types._GenerateContentParameters(
        model=model,
        contents=contents,
        config=config,  # type: ignore[arg-type]
    )
    body: dict[str, Any] = models._GenerateContentParameters_to_mldev(
        api, parameters, None, parameters
    )
    url_parts = body.get("_url")
    path = "{model}:streamGenerateContent?alt=sse"
    if url_parts:
        path = path.format_map(url_parts)
    query = body.get("_query")
    if query:
        path = f"{path}?{urlencode(query)}"
    body.pop("config", None)
    options = parameters.config.http_options if parameters.config is not None else None
    body = _common.convert_to_dict(body)
    body = _common.encode_unserializable_types(body)
    for key, value in built.items():
        body[key] = value  # in the placeholder's place: the key order is the SDK's
    return api._build_request("post", path, body, options)


async def read_lean(
    client: genai.Client,
    model: str,
    contents: list[dict[str, Any]],
    config: dict[str, Any],
    folder: TurnFolder,
) -> None:
    """Send the SDK's request on its httpx client and fold the answer's chunks into *folder*."""
    from google.genai import errors

    request = _request(client, model, contents, config)
    api: Any = client._api_client
    http: httpx2.AsyncClient = api._http_options.httpx_async_client
    data = request.data
    content = data if isinstance(data, bytes) else (json.dumps(data).encode() if data else None)
    to_url = getattr(api, "_httpx_url", None)  # the SDK's mTLS endpoint, where it uses one
    url = to_url(request.url, is_async=True) if callable(to_url) else request.url
    built = http.build_request(
        request.method,
        url,
        content=content,
        headers=request.headers,
        timeout=request.timeout,
    )
    response = await http.send(built, stream=True)
    try:
        await errors.APIError.raise_for_async_response(response)
        await _read(response, folder)
    finally:
        with anyio.CancelScope(shield=True):
            await response.aclose()


async def _read(response: httpx2.Response, folder: TurnFolder) -> None:
    feed = _ChunkFeed(folder, response)
    lines = _Lines()
    checkpoint, unyielded = anyio.lowlevel.checkpoint, 0
    async for piece in response.aiter_bytes():
        for chunk in lines.feed(piece):
            await feed(chunk)
            unyielded += 1
            if unyielded == EVENTS_PER_CHECKPOINT:
                unyielded = 0
                await checkpoint()
    for chunk in lines.finish():
        await feed(chunk)


@final
class _Lines:
    """Body bytes in, chunk texts out, by the SDK's rules (see the module's notes)."""

    __slots__ = ("_cr", "_data", "_depth", "_escaped", "_in_string", "_partial", "_raw")

    def __init__(self) -> None:
        self._partial: list[bytes] = []  # the bytes of a line not ended yet
        self._cr = False  # the last read ended in "\r"
        self._data: list[str] = []
        self._raw: list[str] = []
        self._depth = 0
        self._in_string = False
        self._escaped = False

    def feed(self, piece: bytes) -> Iterator[str] | tuple[str, ...]:
        # The common read: one whole "data: ..." event, nothing pending.
        if (
            piece[-4:] == _END
            and piece[:6] == b"data: "
            and not self._partial
            and not self._cr
            and not self._data
            and not self._raw
        ):
            rest = piece[6:-4]
            if b"\n" not in rest and b"\r" not in rest:
                return (rest.decode("utf-8", errors="replace"),)
        return self._chunks(self._split(piece))

    def _split(self, chunk: bytes) -> list[str]:
        # As the SDK's _SseLineDecoder: lines at \r, \n, \r\n only.
        if self._cr:
            chunk = b"\r" + chunk
            self._cr = False
        if chunk.endswith(b"\r"):
            self._cr = True
            chunk = chunk[:-1]
        if not chunk:
            return []
        lines = chunk.splitlines()
        tail = None if chunk.endswith((b"\r", b"\n")) else lines.pop()
        if lines:
            self._partial.append(lines[0])
            lines[0] = b"".join(self._partial)
            self._partial = []
        if tail is not None:
            self._partial.append(tail)
        return [line.decode("utf-8", errors="replace") for line in lines]

    def _chunks(self, lines: list[str]) -> Iterator[str]:
        for line in lines:
            if not line:
                if self._data:
                    yield "\n".join(self._data)
                    self._data = []
                continue
            if line.startswith(_DATA):
                self._data.append(line[6:])
                continue
            chunk = self._raw_line(line)
            if chunk is not None:
                yield chunk

    def _raw_line(self, line: str) -> str | None:
        # Raw JSON lines (an error body sent line by line), until the braces balance.
        for c in line:
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif c == "\\":
                    self._escaped = True
                elif c == '"':
                    self._in_string = False
            elif c == '"':
                self._in_string = True
            elif c == "{":
                self._depth += 1
            elif c == "}":
                self._depth -= 1
        self._raw.append(line)
        if self._depth == 0:
            return self._flush_raw()
        return None

    def _flush_raw(self) -> str:
        chunk = "".join(self._raw)
        self._raw = []
        self._depth = 0
        self._in_string = False
        self._escaped = False
        return chunk

    def finish(self) -> Iterator[str]:
        """The body ended: its unended line, and whatever is still held."""
        rest: list[str] = []
        if self._partial or self._cr:
            rest.append(b"".join(self._partial).decode("utf-8", errors="replace"))
            self._partial = []
            self._cr = False
        yield from self._chunks(rest)
        remaining = self._flush_raw()
        if remaining:
            yield remaining
        if self._data:
            yield "\n".join(self._data)
            self._data = []


@final
class _ChunkFeed:
    """One chunk's text in: parsed, an error chunk raised, its parts folded."""

    __slots__ = ("_folder", "_response")

    def __init__(self, folder: TurnFolder, response: httpx2.Response) -> None:
        self._folder = folder
        self._response = response

    async def __call__(self, text: str) -> None:
        try:
            chunk = json.loads(text)
        except json.JSONDecodeError as error:
            from google.genai import errors

            raise errors.UnknownApiResponseError(
                f"Failed to parse response as JSON. Raw response: {text}"
            ) from error
        if chunk.__class__ is dict:
            if next(iter(chunk), None) == "error":
                from google.genai import errors

                # As the SDK raises it mid-stream (an error that is not an object
                # fails here as it fails there).
                await errors.APIError.raise_error_async(
                    chunk.get("error", {}).get("code"), chunk, self._response
                )
            self._fold(chunk)
        elif chunk is not None:
            self._malformed("is not an object", chunk)
        else:
            self._folder.alive()  # an empty chunk the SDK reads as no candidates

    def _fold(self, chunk: dict[str, Any]) -> None:
        folder = self._folder
        candidates = chunk.get("candidates")
        if not candidates:
            feedback = chunk.get("promptFeedback")
            if feedback.__class__ is dict and feedback.get("blockReason") is not None:
                folder.blocked()
            self._usage(chunk.get("usageMetadata"))
            folder.alive()
            return
        if candidates.__class__ is not list:
            self._malformed("has candidates that are not a list", candidates)
        candidate = candidates[0]
        if candidate.__class__ is not dict:
            self._malformed("has a candidate that is not an object", candidate)
        body = candidate.get("content")
        parts = body.get("parts") if body.__class__ is dict else None
        answered = False
        if parts:
            if parts.__class__ is not list:
                self._malformed("has parts that are not a list", parts)
            for part in parts:
                if part.__class__ is not dict:
                    self._malformed("has a part that is not an object", part)
                text = part.get("text")
                signature = part.get("thoughtSignature")
                function_call = part.get("functionCall")
                if text is not None and function_call is None:
                    if text.__class__ is not str:
                        self._malformed("has a text that is not a string", text)
                    if part.get("thought"):
                        folder.thought(text, signature)
                    elif folder.text(text, signature):
                        answered = True
                    continue
                if function_call is not None:
                    if function_call.__class__ is not dict:
                        self._malformed("has a functionCall that is not an object", function_call)
                    folder.call(
                        function_call.get("id"),
                        function_call.get("name"),
                        function_call.get("args"),
                        signature,
                    )
                    answered = True
                elif signature is not None:
                    folder.signature(signature)
        finish = candidate.get("finishReason")
        if finish is not None:
            folder.finish(str(finish))
        self._usage(chunk.get("usageMetadata"))
        if answered:
            folder.answered()
        else:
            folder.alive()

    def _usage(self, usage: object) -> None:
        if usage is None:
            return
        if usage.__class__ is not dict:
            self._malformed("has a usageMetadata that is not an object", usage)
        get = usage.get
        self._folder.usage(
            _count(get("promptTokenCount")),
            _count(get("candidatesTokenCount")),
            _count(get("thoughtsTokenCount")),
            _count(get("cachedContentTokenCount")),
        )

    def _malformed(self, what: str, value: object) -> NoReturn:
        from google.genai import errors

        shown = repr(value)
        if len(shown) > 200:
            shown = shown[:200] + "..."
        raise errors.UnknownApiResponseError(f"a stream chunk {what}: {shown}")


def _count(value: object) -> int:
    return value if value.__class__ is int else 0
