"""A tool log holding a multi-line secret (a 27-line PEM private key) is redacted, then cut. The
marker the model reads ("[N lines omitted: lines A–B]") and the manifest's kept line ranges
numbered the lines of the redacted text, 26 fewer than the log's, while the ``[full log: …]`` ref
and the redaction records count in the logged text. The redaction keeps the line count
(``redact.with_placeholders``), so every number names the logged line."""

from __future__ import annotations

import json
import re
from pathlib import Path

from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import ManifestFragment, TruncationRecord
from contextfold.projections.redact import placeholder, redact
from contextfold.projections.tokens import get_counter

PEM = ("-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join("MIIEowIBAAKCAQEA" + "Q" * 48 for _ in range(25))
       + "\n-----END RSA PRIVATE KEY-----")
LINES = [f"log line {i:04d} " + "w" * 50 for i in range(1, 401)]
CONTENT = "\n".join(LINES[:10]) + "\n" + PEM + "\n" + "\n".join(LINES[10:])


def test_redaction_keeps_the_line_count_of_a_multi_line_secret() -> None:
    shown = redact(CONTENT)
    assert shown.findings and "PRIVATE KEY" not in shown.text and "MIIEow" not in shown.text
    assert shown.text.count("\n") == CONTENT.count("\n")
    assert shown.text.split("\n")[10] == "[REDACTED:private_key]"
    assert shown.text.split("\n")[37] == CONTENT.split("\n")[37] == "log line 0011 " + "w" * 50


def test_a_cut_log_names_the_logged_lines_after_a_redacted_key(tmp_path: Path) -> None:
    logged = CONTENT.split("\n")
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r")
        run.append(PolicySet(text="Be careful."), UserInput("start"))
        run.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="sh", arguments="{}"),)))
        run.append(ToolResult(call_id="c1", content=CONTENT))
        run.append(ModelResponse(tool_calls=(ToolCall(call_id="c2", name="sh", arguments="{}"),)))
        run.append(ToolResult(call_id="c2", content="ok"), UserInput("go"))
        built = run.preview("anthropic", window=3000, reserve=100)
    [cut] = [t for t in built.manifest.truncations if t.id == "e4"]
    body = built.body_bytes.decode()
    assert "MIIEow" not in body
    first, last = map(int, re.search(r"lines omitted: lines (\d+)\u2013(\d+)", body).groups())  # type: ignore[union-attr]
    resumes = re.search(r"lines omitted: lines \d+\u2013\d+\] \u2026\\n(log line \d+)", body)
    assert resumes is not None and logged[last].startswith(resumes.group(1))  # line last + 1
    ranges = [tuple(map(int, r.split("-"))) for r in cut.kept.removeprefix("lines ").split(", ")]
    assert ranges[-1][1] == len(logged) and (first, last) == (ranges[0][1] + 1, ranges[1][0] - 1)


def _cut_of(tmp_path: Path, content: str, window: int) -> tuple[TruncationRecord, ManifestFragment, str, str]:
    """Build a run whose first tool result is ``content``, cut: its truncation record, its manifest
    line, the request body and the manifest's encoding."""
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        run = store.run("r")
        run.append(PolicySet(text="Be careful."), UserInput("start"))
        run.append(ModelResponse(tool_calls=(ToolCall(call_id="c1", name="sh", arguments="{}"),)))
        run.append(ToolResult(call_id="c1", content=content))
        run.append(ModelResponse(tool_calls=(ToolCall(call_id="c2", name="sh", arguments="{}"),)))
        run.append(ToolResult(call_id="c2", content="ok"), UserInput("go"))
        built = run.preview("anthropic", window=window, reserve=100)
    [cut] = [t for t in built.manifest.truncations if t.id == "e4"]
    [line] = [f for f in built.manifest.fragments if f.id == "e4"]
    assert built.manifest.encoding is not None
    return cut, line, built.body_bytes.decode(), built.manifest.encoding


def test_a_cut_of_a_redacted_log_records_the_sizes_of_the_text_it_cut(tmp_path: Path) -> None:
    """Pinned: a truncation record's sizes are those of the text the build cut and would have
    shown whole, the redacted one, as every other number of the fragment's manifest line is (its
    tokens, its ``original_tokens``, its reason's "truncated A -> B tokens"): the difference
    ``original_tokens - tokens`` is what the cut dropped, not the cut and the redaction together
    (``compaction_api`` reads it so). Its line numbers are the logged ones because the redacted
    text has the logged lines; the redaction records (offsets in the logged text) give the rest:
    the logged size is the recorded one plus what the placeholders replaced."""
    cut, line, _, encoding = _cut_of(tmp_path, CONTENT, 3000)
    shown = redact(CONTENT)
    count = get_counter(encoding).count
    assert cut.strategy == "lines" and cut.original_chars == len(shown.text) < len(CONTENT)
    assert cut.original_tokens == count(shown.text) == line.original_tokens
    assert cut.original_tokens < count(CONTENT)
    assert f"truncated {cut.original_tokens} -> {cut.tokens} tokens" in line.selection_reason
    ranges = [tuple(map(int, r.split("-"))) for r in cut.kept.removeprefix("lines ").split(", ")]
    assert ranges[-1][1] == CONTENT.count("\n") + 1 == shown.text.count("\n") + 1
    replaced = sum(f.end - f.start - len(placeholder(f.rule)) - CONTENT.count("\n", f.start, f.end)
                   for f in shown.findings)
    assert len(CONTENT) == cut.original_chars + replaced


def test_a_words_cut_of_a_redacted_line_counts_its_characters_in_the_redacted_text(tmp_path: Path) -> None:
    """A cut by characters (one long line) names ranges of the redacted text, as its sizes are."""
    secret = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
    content = " ".join(f"word{i:05d}" for i in range(2_500)) + f" token {secret} " + " ".join(
        f"tail{i:05d}" for i in range(2_500))
    cut, _, body, _ = _cut_of(tmp_path, content, 2500)
    shown = redact(content).text
    assert secret not in body and cut.strategy == "words" and cut.original_chars == len(shown) < len(content)
    (a, b), (c, d) = (map(int, r.split("-")) for r in cut.kept.removeprefix("chars ").split(", "))
    assert a == 1 and d == len(shown)
    assert json.dumps(shown[:b])[1:-1] in body and json.dumps(shown[c - 1:])[1:-1] in body
