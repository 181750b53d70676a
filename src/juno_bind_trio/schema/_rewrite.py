"""The rewriter: one schema node at a time, into what a dialect accepts.

Reads the tables in ``_keywords.py``; records every change as a
[`SchemaChange`][juno_bind_trio.schema.SchemaChange]; refuses what the
dialect cannot express with a [`SchemaError`][juno_bind_trio.SchemaError]
naming the pointer.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from juno_bind_trio._errors import SchemaError
from juno_bind_trio._validate import shown

from ._change import SchemaChange, SchemaChangeAction, SchemaDialect
from ._check import MAX_SCHEMA_DEPTH, child, resolve, where
from ._keywords import (
    ANNOTATIONS,
    DESCRIBABLE,
    GEMINI_FORMATS,
    GEMINI_KEEP,
    MAX_ALL_OF_MERGES,
    STRICT_FORMATS,
    STRICT_KEEP,
    STRUCTURAL,
)

__all__ = ["Rewriter"]


class Rewriter:
    def __init__(self, root: Mapping[str, Any], dialect: SchemaDialect) -> None:
        self.root = root
        self.dialect: SchemaDialect = dialect
        self.strict = dialect == "openai_strict"
        self.changes: list[SchemaChange] = []
        self._noted: set[tuple[str, str, str]] = set()
        self._inlining: list[str] = []  # pointers of $ref targets being inlined, outermost first
        self._defs: dict[str, str] = {}  # strict: pointer of a referenced definition -> its name
        self._depth = 0  # schemas being rewritten, one inside the next

    def note(self, pointer: str, action: SchemaChangeAction, keyword: str, detail: str) -> None:
        if (pointer, action, keyword) not in self._noted:
            self._noted.add((pointer, action, keyword))
            self.changes.append(
                SchemaChange(pointer=pointer, action=action, keyword=keyword, detail=detail)
            )

    def fail(self, pointer: str, problem: str) -> SchemaError:
        return SchemaError(f"sanitize_tool_schema: {where(pointer)} {problem}", pointer)

    # --- the root ----------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        work = dict(self.root)
        body_pointer = ""
        if "$ref" in work:
            # pydantic writes a recursive model as {"$ref": "#/$defs/Node", "$defs": …}.
            # A provider wants the object itself at the root, so it is inlined once;
            # the definitions stay, for the references inside it.
            target, body_pointer = resolve(self.root, work.pop("$ref"), "")
            if body_pointer == "" or not isinstance(target, Mapping):
                raise self.fail("", "is a $ref to itself or to a boolean schema")
            work = {**target, **work}
            self.note("", "inlined_ref", "$ref", f"inlined the root $ref to {body_pointer!r}")
        kind = work.get("type")
        if kind is None and not {"anyOf", "oneOf", "enum", "const"} & work.keys():
            work["type"] = "object"
            self.note("", "added", "type", "added type 'object' at the root")
        elif kind != "object":
            raise self.fail(
                "",
                f"must be an object schema (type 'object'), got {shown(kind)}: a tool's "
                "arguments are always an object; put this schema in one of its properties",
            )
        if self.dialect in ("openai", "anthropic"):
            out = copy.deepcopy(work)
            if self.dialect == "anthropic" and "$schema" in out:
                del out["$schema"]
                self.note("", "removed", "$schema", "removed $schema")
            return out

        defs = {k: work.pop(k) for k in ("$defs", "definitions") if k in work}
        self._inlining.append(body_pointer)
        out = self.node(work, body_pointer)
        self._inlining.pop()
        if self.strict:
            self._strict_defs(out)
        else:
            for key in defs:
                self.note(child("", key), "removed", key, f"removed {key} (every $ref was inlined)")
        return out

    def _strict_defs(self, out: dict[str, Any]) -> None:
        done: dict[str, Any] = {}
        while len(done) < len(self._defs):
            for pointer, name in list(self._defs.items()):
                if name in done:
                    continue
                target, _ = resolve(self.root, "#" + pointer, pointer)
                self._inlining.append(pointer)
                done[name] = self.node(target, pointer)
                self._inlining.pop()
        if done:
            out["$defs"] = {name: done[name] for name in sorted(done)}
        for key in ("$defs", "definitions"):
            for name in self.root.get(key, {}):
                pointer = child("", key, name)
                if pointer not in self._defs:
                    self.note(pointer, "removed", key, f"removed unreferenced definition {name!r}")

    # --- one node ------------------------------------------------------------------

    def node(self, schema: Any, pointer: str, *, partial: bool = False) -> dict[str, Any]:
        """Rewrite one schema node; *partial* for a ``$ref``'s siblings (no shape checks)."""
        # The input was checked for depth; inlining $refs can still stack one
        # definition inside another, so the output's depth is bounded here too.
        self._depth += 1
        try:
            if self._depth > MAX_SCHEMA_DEPTH:
                raise self.fail(
                    pointer,
                    f"nests more than {MAX_SCHEMA_DEPTH} schemas deep once its $refs are "
                    f"inlined, which {self.dialect} needs; keep definitions shallower",
                )
            return self._node(schema, pointer, partial=partial)
        finally:
            self._depth -= 1

    def _node(self, schema: Any, pointer: str, *, partial: bool) -> dict[str, Any]:
        if schema is True:
            schema = {}
            self.note(pointer, "rewritten", "true", "rewrote the boolean schema true as {}")
        elif schema is False:
            raise self.fail(
                pointer, f"is false (accepts nothing), which {self.dialect} cannot express"
            )
        assert isinstance(schema, Mapping)
        if "$ref" in schema and not partial:
            return self._ref(schema, pointer)
        work = dict(schema)
        merges = 0
        while "allOf" in work:
            merges += 1
            if merges > MAX_ALL_OF_MERGES:
                raise self.fail(pointer, "has allOf nested too deep (or recursive) to merge")
            work = self._merge_all_of(work, pointer)
        if "oneOf" in work:
            if "anyOf" in work:
                raise self.fail(
                    pointer, f"has both anyOf and oneOf, which {self.dialect} cannot express"
                )
            # anyOf accepts everything oneOf does (and the overlap, which a model
            # cannot aim for anyway), so the rewrite only widens.
            work["anyOf"] = work.pop("oneOf")
            self.note(pointer, "rewritten", "oneOf", "rewrote oneOf as anyOf")
        if "const" in work and "enum" not in work:
            work["enum"] = [work.pop("const")]
            self.note(pointer, "rewritten", "const", "rewrote const as a one-value enum")

        keep = STRICT_KEEP if self.strict else GEMINI_KEEP
        out: dict[str, Any] = {}
        described: list[tuple[str, Any]] = []
        nullable = False
        for key, value in work.items():
            if key in STRUCTURAL:
                continue
            if key == "items":
                out[key] = self.node(value, child(pointer, key))
            elif key == "anyOf":
                branches = list(enumerate(value))
                if not self.strict:
                    # Gemini has no null type: anyOf [X, null] is X with nullable.
                    rest = [(i, b) for i, b in branches if not _is_null_only(b)]
                    if len(rest) < len(branches):
                        nullable = True
                        self.note(
                            pointer, "rewritten", "anyOf", "rewrote a null branch as nullable"
                        )
                    if not rest:
                        raise self.fail(pointer, "accepts only null, which gemini cannot express")
                    branches = rest
                out[key] = [self.node(b, child(pointer, key, i)) for i, b in branches]
            elif key in keep:
                out[key] = copy.deepcopy(value)
            elif key == "default" and value is None:
                # "default: null" on an Optional says what nullable (or, in strict
                # mode, made_required) already says; restated it is only noise.
                self.note(pointer, "removed", key, "removed default null")
            elif key in DESCRIBABLE:
                described.append((key, value))
            else:
                self.note(pointer, "removed", key, f"removed {key}, which {self.dialect} rejects")

        kind = work.get("type")
        if self.strict:
            if kind is not None:
                out["type"] = copy.deepcopy(kind)
        else:
            nullable = self._gemini_type(kind, out, pointer) or nullable
            nullable = self._gemini_enum(out, described, pointer) or nullable
        self._format(out, described, pointer)
        is_object = (
            kind == "object"
            or (isinstance(kind, list) and "object" in kind)
            or (kind is None and "properties" in work)
        )
        if "properties" in work or is_object:
            self._object(work, out, pointer, add_type=kind is None and not partial)
        elif "required" in work:
            out["required"] = list(work["required"])
        if not self.strict:
            if "additionalProperties" in work:
                self.note(
                    pointer, "removed", "additionalProperties", "removed additionalProperties"
                )
            if nullable:
                self._hoist_single_branch(out, pointer)
                out["nullable"] = True
        if described:
            self._describe(out, described, pointer)
        if self.strict and not partial:
            self._strict_shape(out, pointer)
        return out

    # --- $ref ------------------------------------------------------------------------

    def _ref(self, schema: Mapping[str, Any], pointer: str) -> dict[str, Any]:
        ref = schema["$ref"]
        target, target_pointer = resolve(self.root, ref, pointer)
        siblings = {k: v for k, v in schema.items() if k != "$ref"}
        definition = _definition_name(target_pointer)
        if target_pointer in self._inlining:
            if not self.strict:
                chain = " -> ".join(repr(p) for p in [*self._inlining, target_pointer])
                raise self.fail(
                    pointer,
                    f"is a recursive $ref ({chain}); gemini has no references, so a "
                    "recursive type cannot be expressed: bound its depth in the model, or "
                    "use another dialect",
                )
            # Inlining here would recurse without end; strict mode takes a bare $ref,
            # so the siblings (usually a description) are what gives way.
            for key in siblings:
                self.note(pointer, "removed", key, f"removed {key} beside a recursive $ref")
            return self._strict_ref(target_pointer, pointer)
        if self.strict and not siblings and (definition is not None or target_pointer == ""):
            return self._strict_ref(target_pointer, pointer)
        self._inlining.append(target_pointer)
        try:
            body = self.node(target, target_pointer)
        finally:
            self._inlining.pop()
        self.note(pointer, "inlined_ref", "$ref", f"inlined $ref {ref!r}")
        if siblings:
            # The siblings are the more specific statement (pydantic puts a field's
            # own description beside the $ref to its model), so they win a clash.
            body.update(self.node(siblings, pointer, partial=True))
        return body

    def _strict_ref(self, target_pointer: str, pointer: str) -> dict[str, Any]:
        if target_pointer == "":
            return {"$ref": "#"}
        name = _definition_name(target_pointer)
        if name is None:
            raise self.fail(
                pointer,
                f"is a recursive $ref to {target_pointer!r}; openai_strict can only refer to "
                "the root or to a definition in the root's $defs",
            )
        for other, taken in self._defs.items():
            if taken == name and other != target_pointer:
                raise self.fail(
                    pointer,
                    f"refers to {target_pointer!r}, but {other!r} is also named {name!r}; "
                    "openai_strict keeps one $defs",
                )
        if target_pointer.startswith("/definitions/"):
            self.note(target_pointer, "rewritten", "definitions", "moved the definition to $defs")
        self._defs[target_pointer] = name
        return {"$ref": child("#/$defs", name)}

    # --- allOf -----------------------------------------------------------------------

    def _merge_all_of(self, work: dict[str, Any], pointer: str) -> dict[str, Any]:
        # Neither dialect has allOf. Merging branches whose keywords do not clash is
        # exact for everything but the cross-branch reach of additionalProperties,
        # where the merge only widens (each branch's properties become known to the
        # others), so valid values stay valid; a real clash is refused.
        merged = {k: v for k, v in work.items() if k != "allOf"}
        for i, branch in enumerate(work["allOf"]):
            at = child(pointer, "allOf", i)
            if branch is True:
                continue
            if branch is False:
                raise self.fail(at, "is false (accepts nothing)")
            hops = 0
            while "$ref" in branch:
                hops += 1
                if hops > MAX_ALL_OF_MERGES:
                    raise self.fail(at, "is a $ref chain too long (or recursive) to merge")
                target, _ = resolve(self.root, branch["$ref"], at)
                if not isinstance(target, Mapping):
                    raise self.fail(at, "refers to a boolean schema inside allOf")
                branch = {**target, **{k: v for k, v in branch.items() if k != "$ref"}}
            for key, value in branch.items():
                if key not in merged or merged[key] == value or key in ANNOTATIONS:
                    merged.setdefault(key, value)
                elif key == "properties":
                    props = dict(merged[key])
                    for name, sub in value.items():
                        if name in props and props[name] != sub:
                            raise self.fail(
                                child(at, "properties", name),
                                "is defined differently by two allOf branches; "
                                f"{self.dialect} has no allOf to hold both",
                            )
                        props[name] = sub
                    merged[key] = props
                elif key == "required":
                    merged[key] = list(dict.fromkeys([*merged[key], *value]))
                else:
                    raise self.fail(
                        at,
                        f"disagrees with another allOf branch on {key!r}; {self.dialect} has no "
                        "allOf, and merging them would change what the schema accepts",
                    )
        self.note(pointer, "rewritten", "allOf", "merged allOf into one schema")
        return merged

    # --- objects, types, enums, formats ------------------------------------------------

    def _object(
        self, work: Mapping[str, Any], out: dict[str, Any], pointer: str, *, add_type: bool
    ) -> None:
        props = {
            name: self.node(sub, child(pointer, "properties", name))
            for name, sub in work.get("properties", {}).items()
        }
        if add_type:
            out["type"] = "object"
            self.note(pointer, "added", "type", "added type 'object'")
        if not self.strict:
            if "properties" in work:
                out["properties"] = props
            if "required" in work:
                out["required"] = list(work["required"])
            return
        extra = work.get("additionalProperties", False)
        if extra is not False or "patternProperties" in work:
            raise self.fail(
                pointer,
                "accepts keys beyond its properties (additionalProperties or patternProperties); "
                "openai_strict can only express objects with fixed properties — give it "
                "properties, or send this tool with dialect='openai' (not strict)",
            )
        required = set(work.get("required", ()))
        for name, sub in props.items():
            if name in required:
                continue
            props[name], widened = _nullable(sub)
            what = "made nullable and required" if widened else "made required (accepts null)"
            self.note(
                child(pointer, "properties", name),
                "made_required",
                "required",
                f"optional property {name!r} {what}: null means absent",
            )
        if "properties" not in work:
            self.note(pointer, "added", "properties", "added empty properties")
        out["properties"] = props
        out["required"] = list(props)
        if "additionalProperties" not in work:
            self.note(pointer, "added", "additionalProperties", "added additionalProperties false")
        out["additionalProperties"] = False

    def _gemini_type(self, kind: Any, out: dict[str, Any], pointer: str) -> bool:
        if kind is None:
            return False
        kinds = kind if isinstance(kind, list) else [kind]
        real = [k for k in kinds if k != "null"]
        if not real:
            raise self.fail(pointer, "accepts only null, which gemini cannot express")
        if len(real) == 1:
            out["type"] = real[0]
        elif "anyOf" in out:
            raise self.fail(pointer, "has both a type list and anyOf, which gemini cannot express")
        else:
            out["anyOf"] = [{"type": k} for k in real]
        if isinstance(kind, list):
            self.note(pointer, "rewritten", "type", "rewrote the type list as one type")
        return len(real) < len(kinds)

    def _gemini_enum(
        self, out: dict[str, Any], described: list[tuple[str, Any]], pointer: str
    ) -> bool:
        if "enum" not in out:
            return False
        values = out["enum"]
        strings = [v for v in values if v is not None]
        if (
            all(isinstance(v, str) for v in strings)
            and strings
            and out.get("type", "string") == "string"
        ):
            if len(strings) < len(values):
                out["enum"] = strings
                self.note(pointer, "rewritten", "enum", "rewrote null in the enum as nullable")
            if "type" not in out:
                out["type"] = "string"
                self.note(pointer, "added", "type", "added type 'string' for the enum")
            return len(strings) < len(values)
        described.append(("enum", out.pop("enum")))
        return False

    def _format(self, out: dict[str, Any], described: list[tuple[str, Any]], pointer: str) -> None:
        if "format" not in out:
            return
        kind = out.get("type")
        if self.strict:
            allowed = STRICT_FORMATS
        else:
            allowed = (
                GEMINI_FORMATS.get(kind, frozenset()) if isinstance(kind, str) else frozenset()
            )
        if out["format"] not in allowed:
            described.append(("format", out.pop("format")))

    def _describe(
        self, out: dict[str, Any], described: list[tuple[str, Any]], pointer: str
    ) -> None:
        text = "; ".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in described)
        base = out.get("description")
        out["description"] = f"{base} ({text})" if base else text
        for key, _ in described:
            self.note(
                pointer,
                "moved_to_description",
                key,
                f"moved {key} into the description ({self.dialect} cannot enforce it)",
            )

    def _hoist_single_branch(self, out: dict[str, Any], pointer: str) -> None:
        branches = out.get("anyOf")
        if not branches or len(branches) != 1:
            return
        (only,) = branches
        if any(k in out and out[k] != v for k, v in only.items() if k != "description"):
            return
        del out["anyOf"]
        for key, value in only.items():
            if key != "description" or "description" not in out:
                out[key] = value
        self.note(pointer, "rewritten", "anyOf", "rewrote a one-branch anyOf as that branch")

    def _strict_shape(self, out: dict[str, Any], pointer: str) -> None:
        if not {"type", "$ref", "anyOf", "enum"} & out.keys():
            raise self.fail(
                pointer,
                "accepts any value (it has no type); openai_strict needs a type on every "
                "schema — give it one, or use dialect='openai' (not strict)",
            )
        kind = out.get("type")
        if (kind == "array" or (isinstance(kind, list) and "array" in kind)) and "items" not in out:
            raise self.fail(
                pointer,
                "is an array without items (or a tuple); openai_strict needs the item schema",
            )


def _definition_name(pointer: str) -> str | None:
    parts = pointer.split("/")
    if len(parts) == 3 and parts[1] in ("$defs", "definitions"):
        return parts[2].replace("~1", "/").replace("~0", "~")
    return None


def _is_null_only(schema: Any) -> bool:
    return isinstance(schema, Mapping) and (
        schema.get("type") == "null"
        or schema.get("enum") == [None]
        or schema.get("const", 0) is None
    )


def _accepts_null(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if "enum" in schema:
        return None in schema["enum"]
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(_accepts_null(b) for b in schema.get("anyOf", ()))


def _nullable(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """*schema* widened to accept null too, and whether it had to be widened."""
    if _accepts_null(schema):
        return schema, False
    kind = schema.get("type")
    if kind is not None and "$ref" not in schema and "anyOf" not in schema:
        widened = dict(schema)
        widened["type"] = [*kind, "null"] if isinstance(kind, list) else [kind, "null"]
        if "enum" in widened:
            widened["enum"] = [*widened["enum"], None]
        return widened, True
    if "anyOf" in schema and "$ref" not in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}, True
    inner = dict(schema)
    outer: dict[str, Any] = {}
    if "description" in inner:
        outer["description"] = inner.pop("description")
    outer["anyOf"] = [inner, {"type": "null"}]
    return outer, True
