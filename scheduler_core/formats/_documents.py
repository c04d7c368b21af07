"""Parsed JSON and YAML documents: hardened YAML loading (alias bombs refused, rapidyaml first) and checked
access to what they hold, so a wrong type is a FormatError naming where it was, not an AttributeError later."""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import EngineError, FormatError
from . import _fast_yaml

if TYPE_CHECKING:
    import yaml

#: YAML documents whose node graph would expand beyond this many nodes are refused (alias bombs).
MAX_YAML_NODES = 200_000

#: A mapping as the JSON and YAML readers build it: nothing about its values is known until checked. JSON's keys
#: are strings; YAML's nearly always are (a plain `0:` is an int), so code that needs a key's text converts it.
JSONObject = dict[str, object]


def as_object(value: object, where: str) -> JSONObject:
    """`value` as a mapping: absent or empty (None, "", [], 0) is {}, as `value or {}` reads it; anything else
    that is not a mapping is a FormatError naming `where`, not an AttributeError later."""
    if isinstance(value, dict):
        return value
    if not value:
        return {}
    raise FormatError(f"{where} must be an object, not {type(value).__name__}")


def as_list(value: object, where: str) -> list[object]:
    """`value` as a list: absent or empty is [] (as `value or []`), anything else not a list a FormatError."""
    if isinstance(value, list):
        return value
    if not value:
        return []
    raise FormatError(f"{where} must be a list, not {type(value).__name__}")


def get_object(obj: JSONObject, key: str, where: str) -> JSONObject:
    """`obj[key]` as a mapping ({} when absent or empty), the error naming `where.key`."""
    return as_object(obj.get(key), f"{where}.{key}")


def get_list(obj: JSONObject, key: str, where: str) -> list[object]:
    """`obj[key]` as a list ([] when absent or empty), the error naming `where.key`."""
    return as_list(obj.get(key), f"{where}.{key}")


def too_many_digits(exc: ValueError, what: str) -> FormatError | None:
    """Python's refusal to read an integer of more digits than `sys.get_int_max_str_digits()` (a guard against
    quadratic conversions) as a FormatError naming `what`; None for any other ValueError."""
    if "integer string conversion" not in str(exc):
        return None
    return FormatError(f"{what}: a number has more than {sys.get_int_max_str_digits()} digits")


def _parse_json(text: str, what: str) -> object:
    """`json.loads` whose failures are FormatErrors with the line and column of a syntax error."""
    try:
        value: object = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{what}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise FormatError(f"{what}: JSON nested too deeply") from None
    except ValueError as exc:
        raise (too_many_digits(exc, what) or exc) from None
    return value


def json_object(text: str, what: str) -> JSONObject:
    """Parse JSON that must be an object, with the line and column of a syntax error."""
    data = _parse_json(text, what)
    if not isinstance(data, dict):
        raise FormatError(f"{what}: must be a JSON object")
    return data


def load_documents(text: str, name: str, max_nodes: int = MAX_YAML_NODES) -> list[object]:
    """A JSON value (text starting with `{` or `[`) as one document, else every YAML document."""
    if text.lstrip().startswith(("{", "[")):
        return [_parse_json(text, name)]
    return load_yaml_documents(text, name, max_nodes)


def load_yaml_documents(text: str, name: str = "YAML", max_nodes: int = MAX_YAML_NODES) -> list[object]:
    """All documents of a YAML stream via the safe loader, each refused before it is constructed
    when its node graph would expand beyond `max_nodes` (aliases counted at full size: YAML bombs)."""
    try:
        return _load_yaml_documents(text, name, max_nodes)
    except EngineError:
        raise
    except ValueError as exc:  # either reader building an int of too many digits
        raise (too_many_digits(exc, name) or exc) from None


def _load_yaml_documents(text: str, name: str, max_nodes: int) -> list[object]:
    import yaml

    try:
        fast = _fast_yaml.read(text)  # rapidyaml, typed as PyYAML types (it refuses anchors); None: PyYAML reads it
    except _fast_yaml.Refused:
        _check_syntax(text, name)  # raises where PyYAML's parser fails; returns when it accepts the text after all
        fast = None
    if fast is not None:
        return fast
    check = bool(_ANCHOR.search(text))  # no anchor, no alias: nothing can expand
    loader = _loader_class()(text)
    docs: list[object] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None and check and _yaml_size(node, {}, max_nodes) > max_nodes:
                mark = node.start_mark
                raise FormatError(f"{name}: the document at line {mark.line + 1} expands to more than "
                                  f"{max_nodes} nodes (aliases/anchors used as a YAML bomb?)")
            docs.append(_build(node, loader) if node is not None else None)
        return docs
    except FormatError:
        raise
    except yaml.YAMLError as exc:
        raise _yaml_error(name, exc) from None
    except RecursionError:
        raise FormatError(f"{name}: YAML nested too deeply") from None
    finally:
        loader.dispose()


def _yaml_error(name: str, exc: Exception) -> FormatError:
    """PyYAML's error as a FormatError, with the line and column where PyYAML marks one."""
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        return FormatError(f"{name}: invalid YAML{where}: {exc.problem or exc.context}")
    return FormatError(f"{name}: invalid YAML: {exc}")


def _check_syntax(text: str, name: str) -> None:
    """PyYAML's parser over the whole text, events only (nothing is composed, so memory stays flat): invalid YAML
    fails here in a fraction of what building it would cost, with the same message."""
    import yaml

    loader = _loader_class()(text)
    next_event: Callable[[], object] = loader.get_event  # typed here: types-PyYAML leaves it unannotated
    try:
        while loader.check_event():
            next_event()
    except yaml.YAMLError as exc:
        raise _yaml_error(name, exc) from None
    finally:
        loader.dispose()


_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


@functools.cache
def _loader_class() -> Callable[[str], yaml.SafeLoader]:
    """libyaml's safe loader, resolving each distinct plain scalar once (a snapshot repeats the same
    names and numbers thousands of times; resolution depends on the value alone)."""
    import yaml
    from yaml.resolver import Resolver

    # libyaml's loader when PyYAML was built with it; both have the safe loader's methods
    base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    # typed here: types-PyYAML leaves the resolver unannotated
    resolve: Callable[[Resolver, type[yaml.Node], str, tuple[bool, bool]], str] = Resolver.resolve

    class Loader(base):  # type: ignore[valid-type,misc]  # `base` is chosen at run time, a SafeLoader either way
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._tags: dict[str, str] = {}

        def resolve(self, kind: type[yaml.Node], value: str, implicit: tuple[bool, bool]) -> str:
            if kind is yaml.ScalarNode and implicit[0]:
                tag = self._tags.get(value)
                if tag is None:
                    tag = self._tags[value] = resolve(self, kind, value, implicit)
                return tag
            return resolve(self, kind, value, implicit)

    return Loader


def _build(node: yaml.Node, loader: yaml.SafeLoader) -> object:
    """Python objects from a composed YAML node: plain dicts, lists and strings built directly, every
    other scalar (and a mapping with merge keys) by the safe constructor — the safe loader's result,
    several times faster than its generic constructor."""
    import yaml

    cls = node.__class__
    if cls is yaml.ScalarNode:
        return node.value if node.tag == _STR_TAG else loader.construct_object(node, deep=True)
    if cls is yaml.SequenceNode:
        return [_build(child, loader) for child in node.value]
    if any(k.tag == _MERGE_TAG for k, _ in node.value):
        return loader.construct_object(node, deep=True)
    try:
        return {_build(k, loader): _build(v, loader) for k, v in node.value}
    except TypeError:
        raise FormatError(f"YAML line {node.start_mark.line + 1}: a mapping key must be a plain value") from None


#: where a YAML anchor (`&name`) could start; kubectl never writes one, a YAML bomb needs them
_ANCHOR = re.compile(r"(?:^|[\s,\[{:-])&[^\s]")


def _yaml_size(root: yaml.Node, sizes: dict[int, int], limit: int = MAX_YAML_NODES) -> int:
    """Expanded node count, memoised per node so shared (aliased) nodes cost once to compute."""
    import yaml

    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes and not done:
            continue
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        children = ([c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if done:
            total = 1
            for c in children:
                total += sizes.get(id(c), 1)
                if total > limit:
                    break
            sizes[key] = total
        else:
            sizes[key] = 1  # provisional: a recursive alias counts once instead of looping
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
    return sizes[id(root)]
