"""Actions and toolsets: what an action is (name, role, tracks, JSON schema, handler) and how a toolset declares
them beside their handlers. Engines (viewer, evidence, operators, pathology) declare their toolsets with these;
the registry (:mod:`.registry`) runs them.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any, Protocol

from .hygiene import preview
from .policy import SessionPolicy
from .result import Result

ROLES = ("session", "viewer", "evidence", "operator")


def _full_match_pattern(validator, pattern: str, instance: Any, schema: dict):
    """``pattern`` with full-match semantics: Python's ``$`` also matches before a final newline, so a schema's
    ``^[a-z]+$`` would otherwise let ``"x\\n"`` through."""
    import jsonschema

    if validator.is_type(instance, "string") and re.fullmatch(pattern, instance) is None:
        yield jsonschema.ValidationError(f"{preview(instance)} does not match {pattern!r}")


@lru_cache(maxsize=1)
def full_match_validator() -> type:
    """The registry's schema validator: Draft 2020-12 with whole-string patterns. Made on first use, so a front-end
    that only lists actions (the MCP server answering ``tools/list`` while its viewer boots) never imports
    jsonschema."""
    import jsonschema

    return jsonschema.validators.extend(jsonschema.Draft202012Validator, {"pattern": _full_match_pattern})


class ActionContext(Protocol):
    """What a registry needs from the application it drives (a Slicer scene, a WSI viewer, ...)."""

    policy: SessionPolicy

    def state(self) -> dict: ...

    def checkpoint(self) -> Any: ...

    def rollback(self, token: Any) -> None: ...


@dataclass(frozen=True)
class ActionSpec:
    """What a client sees of an action: its name, role, JSON schema (type object), tracks, whether it is one of
    the tools the paper's agents see (MedFlow-Bench Table 9 for radiology, Table 10 for pathology) and whether a
    call of it inspects the image (the benchmark's "inspect" workflow stage): the one place each of those lists is
    written (``bench run --toolset paper`` offers the paper's, plus the Track B operators).

    Split from :class:`Action` so a front-end whose actions run in another process (the crash-contained
    viewer of :mod:`.server.supervisor`) describes them exactly as the in-process registry does.
    """

    name: str
    role: str
    description: str
    parameters: dict
    tracks: tuple[str, ...] = ("A", "B")
    paper: bool = False
    inspects: bool = False

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"{self.name}: role must be one of {ROLES}")

    @classmethod
    def from_description(cls, description: dict) -> ActionSpec:
        """The inverse of :meth:`describe`."""
        return cls(description["name"], description["role"], description["description"],
                   description["parameters"], tuple(description["tracks"]), bool(description["paper"]),
                   bool(description["inspects"]))

    def describe(self) -> dict:
        return {
            "name": self.name,
            "role": self.role,
            "tracks": list(self.tracks),
            "paper": self.paper,
            "inspects": self.inspects,
            "description": self.description,
            "parameters": self.parameters,
        }


@dataclass(frozen=True)
class Action(ActionSpec):
    """A named, schema-described operation and the handler that runs it.

    ``rules`` are the root ``anyOf``/``oneOf`` argument combinations: checked by the registry like the schema,
    but kept out of the published ``parameters`` (OpenAI and Anthropic refuse combinators at the root of a tool
    schema, strict JSON-schema clients flag their untyped branches) and stated in the description instead.
    """

    # keywords in practice (``handler=``, ``rules=``); defaults only because ActionSpec's ``tracks``, ``paper`` and
    # ``inspects`` have one, and dataclass ``kw_only`` does not exist in Slicer's Python 3.9
    handler: Callable[..., Result] | None = None
    rules: dict = field(default_factory=dict)

    def __post_init__(self):
        """A declared schema is checked once, where it is declared; a description (:class:`ActionSpec`) is the
        listing of actions already checked (the catalog, a supervised child's), so listing one costs nothing."""
        super().__post_init__()
        if not callable(self.handler):
            raise TypeError(f"{self.name}: an action needs a handler")
        full_match_validator().check_schema({**self.parameters, **self.rules})

    @cached_property
    def defaults(self) -> dict:
        """The schema's defaults of the top-level arguments: the one place a default is written (the registry
        passes them to the handler, whose signature repeats none)."""
        return {name: schema["default"] for name, schema in self.parameters.get("properties", {}).items()
                if "default" in schema}

    def with_defaults(self, arguments: dict) -> dict:
        """``arguments`` completed with the defaults of the arguments not given (each a fresh copy)."""
        return {**{name: copy.deepcopy(value) for name, value in self.defaults.items() if name not in arguments},
                **arguments}

    @cached_property
    def validator(self) -> Any:
        """Built once: constructing a validator per call costs more than validating."""
        return full_match_validator()({**self.parameters, **self.rules})


ROOT_RULES = {"anyOf": "Give {}.", "oneOf": "Give exactly one of: {}."}


def describe_rules(rules: dict) -> str:
    """The argument combinations of ``rules`` in words, e.g. "Give volume_id or volume_name."."""
    sentences = []
    for keyword, alternatives in rules.items():
        options = []
        for alternative in alternatives:
            constants = {name: value.get("const") for name, value in alternative.get("properties", {}).items()
                         if "const" in value}
            names = [name + (f"={json.dumps(constants[name])}" if name in constants else "")
                     for name in alternative.get("required", [])]
            options.append(" and ".join(names))
        joined = "; ".join(options) if keyword == "oneOf" else ", ".join(options[:-1]) + " or " + options[-1]
        sentences.append(ROOT_RULES[keyword].format(joined if len(options) > 1 else options[0]))
    return " ".join(sentences)


def object_schema(properties: dict, required: Iterable[str] = (), **extra: Any) -> dict:
    """A closed JSON object schema: unknown argument names are rejected, as a model's typos must be."""
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    required = list(required)
    if required:
        schema["required"] = required
    schema.update(extra)
    return schema


@dataclass
class Toolset:
    """A group of actions declared next to their handlers with the :meth:`action` decorator."""

    name: str
    actions: list[Action] = field(default_factory=list)
    # called with the context when a registry is built, e.g. to add state sections the toolset maintains
    attach: Callable[[ActionContext], None] | None = None

    def action(
        self,
        name: str,
        role: str,
        description: str,
        properties: dict | None = None,
        required: Iterable[str] = (),
        tracks: tuple[str, ...] = ("A", "B"),
        paper: bool = False,
        inspects: bool = False,
        **schema_extra: Any,
    ) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
        rules = {keyword: schema_extra.pop(keyword) for keyword in ROOT_RULES if keyword in schema_extra}
        if rules:
            description = f"{description} {describe_rules(rules)}"

        def register(handler: Callable[..., Result]) -> Callable[..., Result]:
            parameters = object_schema(properties or {}, required, **schema_extra)
            self.actions.append(Action(name, role, description, parameters, tracks, paper, inspects,
                                       handler=handler, rules=rules))
            return handler

        return register
