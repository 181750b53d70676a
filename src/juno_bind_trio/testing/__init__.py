"""Test doubles for your own tests: fault-injecting servers of each provider's wire.

Point the real ``openai.AsyncOpenAI`` at
[`open_fake_openai_server()`][juno_bind_trio.testing.open_fake_openai_server] and script what each
request gets: text, reasoning and tool-call deltas, usage, and the faults a provider really produces
(refused connections, error statuses, a connection dropped mid-stream, an error event, a malformed
chunk, a body that ends without ``[DONE]``, stalls). Like the real API it refuses a request
whose tool-call history is broken
([check_tool_call_history][juno_bind_trio.testing.check_tool_call_history] is the same check,
for a transcript in hand). Every delay runs on the event
loop's clock, so on Trio's autojump clock a test of a ten-minute stall is
instant and its times are exact. Runs on both anyio backends.

The same scripts play on the fakes of the OpenAI Responses API
([open_fake_responses_server][juno_bind_trio.testing.open_fake_responses_server]),
Gemini ([open_fake_gemini_server][juno_bind_trio.testing.open_fake_gemini_server]) and
Bedrock's event stream
([open_fake_bedrock_server][juno_bind_trio.testing.open_fake_bedrock_server]),
each refusing what its real API refuses; ``fake_*_env`` point each SDK's own
environment variables at one.
"""

from juno_bind_trio._errors import SimulatedCrash as SimulatedCrash
from juno_bind_trio._errors import ToolCallHistoryError as ToolCallHistoryError
from juno_bind_trio._public import publish as _publish

from ._crash import CRASH_POINTS as CRASH_POINTS
from ._crash import CrashingStore as CrashingStore
from ._crash import CrashPoint as CrashPoint
from ._crash import run_until_crash as run_until_crash
from ._doubles import FunctionModel as FunctionModel
from ._doubles import FunctionModelFn as FunctionModelFn
from ._doubles import TestModel as TestModel
from ._doubles import block_model_requests as block_model_requests
from ._doubles import value_from_schema as value_from_schema
from ._environment import fake_openai_env as fake_openai_env
from ._fake_anthropic import anthropic_signature as anthropic_signature
from ._fake_anthropic import fake_anthropic_env as fake_anthropic_env
from ._fake_anthropic import open_fake_anthropic_server as open_fake_anthropic_server
from ._fakes import fake_bedrock_env as fake_bedrock_env
from ._fakes import fake_gemini_env as fake_gemini_env
from ._fakes import fake_responses_env as fake_responses_env
from ._fakes import open_fake_bedrock_server as open_fake_bedrock_server
from ._fakes import open_fake_gemini_server as open_fake_gemini_server
from ._fakes import open_fake_responses_server as open_fake_responses_server
from ._history import check_tool_call_history as check_tool_call_history
from ._loopback import LoopbackServer as LoopbackServer
from ._script import CloseBeforeResponse as CloseBeforeResponse
from ._script import CompletionResponse as CompletionResponse
from ._script import Disconnect as Disconnect
from ._script import ErrorEvent as ErrorEvent
from ._script import ErrorResponse as ErrorResponse
from ._script import FakeResponse as FakeResponse
from ._script import Finish as Finish
from ._script import MalformedChunk as MalformedChunk
from ._script import Pause as Pause
from ._script import RawEvent as RawEvent
from ._script import ReasoningDelta as ReasoningDelta
from ._script import StreamEvent as StreamEvent
from ._script import StreamResponse as StreamResponse
from ._script import TextDelta as TextDelta
from ._script import ToolCallDelta as ToolCallDelta
from ._script import Usage as Usage
from ._server import FakeOpenAIServer as FakeOpenAIServer
from ._server import RecordedRequest as RecordedRequest
from ._server import Script as Script
from ._server import open_fake_openai_server as open_fake_openai_server
from ._server import serve_fake_openai as serve_fake_openai
from ._wire import FakeProviderServer as FakeProviderServer
from ._wire import ProviderRequest as ProviderRequest
from ._wire import ProviderScript as ProviderScript

__all__ = [
    "CRASH_POINTS",
    "CloseBeforeResponse",
    "CompletionResponse",
    "CrashPoint",
    "CrashingStore",
    "Disconnect",
    "ErrorEvent",
    "ErrorResponse",
    "FakeOpenAIServer",
    "FakeProviderServer",
    "FakeResponse",
    "Finish",
    "FunctionModel",
    "FunctionModelFn",
    "LoopbackServer",
    "MalformedChunk",
    "Pause",
    "ProviderRequest",
    "ProviderScript",
    "RawEvent",
    "ReasoningDelta",
    "RecordedRequest",
    "Script",
    "SimulatedCrash",
    "StreamEvent",
    "StreamResponse",
    "TestModel",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallHistoryError",
    "Usage",
    "anthropic_signature",
    "block_model_requests",
    "check_tool_call_history",
    "fake_anthropic_env",
    "fake_bedrock_env",
    "fake_gemini_env",
    "fake_openai_env",
    "fake_responses_env",
    "open_fake_anthropic_server",
    "open_fake_bedrock_server",
    "open_fake_gemini_server",
    "open_fake_openai_server",
    "open_fake_responses_server",
    "run_until_crash",
    "serve_fake_openai",
    "value_from_schema",
]

_publish(__name__, globals(), __all__)
