"""Turning pydantic's validation errors into :class:`~engine.errors.PlanIssue` values a plan author reads.

Pydantic says ``Field required`` at ``('projections', 0, 'expr')``; the author reads
``$.query[3].projections[0].expr (operator 4): missing required field 'expr'``.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import AliasChoices, BaseModel, ValidationError
from pydantic_core import ErrorDetails

from engine.errors import PlanIssue
from engine.plan.paths import Location

_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "float_type": "a number",
    "float_parsing": "a number",
}


def issues_from_validation(
    error: ValidationError, model: type[BaseModel], location: Location, op_id: str | None
) -> list[PlanIssue]:
    """One issue per pydantic error, at the JSON path of the offending key in the source document."""
    return [_issue(detail, model, location, op_id) for detail in error.errors(include_url=False)]


def suggest(word: str, choices: typing.Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or nothing when none is close."""
    import difflib  # only for a misspelling: a valid plan never needs it

    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""


def describe_json(value: Any) -> str:
    """A short description of a JSON value for messages: ``a list``, ``the string 'x'``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _issue(
    detail: ErrorDetails, model: type[BaseModel], location: Location, op_id: str | None
) -> PlanIssue:
    loc = [part for part in detail["loc"] if isinstance(part, int | str)]
    path = location.of(str(loc[0]), *loc[1:]) if loc else location.path
    field = _label(loc)
    kind = detail["type"]
    value = detail.get("input")
    ctx = detail.get("ctx") or {}
    if kind == "missing":
        message = f"missing required field '{field}'"
    elif kind == "extra_forbidden":
        message = _unknown_field(str(field), _model_at(model, loc[:-1]))
    elif kind in _TYPE_NAMES:
        message = f"'{field}' must be {_TYPE_NAMES[kind]}, not {describe_json(value)}"
    elif kind == "literal_error":
        message = f"'{field}' must be one of {ctx.get('expected')}, not {describe_json(value)}"
    elif kind == "too_short":
        message = (
            f"'{field}' must not be empty" if ctx.get("min_length") == 1 else _plain(detail, field)
        )
        if isinstance(value, str):
            message = f"'{field}' must not be an empty string"
    elif kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        relation = ">=" if kind == "greater_than_equal" else ">"
        message = f"'{field}' must be {relation} {bound}, not {describe_json(value)}"
    elif kind == "value_error":
        message = str(ctx.get("error", detail["msg"]))
    else:
        message = _plain(detail, field)
    return PlanIssue(message, path, op_id)


def _label(loc: list[int | str]) -> str | None:
    """The key an error is about, with the list indexes below it: ``ref`` or ``content[0]``."""
    for i in range(len(loc) - 1, -1, -1):
        if isinstance(loc[i], str):
            return str(loc[i]) + "".join(f"[{index}]" for index in loc[i + 1 :])
    return None


def _plain(detail: ErrorDetails, field: str | None) -> str:
    text = detail["msg"]
    return f"'{field}': {text[0].lower()}{text[1:]}" if field else text


def _unknown_field(key: str, model: type[BaseModel] | None) -> str:
    if model is None:
        return f"unknown field '{key}'"
    aliases = _accepted_keys(model)
    if key in aliases:
        canonical = aliases[key]
        return (
            f"'{key}' is another spelling of '{canonical}', which is also given: keep one of them"
        )
    accepted = sorted(set(aliases.values()))
    return (
        f"unknown field '{key}'{suggest(key, aliases)}; {model.__name__.lower()} takes "
        + ", ".join(f"'{k}'" for k in accepted)
    )


def _accepted_keys(model: type[BaseModel]) -> dict[str, str]:
    """Every key the model reads, mapped to the name the seed uses for it."""
    keys: dict[str, str] = {}
    for name, info in model.model_fields.items():
        canonical = info.serialization_alias or name
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias or name]
        for choice in choices:
            if isinstance(choice, str):
                keys[choice] = canonical
        keys.setdefault(canonical, canonical)
    return keys


def _model_at(model: type[BaseModel], loc: list[int | str]) -> type[BaseModel] | None:
    """The model class that validated the object at ``loc`` below ``model``."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = _field_by_key(current, part)
        if field is None:
            return None
        current = _inner_model(current.model_fields[field].annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _field_by_key(model: type[BaseModel], key: str) -> str | None:
    for name, info in model.model_fields.items():
        alias = info.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias or name]
        if key == name or key in choices:
            return name
    return None


def _inner_model(annotation: Any) -> Any:
    """``list[Ordering] | None`` -> ``Ordering``: the model inside containers and optionals."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _inner_model(typing.get_args(annotation)[0])
    if origin in (list, tuple, typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            inner = _inner_model(arg)
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
        return None
    return annotation
