"""Docstrings: whatever the names and words, each style reads back what was written."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from juno_bind_trio.agent._docstrings import parse_docstring

names = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True).filter(
    lambda n: n not in {"args", "returns", "raises", "parameters", "param"}
)
words = st.lists(
    st.from_regex(r"[A-Za-z][A-Za-z0-9,.'()-]{0,9}", fullmatch=True), min_size=1, max_size=12
)
parameters = st.dictionaries(names, words, min_size=1, max_size=5)
summaries = st.lists(st.from_regex(r"[A-Z][a-z]{1,9}", fullmatch=True), min_size=1, max_size=6)


def wrap(words: list[str], width: int = 4) -> list[str]:
    """Split a description over lines, as people do in docstrings."""
    return [" ".join(words[i : i + width]) for i in range(0, len(words), width)]


def google(summary: str, params: dict[str, list[str]]) -> str:
    lines = [summary, "", "Args:"]
    for name, text in params.items():
        first, *rest = wrap(text)
        lines.append(f"    {name} (int): {first}")
        lines.extend(f"        {line}" for line in rest)
    lines += ["", "Returns:", "    Something."]
    return "\n".join(lines)


def numpy(summary: str, params: dict[str, list[str]]) -> str:
    lines = [summary, "", "Parameters", "----------"]
    for name, text in params.items():
        lines.append(f"{name} : int")
        lines.extend(f"    {line}" for line in wrap(text))
    lines += ["", "Returns", "-------", "int", "    Something."]
    return "\n".join(lines)


def sphinx(summary: str, params: dict[str, list[str]]) -> str:
    lines = [summary, ""]
    for name, text in params.items():
        first, *rest = wrap(text)
        lines.append(f":param {name}: {first}")
        lines.extend(f"    {line}" for line in rest)
    lines.append(":returns: Something.")
    return "\n".join(lines)


@given(summary=summaries, params=parameters, style=st.sampled_from([google, numpy, sphinx]))
def test_every_style_reads_back_the_summary_and_each_description(
    summary: list[str], params: dict[str, list[str]], style: object
) -> None:
    text = " ".join(summary) + "."
    doc = style(text, params)  # type: ignore[operator]
    parsed = parse_docstring(doc)
    assert parsed.description == text
    assert parsed.parameters == {name: " ".join(value) for name, value in params.items()}


@given(st.text(max_size=300))
def test_any_text_parses_without_raising(doc: str) -> None:
    parsed = parse_docstring(doc)
    assert parsed.description is None or parsed.description.strip() == parsed.description
