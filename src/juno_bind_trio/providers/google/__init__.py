"""The Gemini API on the provider seam, through ``google-genai`` (``[google]`` extra).

[`GeminiAdapter`][juno_bind_trio.providers.google.GeminiAdapter] streams one turn per attempt
(text, function calls, thought parts as reasoning, thought signatures kept and sent back byte for
byte on the next turn) and judges its failures with
[`classify_gemini_error()`][juno_bind_trio.providers.google.classify_gemini_error]; give it to a
[`RoutedModel`][juno_bind_trio.providers.RoutedModel], or use the model string
``"google:<model>"`` with an [`Agent`][juno_bind_trio.agent.Agent].
[`open_gemini_client()`][juno_bind_trio.providers.google.open_gemini_client] makes the client
the way routing needs it: on an httpx2 client of its own (which is what makes the SDK run on
Trio), one attempt per request, a bounded idle read.
"""

from juno_bind_trio._extras import require as _require

_require("google", "juno_bind_trio.providers.google")

from juno_bind_trio._public import publish as _publish  # noqa: E402

from ._adapter import GeminiAdapter as GeminiAdapter  # noqa: E402
from ._client import open_gemini_client as open_gemini_client  # noqa: E402
from ._convert import FOREIGN_CALL_SIGNATURE as FOREIGN_CALL_SIGNATURE  # noqa: E402
from ._convert import SCHEMA_DIALECT as SCHEMA_DIALECT  # noqa: E402
from ._errors import PROMPT_TOO_LONG_MARKERS as PROMPT_TOO_LONG_MARKERS  # noqa: E402
from ._errors import classify_gemini_error as classify_gemini_error  # noqa: E402

__all__ = [
    "FOREIGN_CALL_SIGNATURE",
    "PROMPT_TOO_LONG_MARKERS",
    "SCHEMA_DIALECT",
    "GeminiAdapter",
    "classify_gemini_error",
    "open_gemini_client",
]

_publish(__name__, globals(), __all__)
