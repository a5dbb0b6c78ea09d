"""The HTML report of a run whose ``context_built`` records were forged in an imported events file.

A record's manifest is data from the log: an events JSONL import can set every string in it
(a layer name is a key of ``layer_tokens``). A ``"><meta http-equiv="refresh" ...>`` layer name
was written into the report verbatim, beside "integrity ok"; the Content-Security-Policy stops
scripts, not a meta refresh, an inline-style overlay or a link. Every string of every record is
forged here, and the report must show each one escaped, never as markup.
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from contextfold.cli import main
from contextfold.domain.manifest import ContextManifest

MARK = "<zz\"'>\x1b[31m\u202e"
"""Appended to every string: markup, both quotes, an ANSI escape and a bidi override."""
SHOWN = "&lt;zz&quot;&#x27;&gt;\\x1b[31m\\u202e"
"""How the report shows it."""
RUN = "demo-fix-invoice"

_ADDED: dict[str, dict[str, Any]] = {  # one entry for each list the demo's records leave empty
    "truncations": {"id": "t", "strategy": "s", "original_tokens": 5, "tokens": 3, "original_chars": 9,
                    "kept": "lines 1-2"},
    "redactions": {"fragment_id": "f", "rule": "r", "start": 0, "end": 1},
}


def _forged(value: Any) -> Any:
    """``value`` with :data:`MARK` appended to every string in it, dict keys included."""
    if isinstance(value, str):
        return value + MARK
    if isinstance(value, dict):
        return {_forged(k): _forged(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_forged(v) for v in value]
    return value


def _at(tree: Any, loc: tuple[Any, ...]) -> tuple[Any, Any]:
    """The container holding ``loc``'s last step, and that step (the deepest one that exists)."""
    for i, step in enumerate(loc[:-1]):
        nxt = tree[step] if isinstance(tree, list) or step in tree else None
        if not isinstance(nxt, dict | list):
            return tree, step if not isinstance(tree, list) else loc[i]
        tree = nxt
    return tree, loc[-1]


def _forged_manifest(manifest: dict[str, Any]) -> dict[str, Any]:
    """Every string of ``manifest`` forged, except those its model refuses to read then (a
    fragment kind or trust is one of a few words): those keep their recorded value."""
    for key, entry in _ADDED.items():
        manifest[key] = manifest[key] or [entry]
    manifest["repairs"] = [*manifest["repairs"], "tool_result_lost:c9"]
    for fragment in manifest["fragments"]:
        fragment["reasoning"] = "sent verbatim"
        fragment["media"] = [{"kind": "image", "media_type": "image/png", "ref": "sha:ab", "tokens": 3,
                              "rule": "openai-tiles", "shown_in": "f1"}]
    forged: dict[str, Any] = _forged(manifest)
    for _ in range(50):
        try:
            ContextManifest.model_validate(forged)
            return forged
        except ValidationError as exc:
            for error in exc.errors():
                holder, step = _at(forged, tuple(error["loc"]))
                original, _ = _at(manifest, tuple(error["loc"]))
                if isinstance(holder, dict) and isinstance(step, str) and step.endswith(MARK):
                    holder[step.removesuffix(MARK)] = holder.pop(step)  # a key the model refuses
                elif isinstance(holder, dict | list):
                    holder[step] = original[step] if isinstance(original, list) else original.get(step)
    raise AssertionError("the forged manifest never validated")


def test_every_forged_string_of_a_record_is_shown_escaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'contextfold.db'}"
    assert main(["--store", url, "demo"]) == 0
    capsys.readouterr()
    assert main(["--store", url, "events", RUN, "--json"]) == 0
    lines = []
    for line in capsys.readouterr().out.splitlines():
        event = json.loads(line)
        if event["type"] == "context_built":
            event["manifest"] = _forged_manifest(event["manifest"])
            for key in ("provider", "builder"):
                event[key] = _forged(event[key])
        lines.append(json.dumps(event))
    forged = tmp_path / "forged.jsonl"
    forged.write_text("\n".join(lines) + "\n")
    target = f"sqlite:///{tmp_path / 'forged.db'}"
    assert main(["--store", target, "import", str(forged), "--run", "f", "--format", "events"]) == 0
    report = tmp_path / "r.html"
    assert main(["--store", target, "audit", "f", "--html", str(report)]) == 0
    html = report.read_text()
    assert 'data-ok="true"' in html
    assert "<zz" not in html and "zz\"'" not in html
    assert [c for c in html if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")] == []
    assert html.count(SHOWN) >= 20  # the forged strings are shown, each escaped
    # a forged layer: its name escaped in the attributes, its class a fixed token
    assert f'<span class="seg layer-other" data-layer="history{SHOWN}"' in html
    assert {c for c in re.findall(r'class="([^"]*)"', html) if "zz" in c or "&" in c} == set()
