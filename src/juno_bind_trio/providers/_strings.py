"""Model strings of every provider, and a list of them as a fallback plan, as one model.

``StringModel("anthropic:claude-sonnet-4-5")``, ``"google:gemini-2.5-flash"``,
``"openai-responses:gpt-5"``, ``"bedrock:<model id>"``, ``"openai:gpt-4o-mini"``,
and ``StringModel(["anthropic:claude-sonnet-4-5", "openai:gpt-4o-mini"])``: the
first model, then the next as the fallback, each stage served by its provider.
It is what ``Agent("<provider>:<model>")`` builds.

Each provider's subpackage is imported when a string names it (never
before: a model on OpenAI does not import the Anthropic SDK), and its
``_string`` module gives ``string_adapter_opener(owner, base_url=, api_key=)``,
called when the model is built (it checks the arguments and imports the SDK)
and returning the opener: a coroutine function that opens the provider's
client from the arguments or from the SDK's own environment variables, with
the SDK's retries off, and returns its adapter and the client's closer.
The model owns what it opens: one client per provider per event loop, opened
at the first turn (or by ``prepare()``), closed by ``aclose()`` or with the
loop (see ``providers/_owned.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, final

import anyio

from juno_bind_trio._options import checked_request_options
from juno_bind_trio._validate import error_kind, shown
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage

from ._owned import OwnedAdapter, StringAdapterOpener
from ._routed import RoutedModel

if TYPE_CHECKING:
    from juno_bind_trio.loop import ModelTurn, ModelTurnResult

__all__ = ["MODEL_STRING_PREFIXES", "StringModel"]

MODEL_STRING_PREFIXES: Final = {
    "openai": "juno_bind_trio.providers.openai._string",
    "openai-responses": "juno_bind_trio.providers.openai._responses_string",
    "anthropic": "juno_bind_trio.providers.anthropic._string",
    "google": "juno_bind_trio.providers.google._string",
    "bedrock": "juno_bind_trio.providers.bedrock._string",
}
"""Each model string prefix, and the module whose ``string_adapter_opener`` serves it."""

_SHAPE: Final = "'<provider>:<model>' with provider one of " + ", ".join(
    repr(p) for p in MODEL_STRING_PREFIXES
)


def _parse(owner: str, text: str) -> tuple[str, str]:
    provider, colon, name = text.partition(":")
    if not colon or provider not in MODEL_STRING_PREFIXES or not name.strip():
        raise ValueError(
            f"{owner}: a model string must be 'openai:<model-name>' or another provider's "
            f"{_SHAPE}, got {text!r}; for anything else pass a RoutedModel or an OpenAIChatModel"
        )
    return provider, name


def _opener(
    owner: str, provider: str, *, base_url: str | None, api_key: str | None
) -> StringAdapterOpener:
    module_name = MODEL_STRING_PREFIXES[provider]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise ValueError(
                f"{owner}: provider {provider!r} is not available in this version of the package"
            ) from None
        raise  # the provider's extra is missing: its ImportError names it
    opener: StringAdapterOpener = module.string_adapter_opener(
        owner, base_url=base_url, api_key=api_key
    )
    return opener


@final
class StringModel:
    """A model named by a model string, or a list of them as a fallback plan, owning its clients.

    ``StringModel(model, *, request_options=None, base_url=None, api_key=None)``:
    *model* a string ``"<provider>:<model>"`` (provider one of the keys of
    ``MODEL_STRING_PREFIXES``) or a non-empty list of them, each the next
    stage's fallback; *request_options* sent with every request (checked as
    [RoutedModel][juno_bind_trio.providers.RoutedModel] checks its own);
    *base_url* / *api_key* configure the one provider named (otherwise each
    SDK reads its own environment variables when its client opens); *owner*
    the name its errors start with (``Agent`` passes its own).

    Each provider's client is opened at the first turn in an event loop (or by
    [prepare()][juno_bind_trio.providers.StringModel.prepare]) and shared by
    every turn in that loop; [aclose()][juno_bind_trio.providers.StringModel.aclose]
    closes this loop's, and a loop that ends closes its own with no warning.
    A ``StringModel`` is a model function: ``await model(turn)`` routes the
    turn through this loop's [RoutedModel][juno_bind_trio.providers.RoutedModel].

    :raises TypeError: *model* is neither a string nor a list of strings, or
        *base_url* / *api_key* is not a string.
    :raises ValueError: a string is not a model string, the list is empty, one
        model is named twice in a row, or *base_url* / *api_key* is given for
        a list naming several providers.
    """

    __slots__ = ("_built", "_description", "_owned", "_plan", "_request_options")

    def __init__(
        self,
        model: str | Sequence[str],
        *,
        request_options: Mapping[str, Any] | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        owner: str = "StringModel",
    ) -> None:
        named: object = owner
        if not isinstance(named, str) or not named.strip():
            raise error_kind(named, str)(
                f"StringModel: owner must be a non-empty str, got {shown(named)}"
            )
        texts = [model] if isinstance(model, str) else model
        if not isinstance(texts, list | tuple):
            raise TypeError(
                f"{owner}: model must be a model string ({_SHAPE}) or a list of them, "
                f"got {shown(model)}"
            )
        if not texts:
            raise ValueError(f"{owner}: a list of model strings must not be empty")
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(
                    f"{owner}: model[{index}] must be a model string ({_SHAPE}), got {shown(text)}"
                )
        for name, value in (("base_url", base_url), ("api_key", api_key)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{owner}: {name} must be a str or None, got {shown(value)}")
        self._request_options = checked_request_options(owner, request_options, or_none=True)
        parsed = [_parse(owner, text) for text in texts]
        providers = list(dict.fromkeys(provider for provider, _ in parsed))
        if (base_url is not None or api_key is not None) and len(providers) > 1:
            raise ValueError(
                f"{owner}: base_url=/api_key= configure one provider, and {providers!r} are "
                "named; set each provider's environment variables, or pass a RoutedModel"
            )
        stages: list[RouteStage] = []
        for provider, name in parsed:
            if stages and stages[-1].model == name:
                raise ValueError(f"{owner}: model {name!r} is named twice in a row")
            stages.append(RouteStage(name, [Candidate(provider)]))
        self._plan = RoutePlan(stages)
        self._owned = {
            provider: OwnedAdapter(_opener(owner, provider, base_url=base_url, api_key=api_key))
            for provider in providers
        }
        self._description = model if isinstance(model, str) else repr(list(texts))
        # One routed model per set of adapters: a loop's turns share both.
        self._built: tuple[tuple[int, ...], RoutedModel] | None = None

    def __repr__(self) -> str:
        return f"StringModel({self._description!r})"

    @property
    def description(self) -> str:
        """The model string, or the list's ``repr``, as given."""
        return self._description

    @property
    def plan(self) -> RoutePlan:
        """The route plan: one stage per string, its provider the one candidate."""
        return self._plan

    @property
    def opened(self) -> int:
        """How many clients it has opened, over every provider and event loop."""
        return sum(owned.opened for owned in self._owned.values())

    async def model(self) -> RoutedModel:
        """This event loop's [RoutedModel][juno_bind_trio.providers.RoutedModel], its clients
        opened now where they are not yet.

        :raises UsageError: a provider's key or base URL is missing or malformed.
        """
        adapters = {provider: await owned.adapter() for provider, owned in self._owned.items()}
        key = tuple(id(adapter) for adapter in adapters.values())
        if self._built is None or self._built[0] != key:
            routed = RoutedModel(
                plan=self._plan, adapters=adapters, request_options=self._request_options
            )
            self._built = (key, routed)
        return self._built[1]

    async def __call__(self, turn: ModelTurn) -> ModelTurnResult:
        """Route one turn through this event loop's model."""
        return await (await self.model())(turn)

    async def prepare(self) -> None:
        """Open this event loop's clients now, outside any run's deadline.

        :raises UsageError: a provider's key or base URL is missing or malformed.
        """
        await self.model()

    async def aclose(self) -> None:
        """Close every client this event loop opened, each however the others fare."""
        with anyio.CancelScope(shield=True):
            for owned in self._owned.values():
                await owned.aclose()

    def is_open(self) -> bool:
        """Whether the current event loop has any of its clients open."""
        return any(owned.is_open() for owned in self._owned.values())
