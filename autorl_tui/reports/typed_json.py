"""Typed JSON documents: a report's sections as frozen dataclasses, and its JSON schema generated
from them (reports/schema_files.py writes reports/schemas/*.schema.json with it).

A section is a `@section` class; each field is a key of its JSON object, its annotation the value's
type: str, int, float, bool, None (as `X | None`), list[X], dict[str, X], Literal[...] (an enum),
Any (anything), or another section (a nested object). A field without a default is a required key;
`optional()` marks a key a document may leave out (left out of `to_dict()` when it was not given).
`key()`/`optional()` carry the key's description and any further schema words (enum, minimum, ...);
`schema=` replaces the generated schema where the type says less than the document (a const).
A section is closed (no other keys) unless it says `OPEN = True`: an open section read by
`from_dict` keeps the keys it does not name, and `to_dict` gives them back after its own."""

from __future__ import annotations

import functools
import json
import types
from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin, get_type_hints


class _Absent:
    """The value of an optional key the document does not have."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
_MORE = "_more"      # an open section's keys it does not name, as read

_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean"}
T = TypeVar("T")


def section(cls: type[T]) -> type[T]:
    """A report section: a frozen, keyword-only dataclass."""
    return dataclass(frozen=True, kw_only=True)(cls)


def key(description: str | None = None, *, schema: dict[str, Any] | None = None, **words: Any) -> Any:
    """A required key with its description and further schema words."""
    return field(metadata={"description": description, "schema": schema, "words": words})


def optional(description: str | None = None, *, schema: dict[str, Any] | None = None, **words: Any) -> Any:
    """A key a document may leave out."""
    return field(default=ABSENT, metadata={"description": description, "schema": schema, "words": words})


class Document:
    """What a top-level report class declares besides its sections (mixed into it)."""

    HEAD: ClassVar[dict[str, Any]] = {}      # $schema, $id, title, description
    DEFS: ClassVar[dict[str, tuple[type, str]]] = {}   # $defs name -> (a nullable section, its description)
    OPEN: ClassVar[bool] = False


# ---------------------------------------------------------------------------- schema
@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def schema_of(tp: Any, refs: dict[type, str]) -> dict[str, Any]:
    """The JSON schema of a value of type `tp` (a def's section, nullable, as its $ref)."""
    if _is_union(tp):
        members = [a for a in get_args(tp) if a is not type(None)]
        nullable = len(members) < len(get_args(tp))
        if len(members) == 1 and members[0] in refs:
            return {"$ref": f"#/$defs/{refs[members[0]]}"}
        parts = [schema_of(a, refs) for a in members]
        if len(parts) == 1 and "type" in parts[0]:
            out = dict(parts[0])
            out["type"] = [out["type"], "null"] if nullable else out["type"]
            return out
        if len(parts) == 1:       # an enum or anything: null joins the enum
            return {**parts[0], "enum": [*parts[0]["enum"], None]} if "enum" in parts[0] else parts[0]
        names = [p["type"] for p in parts]
        return {"type": [names[0], *(["null"] if nullable else []), *names[1:]]}
    if tp is Any:
        return {}
    if tp in _NAMES:
        return {"type": _NAMES[tp]}
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return {"enum": list(args)}
    if origin is list or tp is list:
        return {"type": "array", **({"items": schema_of(args[0], refs)} if args and args[0] is not Any else {})}
    if origin is dict or tp is dict:
        value = args[1] if args else Any
        return {"type": "object", **({"additionalProperties": schema_of(value, refs)} if value is not Any else {})}
    if isinstance(tp, type) and is_dataclass(tp):
        return object_schema(tp, refs)
    raise TypeError(f"no JSON schema for {tp!r}")


def object_schema(cls: type, refs: dict[type, str]) -> dict[str, Any]:
    hints, props, required = _hints(cls), {}, []
    for f in fields(cls):
        meta = f.metadata
        prop = dict(meta["schema"]) if meta.get("schema") is not None else schema_of(hints[f.name], refs)
        prop.update(meta.get("words") or {})
        if meta.get("description"):
            prop["description"] = meta["description"]
        props[f.name] = prop
        if f.default is MISSING and f.default_factory is MISSING:
            required.append(f.name)
    out: dict[str, Any] = {"type": "object", "properties": props, "required": required}
    if not getattr(cls, "OPEN", False):
        out["additionalProperties"] = False
    return out


def document_schema(cls: type[Document]) -> dict[str, Any]:
    """A whole document's schema: its HEAD, its sections, its $defs."""
    refs = {section_cls: name for name, (section_cls, _) in cls.DEFS.items()}
    out = {**cls.HEAD, **object_schema(cls, refs)}
    if cls.DEFS:
        out["$defs"] = {name: {"description": about, **schema_of(section_cls | None, {})}
                        for name, (section_cls, about) in cls.DEFS.items()}
    return out


def schema_text(cls: type[Document]) -> str:
    """The schema as the committed file holds it."""
    return json.dumps(document_schema(cls), indent=1, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------- values
def from_dict(cls: type[T], data: Any) -> T:
    """The section `cls` of a decoded JSON object; a missing key, or one a closed section does not
    name, is a ValueError."""
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    plan = _reading_plan(cls)
    unknown = [k for k in data if k not in plan]
    if unknown and not getattr(cls, "OPEN", False):
        raise ValueError(f"{cls.__name__}: unknown key(s) {', '.join(sorted(unknown))}")
    try:
        value = cls(**{k: (v if plan[k] is None else _typed(plan[k], v)) for k, v in data.items() if k in plan})
    except TypeError as exc:
        raise ValueError(f"{cls.__name__}: {exc}") from None
    if unknown:
        object.__setattr__(value, _MORE, {k: data[k] for k in unknown})
    return value


_PLANS: dict[type, dict[str, Any]] = {}


def _reading_plan(cls: type) -> dict[str, Any]:
    """Each field's type where its value holds sections (read by `_typed`), else None (taken as it
    is); worked out once per section."""
    plan = _PLANS.get(cls)
    if plan is None:
        hints = _hints(cls)
        plan = _PLANS[cls] = {f.name: (hints[f.name] if _holds_sections(hints[f.name]) else None)
                              for f in fields(cls)}
    return plan


def _holds_sections(tp: Any) -> bool:
    return (isinstance(tp, type) and is_dataclass(tp)) or any(_holds_sections(a) for a in get_args(tp))


def _typed(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    if _is_union(tp):
        sections = [a for a in get_args(tp) if isinstance(a, type) and is_dataclass(a)]
        return from_dict(sections[0], value) if sections else value
    origin, args = get_origin(tp), get_args(tp)
    if isinstance(tp, type) and is_dataclass(tp):
        return from_dict(tp, value)
    if origin is list and args and is_dataclass(args[0]) and isinstance(value, list):
        return [_typed(args[0], v) for v in value]
    if origin is dict and len(args) == 2 and is_dataclass(args[1]) and isinstance(value, dict):
        return {k: _typed(args[1], v) for k, v in value.items()}
    return value


def to_dict(value: Any) -> Any:
    """The JSON value of a section (its absent optional keys left out), recursively."""
    if is_dataclass(value) and not isinstance(value, type):
        own = {f.name: to_dict(getattr(value, f.name)) for f in fields(value)
               if getattr(value, f.name) is not ABSENT}
        return {**own, **to_dict(getattr(value, _MORE, {}))}
    if isinstance(value, list | tuple):
        return [to_dict(v) for v in value]
    if isinstance(value, dict):
        return {k: to_dict(v) for k, v in value.items()}
    return value


def checked(cls: type[T], data: dict[str, Any]) -> dict[str, Any]:
    """A document built as its typed sections (a key missing, misnamed or unknown to a closed section
    is a ValueError), as JSON again."""
    return to_dict(from_dict(cls, data))


