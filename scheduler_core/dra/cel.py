"""CEL selectors evaluated with cel-python (celpy), the device given as upstream's DRA CEL environment gives it:
`device.driver`, `device.attributes["<domain>"].<id>` and `device.capacity["<domain>"].<id>` (an unknown domain
is an empty map, a missing id a runtime error), with the Kubernetes CEL library's `quantity` and `semver`
functions the selectors use (k8s.io/apiserver/pkg/cel/library). celpy is imported on first use, so the engine
runs without it as long as nothing selects a device. Not there: type checking at compile time (a type error
is a runtime error here) and `cel.bind`."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..errors import EngineError
from ..model.quantity import parse_quantity
from .model import AttributeValue, Device, Version

if TYPE_CHECKING:
    import celpy


class SelectorError(EngineError):
    """A CEL selector that does not compile, or fails or gives no bool on a device."""


@functools.total_ordering
class Quantity:
    """A Kubernetes quantity in CEL (`quantity("1Gi")`, a device's capacity)."""

    __slots__ = ("value",)

    def __init__(self, value: Decimal) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: Quantity) -> bool:
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)


@functools.total_ordering
class Semver:
    """A semantic version in CEL (`semver("1.2.3")`, a version attribute): compared by major, minor, patch,
    then pre-release (a version without one is greater; identifiers compared as semver 2.0.0 says)."""

    __slots__ = ("key", "text")

    def __init__(self, text: str) -> None:
        core, _, pre = text.split("+", 1)[0].partition("-")
        parts = core.split(".")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"{text!r} is not a semantic version")
        ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
        self.text = text
        self.key = (tuple(int(p) for p in parts), not pre, ids)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.key == other.key

    def __lt__(self, other: Semver) -> bool:
        return self.key < other.key

    def __hash__(self) -> int:
        return hash(self.key)


def _quantity(text: object) -> Quantity:
    return Quantity(parse_quantity(str(text), "quantity"))


def _is_quantity(text: object) -> bool:
    try:
        _quantity(text)
    except EngineError:
        return False
    return True


def _is_semver(text: object) -> bool:
    try:
        Semver(str(text))
    except ValueError:
        return False
    return True


def _functions() -> dict[str, Callable[..., Any]]:
    from celpy import celtypes as ct

    def compare(a: Quantity | Semver, b: Quantity | Semver) -> Any:
        if type(a) is not type(b):
            raise TypeError(f"compareTo: {type(a).__name__} with {type(b).__name__}")
        return ct.IntType((a > b) - (a < b))  # type: ignore[operator]  # same type, checked above

    def number(q: Quantity, what: str) -> Quantity:
        if not isinstance(q, Quantity):
            raise TypeError(f"{what}: not a quantity")
        return q

    return {
        "quantity": _quantity,
        "isQuantity": lambda s: ct.BoolType(_is_quantity(s)),
        "semver": lambda s: Semver(str(s)),
        "isSemver": lambda s: ct.BoolType(_is_semver(s)),
        "compareTo": compare,
        "isGreaterThan": lambda a, b: ct.BoolType(compare(a, b) > 0),
        "isLessThan": lambda a, b: ct.BoolType(compare(a, b) < 0),
        "add": lambda a, b: Quantity(number(a, "add").value + (b.value if isinstance(b, Quantity) else Decimal(b))),
        "sub": lambda a, b: Quantity(number(a, "sub").value - (b.value if isinstance(b, Quantity) else Decimal(b))),
        "isInteger": lambda q: ct.BoolType(number(q, "isInteger").value == int(q.value)),
        "asInteger": lambda q: ct.IntType(int(number(q, "asInteger").value)),
        "sign": lambda q: ct.IntType((q.value > 0) - (q.value < 0)),
        "includes": lambda a, b: ct.BoolType(b in a if isinstance(a, ct.ListType) else a == b),
        "major": lambda v: ct.IntType(v.key[0][0]),
        "minor": lambda v: ct.IntType(v.key[0][1]),
        "patch": lambda v: ct.IntType(v.key[0][2]),
    }


@functools.cache
def _environment() -> tuple[celpy.Environment, dict[str, Callable[..., Any]]]:
    import celpy

    return celpy.Environment(), _functions()


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> celpy.Runner:
    """The expression compiled once (selectors repeat across requests and classes); SelectorError when it
    does not parse."""
    from celpy.celparser import CELParseError

    env, functions = _environment()
    try:
        return env.program(env.compile(expression), functions=functions)
    except CELParseError as exc:
        raise SelectorError(f"compilation failed: {exc}") from None


@functools.cache
def _domain_map() -> type[Any]:
    """celpy's map type whose unknown keys (domains) are empty maps, as upstream's environment has it."""
    from celpy import celtypes as ct

    class DomainMap(ct.MapType):
        def __missing__(self, key: object) -> Any:
            return ct.MapType({})

    return DomainMap


def _value(value: AttributeValue) -> Any:
    from celpy import celtypes as ct

    if isinstance(value, tuple):
        return ct.ListType([_value(v) for v in value])
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, int):
        return ct.IntType(value)
    if isinstance(value, Version):
        return Semver(value)
    return ct.StringType(value)


def _by_domain(values: Mapping[str, Any]) -> Any:
    from celpy import celtypes as ct

    domains: dict[str, dict[Any, Any]] = {}
    for name, value in values.items():
        domain, _, ident = name.rpartition("/")
        domains.setdefault(domain, {})[ct.StringType(ident)] = value
    return _domain_map()({ct.StringType(d): ct.MapType(v) for d, v in domains.items()})


def activation(device: Device) -> dict[str, Any]:
    """The `device` variable of a selector for this device."""
    from celpy import celtypes as ct

    return {"device": ct.MapType({
        ct.StringType("driver"): ct.StringType(device.driver),
        ct.StringType("attributes"): _by_domain({k: _value(v) for k, v in device.attributes.items()}),
        ct.StringType("capacity"): _by_domain({k if "/" in k else f"{device.driver}/{k}": Quantity(Decimal(v))
                                               for k, v in device.capacity.items()}),
    })}


def matches(expression: str, variables: dict[str, Any]) -> bool:
    """The selector's verdict on a device's `activation`; SelectorError for a runtime error or a result that
    is not a bool (upstream's "CEL runtime error")."""
    from celpy import celtypes as ct
    from celpy.evaluation import CELEvalError

    program = compile_selector(expression)
    try:
        result = program.evaluate(variables)
    except (CELEvalError, TypeError, ValueError, EngineError) as exc:
        raise SelectorError(f"CEL runtime error: {exc.args[0] if exc.args else exc}") from None
    if not isinstance(result, ct.BoolType):
        raise SelectorError(f"CEL result of type {type(result).__name__} could not be converted to bool")
    return bool(result)
