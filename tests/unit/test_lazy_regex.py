"""Patterns off a build's usual path are compiled when first used, not when the builder is imported.

Importing the builder compiled ~200 regular expressions (~60 ms of a new process's CPU); a build
of ordinary content uses fewer than half. The lazy ones match exactly what ``re.compile`` of the
same source and flags does (the redaction, JSON and log tests pin their matches; here, a few of
each against the eager pattern).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from contextfold.projections.lazy_regex import LazyPattern

LAZY = {
    "contextfold.projections.redact_values": ("_PLACEHOLDER", "_CJK_START", "_LABEL_WORD"),
    "contextfold.projections.redact_patterns": ("_AWS_RE", "_AWS_REST_RE"),
    "contextfold.projections.json_deep": ("_FIRST_MEMBER",),
    "contextfold.projections.diagnose": ("_VERDICT",),
    "contextfold.projections.render.data_blocks": ("_ROLE_JSON_RE",),
}

_CHILD = """
import importlib, json, sys
import contextfold.projections.builder
lazy = json.loads(sys.argv[1])
compiled = [f"{m}.{n}" for m, names in lazy.items() for n in names
            if getattr(getattr(importlib.import_module(m), n), "is_compiled", True)]
print(json.dumps(compiled))
"""


def test_importing_the_builder_compiles_none_of_them() -> None:
    out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(LAZY)], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout.splitlines()[-1]) == []


def _patterns() -> list[LazyPattern]:
    import importlib

    found = [getattr(importlib.import_module(m), n) for m, names in LAZY.items() for n in names]
    from contextfold.projections.json_deep import _NEXT

    return [*found, *_NEXT.values()]


SAMPLES = [
    "", "x", "${API_TOKEN}", "changeme", "<your-key>", "password", "AKIAIOSFODNN7EXAMPLE",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    'aws_secret="wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"', "token：在控制台的设置页面生成", "密码",
    '{"a": 1, "b": [true, null, "x"]}', ', "k": "v"', ", 12", "FAIL: test_b (t.T)",
    "> Task :app:compileJava FAILED", "ERROR: test_x (t.T)", '{"role": "system"}', "the api key is below.",
]


@pytest.mark.parametrize("index", range(len(_patterns())))
def test_each_matches_as_the_eager_pattern(index: int) -> None:
    lazy = _patterns()[index]
    eager = re.compile(lazy.pattern, lazy.flags_given)
    assert lazy.flags == eager.flags
    for text in SAMPLES:
        for pos in (0, 1):
            assert _spans(lazy.match(text, pos)) == _spans(eager.match(text, pos))
            assert _spans(lazy.search(text, pos)) == _spans(eager.search(text, pos))
            assert _spans(lazy.fullmatch(text, pos)) == _spans(eager.fullmatch(text, pos))
        assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
        assert lazy.findall(text) == eager.findall(text)
        assert lazy.sub("*", text) == eager.sub("*", text)
    assert lazy.is_compiled


def _spans(m: re.Match[str] | None) -> object:
    return None if m is None else (m.span(), m.groups())


def test_a_secret_an_aws_rule_finds_is_still_redacted() -> None:
    """The AWS secret's linear matcher reaches its lazy patterns (first use compiles them)."""
    from contextfold.projections.redact import redact
    from contextfold.projections.redact_patterns import _AWS_RE

    secret = "Zk3q9vR2mXw8Lp4Tn7Yb1Hc6Fd5Gs0Ja2Ke9Uv3W"  # test_redact's
    out = redact(f"aws_secret_access_key = {secret}\n")
    assert secret not in out.text
    assert [f.rule for f in out.findings] == ["aws_secret_access_key"]
    assert _AWS_RE.is_compiled
