"""YAML read by rapidyaml (a C++ parser) into the values PyYAML's safe loader gives.

libyaml, behind PyYAML, builds a Python node object per scalar: a 10 MiB `kubectl get -o yaml`
snapshot took it about 12 s. rapidyaml parses the same text in a fraction of a second into a tree
that records each scalar's style; walking that tree builds the plain dicts, lists and strings, and
every *plain* scalar is typed by PyYAML's own resolver and constructor (YAML 1.1: `yes`, `017`,
`1:20`, timestamps, as PyYAML reads them), once per distinct text. Quoted and block scalars stay
strings, as in PyYAML.

Only text that needs nothing else is read this way: anchors and aliases (where YAML bombs live),
tags, merge keys, complex keys, directives and characters PyYAML refuses are left to the hardened
PyYAML path, and so is any text rapidyaml rejects, so errors keep PyYAML's line and column (rapidyaml
also writes its own two-line message to stderr then, which is why small texts, where PyYAML takes
milliseconds, skip it). `read` returns None for all of those."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import yaml

# where an anchor (`&a`), an alias (`*a`), a tag (`!x`), a merge key (`<<:`), a complex key (`? `) or a
# directive (`%YAML`) could start: kubectl writes none; a false alarm only sends the text to PyYAML
_NEEDS_PYYAML = re.compile(r"(?:^|[\s\[{,:-])[&*][^\s]|(?:^|[\s\[{,])!|<<\s*:|(?:^|[\s\[{,])\?(?:\s|$)|^%",
                           re.MULTILINE)
#: below this, PyYAML reads a text in well under 0.1 s
MIN_CHARS = 64 * 1024


class _Tree(Protocol):
    """The part of rapidyaml's tree this module reads (rapidyaml ships no type information): nodes are
    ints, scalars memory views (None when absent)."""

    def root_id(self) -> int: ...
    def is_stream(self, node: int) -> bool: ...
    def is_container(self, node: int) -> bool: ...
    def is_map(self, node: int) -> bool: ...
    def is_val(self, node: int) -> bool: ...
    def has_val(self, node: int) -> bool: ...
    def first_child(self, node: int) -> int: ...
    def next_sibling(self, node: int) -> int: ...
    def key(self, node: int) -> memoryview | None: ...
    def val(self, node: int) -> memoryview | None: ...
    def is_key_quoted(self, node: int) -> bool: ...
    def is_val_quoted(self, node: int) -> bool: ...


def read(text: str, min_chars: int = MIN_CHARS) -> list[object] | None:
    """Every document of `text` as PyYAML's safe loader would build it, or None when the text must
    go through PyYAML (see the module docstring); Refused when rapidyaml could not parse it."""
    if len(text) < min_chars or _NEEDS_PYYAML.search(text):
        return None
    import yaml

    if yaml.reader.Reader.NON_PRINTABLE.search(text):  # PyYAML refuses these characters, and says where
        return None
    try:
        import ryml  # type: ignore[import-untyped]  # rapidyaml ships no stubs: `_Tree` says what is used
    except ImportError:  # the wheel is missing on this platform: PyYAML does it all
        return None
    try:
        tree: _Tree = ryml.parse_in_arena(text.encode())
    except Exception:  # rapidyaml's parse errors: PyYAML says where, in its words
        raise Refused from None
    none: int = ryml.NONE
    try:
        return _documents(tree, none)
    except (RecursionError, _Unreadable):
        return None


class Refused(Exception):
    """rapidyaml could not parse the text: most likely invalid YAML. The caller lets PyYAML's parser (events
    only, in constant memory) say where before building anything: composing a large invalid text whole, only to
    fail at its end, cost 30 s and 800 MB for 14 MB."""


class _Unreadable(Exception):
    """A plain scalar PyYAML's safe constructor would refuse: its error belongs to PyYAML's path."""


def _documents(tree: _Tree, none: int) -> list[object]:
    """The tree's documents as Python values. The tree's methods are bound once: the walk makes a
    few calls per node, and a snapshot has hundreds of thousands of nodes."""
    is_container, is_map, has_val = tree.is_container, tree.is_map, tree.has_val
    first, following = tree.first_child, tree.next_sibling
    key_of, value_of, key_quoted, value_quoted = tree.key, tree.val, tree.is_key_quoted, tree.is_val_quoted

    def value(node: int) -> object:
        if not is_container(node):
            text = _text(value_of(node))
            return text if value_quoted(node) else _plain(text)
        child = first(node)
        if is_map(node):
            out: dict[object, object] = {}
            while child != none:
                key = _text(key_of(child))
                out[key if key_quoted(child) else _plain(key)] = value(child)
                child = following(child)
            return out
        items = []
        while child != none:
            items.append(value(child))
            child = following(child)
        return items

    root = tree.root_id()
    if not tree.is_stream(root):
        return [value(root)] if is_container(root) or tree.is_val(root) else []
    docs: list[object] = []
    child = first(root)
    while child != none:
        docs.append(value(child) if is_container(child) or has_val(child) else None)
        child = following(child)
    return docs


def _text(view: memoryview | None) -> str:
    return "" if view is None else bytes(view).decode()


@functools.lru_cache(maxsize=65536)
def _plain(text: str) -> object:
    """A plain scalar as PyYAML's safe loader types it (its resolver picks the tag, its constructor
    builds the value). Cached: a snapshot repeats the same names and numbers thousands of times, and
    every value built here is immutable."""
    import yaml

    loader = _loader()
    # typed here: types-PyYAML leaves the resolver unannotated
    resolve: Callable[[type[yaml.Node], str, tuple[bool, bool]], str] = loader.resolve
    tag = resolve(yaml.ScalarNode, text, (True, False))
    if tag == "tag:yaml.org,2002:str":
        return text
    try:
        construct: Callable[[yaml.SafeLoader, yaml.ScalarNode], object] = loader.yaml_constructors[tag]
        return construct(loader, yaml.ScalarNode(tag, text))
    except (KeyError, yaml.YAMLError, ValueError) as exc:
        raise _Unreadable(text) from exc


@functools.cache
def _loader() -> yaml.SafeLoader:
    import yaml

    return yaml.SafeLoader("")
