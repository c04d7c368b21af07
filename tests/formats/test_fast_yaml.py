"""The rapidyaml path reads YAML into exactly what PyYAML's safe loader builds (YAML 1.1 typing of plain
scalars included), is taken only for large texts with nothing PyYAML must handle itself, and leaves
everything else (anchors, tags, merge keys, invalid text) to the hardened PyYAML path."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core.errors import FormatError
from scheduler_core.formats import _documents as documents
from scheduler_core.formats import _fast_yaml

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"

#: plain scalars that YAML 1.1 (PyYAML) and YAML 1.2 parsers type differently, and other traps
TRICKY = ["yes", "No", "on", "OFF", "y", "n", "true", "False", "null", "Null", "~", "", "017", "0o17", "0x1F",
          "1_000", "1:20", "-1:30:00", "1e3", "1.5e3", "6.02e+23", ".inf", "-.Inf", ".nan", "+12", "-0",
          "2026-11-20", "2026-11-20T10:20:30Z", "2026-11-20 10:20:30.5 +01:00", "0b101", "12.",
          "plain text", "a-b_c.d/e", "128Gi", "500m", "1-127", "node-0,3", "é ü ß", "#not-a-comment"]


def _pyyaml(text: str) -> list:
    return list(yaml.load_all(text, Loader=yaml.SafeLoader))


def _same(a, b) -> bool:
    """Equality that treats NaN as equal to NaN and tells 1 from True from 1.0."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)  # keys in document order
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_a_generated_kubectl_snapshot_reads_as_pyyaml_reads_it():
    sys.path.insert(0, str(ROOT))
    from benchmarks.snapshot_import import generated_snapshot

    text = generated_snapshot(40)
    assert len(text) > _fast_yaml.MIN_CHARS
    fast = _fast_yaml.read(text)
    assert fast is not None and _same(fast, _pyyaml(text))
    assert len(fast[0]["items"]) > 200


@pytest.mark.parametrize("path", sorted(DATA.rglob("*.y*ml")), ids=lambda p: p.name)
def test_every_yaml_file_of_the_tests_reads_as_pyyaml_reads_it(path):
    text = path.read_text()
    fast = _fast_yaml.read(text, min_chars=0)
    assert fast is not None, "no construct here needs PyYAML's own path"
    assert _same(fast, _pyyaml(text))


def test_plain_scalars_are_typed_by_yaml_1_1_and_quoted_ones_stay_strings():
    lines = [f"k{i}: {token}" for i, token in enumerate(TRICKY)]
    lines += [f"q{i}: '{token}'" for i, token in enumerate(TRICKY)]
    lines += ["seq:"] + [f"- {token}" for token in TRICKY if token and not token.startswith("#")]
    lines += ["flow: [yes, '017', 017, 1:20, ~]", "yes: key typed too", "017: octal key", "block: |", "  017", "  yes"]
    text = "\n".join(lines) + "\n"
    fast = _fast_yaml.read(text, min_chars=0)
    slow = _pyyaml(text)
    assert _same(fast, slow)
    doc = fast[0]
    assert doc["k0"] is True and doc["k12"] == 15 and doc["k13"] == "0o17" and doc["k16"] == 80
    assert doc["k18"] == "1e3" and doc["k19"] == "1.5e3"  # PyYAML's floats need a dot and a signed exponent
    assert doc["q0"] == "yes" and doc["q12"] == "017" and doc[True] == "key typed too"
    assert doc["block"] == "017\nyes\n"


_keys = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
_scalars = (st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False)
            | st.sampled_from(TRICKY) | st.text(st.characters(blacklist_categories=("Cs",)), max_size=20))
_documents = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(_keys, inner, max_size=5), max_leaves=30)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(doc=_documents, flow=st.sampled_from([False, None]), width=st.sampled_from([80, 10**6]))
def test_documents_dumped_by_pyyaml_read_back_alike(doc, flow, width):
    """Block style as kubectl writes it (sequences not indented under their key) and PyYAML's default."""
    text = yaml.safe_dump(doc, default_flow_style=flow, sort_keys=False, allow_unicode=True, width=width)
    try:
        fast = _fast_yaml.read(text, min_chars=0)
    except _fast_yaml.Refused:  # rapidyaml cannot parse it: PyYAML's path reads it (load_yaml_documents)
        fast = None
    if fast is not None:  # None: the text needs PyYAML itself (a tag, a character it refuses, ...)
        assert _same(fast, _pyyaml(text)), text


@settings(max_examples=200, deadline=None, derandomize=True)
@given(tokens=st.lists(st.sampled_from(TRICKY), min_size=1, max_size=8))
def test_plain_tokens_written_by_hand_read_alike(tokens):
    text = "seq:\n" + "".join(f"- {t}\n" if t and not t.startswith("#") else "- x\n" for t in tokens)
    text += "m:\n" + "".join(f"  k{i}: {t}\n" for i, t in enumerate(tokens) if t and not t.startswith("#"))
    fast = _fast_yaml.read(text, min_chars=0)
    assert fast is not None and _same(fast, _pyyaml(text)), text


@pytest.mark.parametrize("text", [
    "a: &x 1\nb: *x\n",  # anchors and aliases
    "a: !!str 1\n", "- !custom x\n",  # tags
    "base: {a: 1}\nmerged:\n  <<: {b: 2}\n",  # merge keys
    "? [a, b]\n: c\n",  # a complex key
    "%YAML 1.1\n---\na: 1\n",  # a directive
    "a: b\x07\n",  # a character PyYAML refuses
    "a: =\n",  # a plain scalar PyYAML's safe constructor refuses
])
def test_what_needs_pyyaml_is_left_to_it(text, capfd):
    assert _fast_yaml.read(text, min_chars=0) is None


@pytest.mark.parametrize("text", ["a: b: c\n", "a: [1, 2\n"])
def test_what_rapidyaml_cannot_parse_is_refused(text, capfd):
    with pytest.raises(_fast_yaml.Refused):
        _fast_yaml.read(text, min_chars=0)


def test_large_invalid_yaml_fails_within_the_bounds_of_valid_yaml_of_its_size():
    """Broken at its very end, a large text once was composed whole by PyYAML before failing (14 MB: 30 s and
    +800 MB, against 20 s for the valid text); PyYAML's parser alone now finds the error, in flat memory, with
    PyYAML's own message. Bounded by what the valid text of the same size costs."""
    from scheduler_core.errors import FormatError
    from scheduler_core.formats._documents import load_yaml_documents
    from tests.measure import MiB, measure

    items = "".join(f"- name: pod-{i}\n  namespace: ns-{i % 50}\n  spec:\n    nodeName: node-{i % 500}\n"
                    f"    containers:\n    - name: c\n      resources: {{requests: {{cpu: '4', memory: 8Gi}}}}\n"
                    for i in range(20000))
    valid = "kind: List\nitems:\n" + items
    invalid = valid + "  broken: [unclosed\n"
    good = measure(lambda: load_yaml_documents(valid, "snapshot"))
    assert len(good.result[0]["items"]) == 20000

    def broken() -> str:
        with pytest.raises(FormatError) as info:
            load_yaml_documents(invalid, "snapshot")
        return str(info.value)

    bad = measure(broken)
    assert bad.result == ("snapshot: invalid YAML at line 140004, column 1: did not find expected ',' or ']'")
    assert bad.seconds <= 1.5 * good.seconds + 0.5, (bad.seconds, good.seconds)
    assert bad.growth <= 1.5 * good.growth + 20 * MiB, (bad.growth / MiB, good.growth / MiB)


def test_large_texts_take_the_fast_path_and_small_ones_pyyaml(monkeypatch):
    def refuse():
        raise AssertionError("PyYAML's path was taken")

    big = "items:\n" + "".join(f"- {{name: node-{i}, cpus: {i % 64}, ready: yes}}\n" for i in range(3000))
    assert len(big) > _fast_yaml.MIN_CHARS
    expected = _pyyaml(big)
    monkeypatch.setattr(documents, "_loader_class", refuse)
    assert _same(documents.load_yaml_documents(big), expected)
    with pytest.raises(AssertionError, match="PyYAML's path"):
        documents.load_yaml_documents("a: 1\n")


def test_large_invalid_or_bomb_texts_still_get_pyyaml_errors():
    big_invalid = "a: 1\n" * 20000 + "b: [1, 2\n"
    with pytest.raises(FormatError, match=r"invalid YAML at line 20002"):
        documents.load_yaml_documents(big_invalid)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)) + "# padding\n" * 10000
    with pytest.raises(FormatError, match="YAML bomb"):
        documents.load_yaml_documents(bomb)
    deep = "x:\n" + "".join(" " * i + "x:\n" for i in range(1, 5000)) + " " * 5000 + "end\n"
    with pytest.raises(FormatError, match="nest"):
        documents.load_yaml_documents(deep)
