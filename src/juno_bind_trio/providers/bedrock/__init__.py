"""Bedrock's ``ConverseStream`` on the provider seam, through ``aiobotocore`` (``[bedrock]`` extra).

[`BedrockAdapter`][juno_bind_trio.providers.bedrock.BedrockAdapter] streams one turn per attempt
(text, ``toolUse`` calls with their input deltas, reasoning blocks kept with their signatures and
sent back on the next turn) and judges its failures with
[`classify_bedrock_error()`][juno_bind_trio.providers.bedrock.classify_bedrock_error]; give it to
a [`RoutedModel`][juno_bind_trio.providers.RoutedModel], or use the model string
``"bedrock:<model id>"`` with an [`Agent`][juno_bind_trio.agent.Agent].
[`open_bedrock_client()`][juno_bind_trio.providers.bedrock.open_bedrock_client] makes the client
the way routing needs it: aiobotocore's httpx backend with
[`StreamingHttpxSession`][juno_bind_trio.providers.bedrock.StreamingHttpxSession] (which makes it
stream on Trio), one attempt per call, credentials resolved without asyncio
([`resolve_credentials()`][juno_bind_trio.providers.bedrock.resolve_credentials]).
"""

from juno_bind_trio._extras import require as _require

_require("bedrock", "juno_bind_trio.providers.bedrock")

from juno_bind_trio._public import publish as _publish  # noqa: E402

from ._adapter import BedrockAdapter as BedrockAdapter  # noqa: E402
from ._client import BedrockCredentials as BedrockCredentials  # noqa: E402
from ._client import StreamingHttpxSession as StreamingHttpxSession  # noqa: E402
from ._client import close_event_stream as close_event_stream  # noqa: E402
from ._client import open_bedrock_client as open_bedrock_client  # noqa: E402
from ._client import resolve_credentials as resolve_credentials  # noqa: E402
from ._convert import SCHEMA_DIALECT as SCHEMA_DIALECT  # noqa: E402
from ._convert import STRUCTURED_OUTPUT_TOOL as STRUCTURED_OUTPUT_TOOL  # noqa: E402
from ._errors import INPUT_TOO_LONG_MARKERS as INPUT_TOO_LONG_MARKERS  # noqa: E402
from ._errors import THROTTLE_BACKOFF as THROTTLE_BACKOFF  # noqa: E402
from ._errors import classify_bedrock_error as classify_bedrock_error  # noqa: E402

__all__ = [
    "INPUT_TOO_LONG_MARKERS",
    "SCHEMA_DIALECT",
    "STRUCTURED_OUTPUT_TOOL",
    "THROTTLE_BACKOFF",
    "BedrockAdapter",
    "BedrockCredentials",
    "StreamingHttpxSession",
    "classify_bedrock_error",
    "close_event_stream",
    "open_bedrock_client",
    "resolve_credentials",
]

_publish(__name__, globals(), __all__)
