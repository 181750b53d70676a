"""The openai SDK adapter: routed, watched, streamed model turns over ``openai.AsyncOpenAI``.

[`stream_chat_completion()`][juno_bind_trio.providers.openai.stream_chat_completion] makes one
attempt (a streamed chat completion read through the stream watchdog, the tool-call accumulator and
the turn's text stream, ending in a [`ModelTurnResult`][juno_bind_trio.loop.ModelTurnResult] or in
an exception routing can classify).
[`OpenAIChatModel`][juno_bind_trio.providers.openai.OpenAIChatModel] routes each turn over a
[`RoutePlan`][juno_bind_trio.routing.RoutePlan] with it, and is what a
[`ToolLoop`][juno_bind_trio.loop.ToolLoop] takes as ``call_model``.
[`open_openai_client()`][juno_bind_trio.providers.openai.open_openai_client] makes the client the
way routing needs it, and
[`classify_openai_error()`][juno_bind_trio.providers.openai.classify_openai_error] maps the SDK's
exceptions onto routing's taxonomy.
[`OpenAIResponsesAdapter`][juno_bind_trio.providers.openai.OpenAIResponsesAdapter] speaks the
Responses API on the same client (reasoning items carried and sent back), its failures judged by
[`classify_responses_error()`][juno_bind_trio.providers.openai.classify_responses_error]; the model
string ``"openai-responses:<model>"`` opens one.
"""

from juno_bind_trio._public import publish as _publish

from ._adapter import OpenAIChatAdapter as OpenAIChatAdapter
from ._classify import MODEL_LIMIT_ERROR_CODES as MODEL_LIMIT_ERROR_CODES
from ._classify import classify_openai_error as classify_openai_error
from ._client import DEFAULT_CONNECT_TIMEOUT as DEFAULT_CONNECT_TIMEOUT
from ._client import DEFAULT_READ_TIMEOUT as DEFAULT_READ_TIMEOUT
from ._client import open_openai_client as open_openai_client
from ._client import prime_openai_client as prime_openai_client
from ._model import Classifier as Classifier
from ._model import OpenAIChatModel as OpenAIChatModel
from ._responses import OpenAIResponsesAdapter as OpenAIResponsesAdapter
from ._responses_errors import classify_responses_error as classify_responses_error
from ._stream import REASONING_FIELDS as REASONING_FIELDS
from ._stream import stream_chat_completion as stream_chat_completion

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_READ_TIMEOUT",
    "MODEL_LIMIT_ERROR_CODES",
    "REASONING_FIELDS",
    "Classifier",
    "OpenAIChatAdapter",
    "OpenAIChatModel",
    "OpenAIResponsesAdapter",
    "classify_openai_error",
    "classify_responses_error",
    "open_openai_client",
    "prime_openai_client",
    "stream_chat_completion",
]

_publish(__name__, globals(), __all__)
