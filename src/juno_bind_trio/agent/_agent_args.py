"""What [Agent][juno_bind_trio.agent.Agent]'s constructor checks: its keywords, made into the
RunSettings each of its runs is handed.

Everything the agent can check is checked when it is built, because a
wiring mistake found at the first model call is found in production: a tool
that cannot be a tool, two tools with one name, a model string that names
no provider, an output type that cannot be requested, a tool that strict
mode cannot express. Each raises there, naming the thing and the fix.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, cast

from juno_bind_trio._errors import SchemaError
from juno_bind_trio._options import candidate_option_clashes, checked_request_options
from juno_bind_trio._validate import (
    a_bool,
    count,
    instance_of,
    is_async_callable,
    non_empty_str,
    one_of,
    optional,
    positive_seconds,
)
from juno_bind_trio.providers import RoutedModel, StringModel
from juno_bind_trio.providers.openai import OpenAIChatAdapter, OpenAIChatModel
from juno_bind_trio.routing import Candidate, RoutePlan, RouteStage
from juno_bind_trio.run import ChainRule
from juno_bind_trio.schema import SCHEMA_DIALECTS, SchemaDialect, sanitize_tool_schema

from ._compaction import Compaction
from ._guardrails import check_input_guardrails, check_output_guardrails
from ._handoff import handoff_specs
from ._limits import UsageLimits
from ._output_build import bind_output_tool, check_output_tool_names, output_plan
from ._prepare import check_prepare
from ._processors import check_processors
from ._run import ModelFn, ModelSource, RunSettings
from ._store_session import check_store
from ._tool import Tool, check_tool_deps
from ._tool_function import collect_tools
from ._tool_guards import check_tool_guards

if TYPE_CHECKING:
    import openai

__all__ = ["agent_settings", "check_limits", "model_source"]

_COUNT: Final = count(minimum=1)
_OPTIONAL_NAME: Final = optional(non_empty_str())
_LEASE_TTL: Final = positive_seconds()
_DIALECT: Final = one_of(*SCHEMA_DIALECTS)
_CHAIN_RULE: Final = optional(instance_of(ChainRule))
_COMPACTION: Final = optional(instance_of(Compaction))
_LIMITS: Final = optional(instance_of(UsageLimits, expects="a UsageLimits"))

_OPENAI_PREFIX: Final = "openai:"
_NONE_TYPE: Final = type(None)
_MODEL_KINDS: Final = (
    "a model string ('openai:<name>', 'anthropic:<name>', ...) or a list of them, a "
    "RoutedModel, an OpenAIChatModel or an async function (ModelTurn) -> ModelTurnResult"
)


def _request_options(
    owner: str, given: object, response_format: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The agent's request options, checked as the model checks its own, with the output
    type's format added."""
    options = checked_request_options(owner, given, or_none=True)
    if response_format is not None and "response_format" in options:
        raise ValueError(
            f"{owner}: request_options sets response_format, which output_type sets; leave one out"
        )
    if response_format is not None:
        options["response_format"] = response_format
    return options


def model_source(
    owner: str,
    model: object,
    response_format: Mapping[str, Any] | None,
    request_options: object = None,
    *,
    base_url: object = None,
    api_key: object = None,
    client: object = None,
    answer_format: Mapping[str, Any] | None = None,
) -> tuple[ModelSource, str, StringModel | None]:
    """How each run gets its model, a short description of it for ``repr``, and the
    client the agent owns (a model string without ``client=``), if any."""
    extra = _request_options(owner, request_options, response_format)
    endpoint = {"base_url": base_url, "api_key": api_key, "client": client}
    given = [name for name, value in endpoint.items() if value is not None]
    strings = isinstance(model, str | list | tuple)
    if given and not strings:
        why = (
            f"a {type(model).__name__} brings its own clients"
            if isinstance(model, OpenAIChatModel | RoutedModel)
            else "a function model calls no endpoint"
        )
        raise ValueError(
            f"{owner}: {'/'.join(given)} configure the client of a model string; {why}"
        )
    if strings and client is None:
        owned = StringModel(
            cast("str | list[str]", model),
            request_options=extra,
            base_url=cast("str | None", base_url),
            api_key=cast("str | None", api_key),
            owner=owner,
        )

        @asynccontextmanager
        async def string_model() -> AsyncIterator[ModelFn]:
            yield await owned.model()

        return string_model, owned.description, owned
    if strings:
        if not (isinstance(model, str) and model.startswith(_OPENAI_PREFIX)):
            raise ValueError(
                f"{owner}: client= is an AsyncOpenAI for an 'openai:<name>' model; {model!r} "
                "opens its own clients (from base_url=/api_key= or the environment)"
            )
        if base_url is not None or api_key is not None:
            raise ValueError(
                f"{owner}: pass client= or base_url=/api_key=, not both (the client "
                "already has its endpoint and key)"
            )
        name = model[len(_OPENAI_PREFIX) :]
        if not name.strip():
            raise ValueError(
                f"{owner}: a model string must be 'openai:<model-name>', got {model!r}"
            )
        try:
            adapter = OpenAIChatAdapter(cast("openai.AsyncOpenAI", client))
        except (TypeError, ValueError) as exc:
            raise type(exc)(str(exc).replace("OpenAIChatAdapter", owner, 1)) from None
        shared = RoutedModel(
            plan=RoutePlan([RouteStage(name, [Candidate("openai")])]),
            adapters={"openai": adapter},
            request_options=extra,
        )

        @asynccontextmanager
        async def shared_client_model() -> AsyncIterator[ModelFn]:
            yield shared

        return shared_client_model, model, None
    if isinstance(model, OpenAIChatModel | RoutedModel):
        chat: OpenAIChatModel | RoutedModel = model
        if response_format is not None:
            # A candidate's options win over the model's for its attempts: one
            # with its own format would silently replace the output type's.
            for provider, stage_model, _ in candidate_option_clashes(
                model.plan, frozenset({"response_format"})
            ):
                raise ValueError(
                    f"{owner}: the plan's candidate {provider!r} for {stage_model!r} sets "
                    "response_format in its options, which output_type sets; remove it there"
                )
        if extra:
            # The host's own options stay; the output type's format is added.
            chat = model.with_request_options(**extra)

        @asynccontextmanager
        async def given_model() -> AsyncIterator[ModelFn]:
            yield chat

        return given_model, repr(model), None
    if callable(model):
        if request_options is not None:
            raise ValueError(
                f"{owner}: request_options are sent by an OpenAI model ('openai:<name>' or an "
                "OpenAIChatModel); a function model builds its own requests"
            )
        if not is_async_callable(model):
            raise TypeError(f"{owner}: model must be {_MODEL_KINDS}; {model!r} is not async")
        # A model object that can answer in a format (testing.TestModel) is told
        # the output type's: a function model otherwise never sees it.
        bind = getattr(model, "with_output_format", None)
        if answer_format is not None and callable(bind):
            model = bind(answer_format)
        function = cast("ModelFn", model)

        @asynccontextmanager
        async def function_model() -> AsyncIterator[ModelFn]:
            yield function

        return function_model, getattr(model, "__name__", type(model).__name__), None
    raise TypeError(f"{owner}: model must be {_MODEL_KINDS}, got {model!r}")


def check_limits(owner: str, limits: object) -> None:
    _LIMITS.check(f"{owner}: usage_limits", limits)


def agent_settings(
    owner: str,
    *,
    model: Any,
    tools: Iterable[Any],
    instructions: Any,
    output_type: Any,
    deps_type: Any,
    name: str | None,
    max_iterations: int,
    per_tool_limit: int,
    strict: bool,
    schema_dialect: SchemaDialect | None,
    text_sink: Any,
    chain_rule: Any,
    max_output_retries: int,
    request_options: Mapping[str, Any] | None,
    store: Any,
    store_owner: str | None,
    lease_ttl: float,
    usage_limits: UsageLimits | None,
    base_url: str | None,
    api_key: str | None,
    client: openai.AsyncOpenAI | None,
    handoffs: Iterable[Any],
    input_guardrails: Iterable[Any],
    output_guardrails: Iterable[Any],
    tool_guards: Iterable[Any],
    prepare_tools: Any,
    history_processors: Sequence[Any] | None,
    compaction: Compaction | None,
) -> tuple[RunSettings, str, StringModel | None]:
    """``Agent(...)``'s keywords checked, as the settings each run is handed, the model's
    description for ``repr``, and the client the agent owns (if any)."""
    check_limits(owner, usage_limits)
    store = check_store(owner, store)
    _OPTIONAL_NAME.check(f"{owner}: store_owner", store_owner)
    lease_ttl = _LEASE_TTL.check(f"{owner}: lease_ttl", lease_ttl)
    a_bool().check(f"{owner}: strict", strict)
    if schema_dialect is None:
        schema_dialect = "openai_strict" if strict else "openai"
    else:
        _DIALECT.check(f"{owner}: schema_dialect", schema_dialect)
    if strict and schema_dialect != "openai_strict":
        raise ValueError(
            f"{owner}: strict=True asks for OpenAI strict mode, which schema_dialect "
            f"{schema_dialect!r} contradicts; leave schema_dialect out"
        )
    given_instructions: object = instructions  # checked at run time, whatever the type says
    if (
        given_instructions is not None
        and not isinstance(given_instructions, str)
        and not callable(given_instructions)
    ):
        raise TypeError(
            f"{owner}: instructions must be a str, a synchronous function of the run's "
            f"deps returning one, an async function of the run's RunContext returning "
            f"one, or None, got {instructions!r}"
        )
    _OPTIONAL_NAME.check(f"{owner}: name", name)
    if text_sink is not None and not callable(getattr(text_sink, "emit", None)):
        raise TypeError(
            f"{owner}: text_sink must be a TurnStreamSink (with emit and retractable), "
            f"got {text_sink!r}"
        )
    _CHAIN_RULE.check(f"{owner}: chain_rule", chain_rule)
    check_prepare(owner, "prepare_tools", prepare_tools)
    processors = check_processors(owner, history_processors)
    _COMPACTION.check(f"{owner}: compaction", compaction)
    _COUNT.check(f"{owner}: max_iterations", max_iterations)
    _COUNT.check(f"{owner}: per_tool_limit", per_tool_limit)
    count().check(f"{owner}: max_output_retries", max_output_retries)
    output = output_plan(owner, output_type, strict=strict)
    model = bind_output_tool(model, output)
    source, described, owned = model_source(
        owner,
        model,
        output.response_format,
        request_options,
        base_url=base_url,
        api_key=api_key,
        client=client,
        answer_format=output.full_format,
    )
    collected = collect_tools(owner, tools)
    # #32: the agents this one may hand the run to, each a transfer_to_<name> tool.
    handing = handoff_specs(owner, handoffs, name)
    dialect: SchemaDialect = schema_dialect

    def tool_dict(each: Tool) -> dict[str, Any]:
        try:
            schema = sanitize_tool_schema(each.parameters, dialect=dialect).schema
        except SchemaError as exc:
            raise SchemaError(
                f"{owner}: tool {each.name!r} cannot be expressed in the {dialect!r} dialect "
                f"at {exc.pointer or '(root)'}: {exc}",
                exc.pointer,
            ) from None
        entry = each.to_openai_tool(schema)
        if dialect == "openai_strict":
            entry["function"]["strict"] = True
        return entry

    static: dict[str, Tool] = {}
    for item in collected:
        if isinstance(item, Tool):
            if item.name in static:
                raise ValueError(
                    f"{owner}: two tools are named {item.name!r}; rename one (tool(fn, name=...))"
                )
            static[item.name] = item
    for spec in handing:
        if spec.tool.name in static:
            raise ValueError(
                f"{owner}: the handoff to {spec.target_name!r} is a tool named "
                f"{spec.tool.name!r}, as a tool of the agent is; rename one "
                "(Handoff(agent, name=...))"
            )
        static[spec.tool.name] = spec.tool
    check_output_tool_names(owner, output, list(static))
    # A tool's RunContext[X] the agent's deps cannot give: refused now, not at its call.
    check_tool_deps(owner, static.values(), deps_type)
    settings = RunSettings(
        name=name,
        model=source,
        tools=tuple(collected),
        static_tools=static,
        static_tool_dicts=tuple(tool_dict(t) for t in static.values()),
        tool_dict=tool_dict,
        instructions=instructions,
        instructions_awaited=is_async_callable(instructions),
        output=output,
        max_iterations=max_iterations,
        per_tool_limit=per_tool_limit,
        max_output_retries=max_output_retries,
        text_sink=text_sink,
        chain_rule=chain_rule,
        store=store,
        store_owner=store_owner,
        lease_ttl=float(lease_ttl),
        usage_limits=usage_limits,
        handoffs=handing,
        input_guardrails=check_input_guardrails(owner, input_guardrails),
        output_guardrails=check_output_guardrails(owner, output_guardrails),
        tool_guards=check_tool_guards(owner, tool_guards),
        dialect=dialect,
        prepare_tools=prepare_tools,
        history_processors=processors,
        compaction=compaction,
    )
    return settings, described, owned
