"""A tool log holding a multi-line secret (a 27-line PEM private key) is redacted, then cut. The
marker the model reads ("[N lines omitted: lines A–B]") and the manifest's kept line ranges
numbered the lines of the redacted text, 26 fewer than the log's, while the ``[full log: …]`` ref
and the redaction records count in the logged text. The redaction keeps the line count
(``redact.with_placeholders``), so every number names the logged line."""

from __future__ import annotations

import re
from pathlib import Path

from contextfold.api import open_store
from contextfold.domain.events import ModelResponse, PolicySet, ToolCall, ToolResult, UserInput
from contextfold.projections.redact import redact

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
