"""Untrusted text (tool names, sources, model names) in the audit outputs people read.

An ANSI escape, newline or bidi override in a source ref or tool name must not reach
the terminal (or the HTML report) raw: it would recolour or clear the reader's
terminal, break a table row, or reorder what the reader sees.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import sys
import unicodedata
from html import unescape
from pathlib import Path

import pytest

from contextfold.cli import main
from tests.cli_runner import TerminalOut, on_terminal

ESC = "\x1b"
BAD = (f'<script>alert(1)</script></textarea>"><img src=x onerror=alert(2)>{ESC}[31mRED{ESC}[0m'
       "\n\tT\u202eevil 全角")
EVIL_REF = f'javascript:alert(1)"><script>alert(5)</script>{ESC}[1mB\u202e'
EVENTS = [
    {"type": "run_started", "v": 2, "model": f"gpt{ESC}[2J\nX"},
    {"type": "policy_set", "text": "be nice " + BAD},
    {"type": "tools_registered", "tools": [{"name": f"t{ESC}[31m\u202ex", "description": BAD}]},
    {"type": "user_input", "content": [{"type": "text", "text": BAD}]},
    {"type": "evidence_retrieved", "content": BAD, "source_ref": EVIL_REF},
    {"type": "memory_recalled", "memory_id": "m1", "content": BAD, "source_ref": f"mem\n{ESC}[31mX\r\x07"},
    {"type": "evidence_retrieved", "content": "other " + BAD, "source_ref": f"doc{ESC}[2Jtwo\u2066"},
    {"type": "user_input", "content": [{"type": "text", "text": "next " + BAD}]},
]


def _hidden(text: str) -> list[str]:
    """Control/format characters other than the newlines that separate lines."""
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.delenv("CONTEXTFOLD_STORE", raising=False)
    path = tmp_path / "evil.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in EVENTS) + "\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["--store", url, "import", str(path), "--run", "evil", "--format", "events"]) == 0
    capsys.readouterr()
    return url


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    main(list(args))
    out = capsys.readouterr()
    return out.out + out.err


def test_terminal_outputs_show_escapes_not_control_characters(
        store: str, capsys: pytest.CaptureFixture[str]) -> None:
    table = _run(capsys, "--store", store, "manifest", "evil", "--window", "600", "--reserve", "100")
    assert "duplicate" in table or "over_budget" in table or "low_priority" in table
    wide = _run(capsys, "--store", store, "manifest", "evil", "--window", "4000", "--reserve", "100")
    outputs = {
        "manifest": table + wide,
        "diff": _run(capsys, "--store", store, "diff", "evil", "1", "1"),
        "why": _run(capsys, "--store", store, "why", "evil", "--turn", "1", "e")
        + _run(capsys, "--store", store, "why", "evil", "--turn", "1", "mem"),
        "audit": _run(capsys, "--store", store, "audit", "evil")
        + _run(capsys, "--store", store, "audit", "evil", "--turn", "1"),
        "events": _run(capsys, "--store", store, "events", "evil"),
    }
    for name, text in outputs.items():
        assert _hidden(text) == [], name
    manifest = outputs["manifest"]
    assert "model gpt\\x1b[2J\\nX  encoding" in manifest  # one header line, the escape shown
    assert "t\\x1b[31m\\u202ex" in manifest
    assert "mem\\n\\x1b[31mX\\r\\x07" in outputs["why"]
    # every row of the table is one line: no field's newline started a line of its own
    assert not any(line.startswith(("X ", "\x1b")) for line in manifest.splitlines())


def test_html_report_shows_escapes_and_no_markup(store: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # a build records the turn the report shows (a manifest of the next request writes nothing)
    _run(capsys, "--store", store, "build", "evil", "--window", "600", "--reserve", "100")
    report = tmp_path / "r.html"
    assert main(["--store", store, "audit", "evil", "--html", str(report)]) == 0
    html = report.read_text()
    assert _hidden(html) == []
    assert "\u202e" not in html and "\\u202e" in html and "\\x1b[1mB" in html
    assert html.count("<script") == 1 and "<img" not in html and "</textarea" not in html
    assert "javascript:alert(1)&quot;&gt;&lt;script&gt;" in html


def test_html_report_allows_only_its_own_script(store: str, tmp_path: Path) -> None:
    """A Content-Security-Policy lets the browser run the report's pager and nothing else: an
    escape missed somewhere could not run an injected script, handler or javascript: URL."""
    report = tmp_path / "r.html"
    assert main(["--store", store, "audit", "evil", "--html", str(report)]) == 0
    html = report.read_text()
    meta = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', html)
    assert meta is not None and html.index(meta.group(0)) < html.index("<script>")
    policy = {d.split()[0]: d.split()[1:] for d in unescape(meta.group(1)).split("; ")}
    assert policy["default-src"] == ["'none'"]
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    assert policy["script-src"] == [f"'sha256-{digest}'"]


def test_error_lines_show_the_escapes_of_the_input_they_quote(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """An error quotes its input (an event type, a key): a crafted events file's
    ``ESC ]0;PWNED BEL ESC [2J`` set the terminal's title and cleared its screen from stderr."""
    from contextfold.cli import COMMANDS
    from contextfold.domain.errors import InvalidInputError

    store = f"sqlite:///{tmp_path / 'e.db'}"
    bad_type = tmp_path / "t.jsonl"
    bad_type.write_text(json.dumps({"type": f"x{ESC}]0;PWNED\x07{ESC}[2J", "v": 1}) + "\n")
    bad_key = tmp_path / "k.jsonl"
    bad_key.write_text(json.dumps({"type": "user_input", "content": [{"type": "text", "text": "a"}],
                                   f"k{ESC}[2J\u202e": 1}) + "\n")
    for path, shown in ((bad_type, "'x\\x1b]0;PWNED\\x07\\x1b[2J'"), (bad_key, "k\\x1b[2J\\u202e")):
        capsys.readouterr()
        assert main(["--store", store, "import", str(path), "--run", "r", "--format", "events"]) == 2
        err = capsys.readouterr().err
        assert _hidden(err) == [] and "ImportFormatError" in err and shown in err, err

    def raises(_: object) -> int:
        exc = InvalidInputError(f"bad {ESC}[31mred")
        exc.add_note(f"from {ESC}]0;title\x07 here")
        raise exc

    configure, _, help_text = COMMANDS["runs"]
    monkeypatch.setitem(COMMANDS, "runs", (configure, raises, help_text))
    capsys.readouterr()
    assert main(["--store", store, "runs"]) == 2
    err = capsys.readouterr().err
    assert err == ("contextfold: InvalidInputError: bad \\x1b[31mred\n"
                   "  from \\x1b]0;title\\x07 here\n")


def test_show_on_a_terminal_makes_escapes_visible_and_names_binary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``show`` wrote a tool output's ``ESC ]0;PWNED BEL ESC [2J``, NUL and backspaces raw to the
    terminal (and an image's bytes), where ``events`` and every audit output show them escaped.
    Piped or redirected, the content stays as stored; an image is one line naming it."""
    from contextfold.api import open_store
    from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
    from tests.integration.test_media_build import png

    url = f"sqlite:///{tmp_path / 's.db'}"
    output = f"ok\tdone\r\nnext{ESC}]0;PWNED\x07{ESC}[2J{ESC}[31mRED\x00\b\b\u202e"
    with open_store(url) as s:
        shot = s.attach_image(png((16, 16), seed=1))
        s.run("r").append(UserInput("run it"), ModelResponse(tool_calls=(ToolCall(call_id="c1", name="sh"),)),
                          ToolResult(call_id="c1", content=output))
    assert shot.artifact is not None

    def shown(*args: str) -> tuple[int, bytes, str]:
        screen = io.BytesIO()
        terminal = TerminalOut(screen, encoding="utf-8", write_through=True)
        with monkeypatch.context() as patch:
            patch.setattr(sys, "stdout", terminal)
            code = main(["--store", url, "show", *args])
        terminal.flush()
        return code, screen.getvalue(), capsys.readouterr().err

    code, screen, _ = shown("r", "3")
    assert code == 0
    assert screen.decode().endswith("ok\tdone\nnext\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mRED\\x00\\x08\\x08"
                                    "\\u202e\n"), screen
    code, screen, err = shown(f"artifact:{shot.artifact.hash}")  # an image: one line naming it
    assert code == 0, err
    assert screen.startswith(f"artifact:{shot.artifact.hash}: image/png".encode()), screen
    assert screen.count(b"\n") == 1 and b"--out FILE" in screen
    assert main(["--store", url, "show", "r", "3"]) == 0  # piped (captured): as stored
    assert capsys.readouterr().out.endswith(output + "\n")


RAW = f"{ESC}]0;PWN\x07{ESC}[31mRED\u202eLTR\u2028\x9b2J\x7f\U000e0041 全角"
"""A tool output's hostile characters: OSC and CSI escapes, a bidi override, a line separator,
the one-byte CSI U+009B, DEL and a tag character (past U+FFFF); the CJK text is harmless."""
_ESCAPES = {ord(c): (f"\\u{ord(c):04x}" if ord(c) < 0x10000 else "\\udb40\\udc41") for c in RAW
            if unicodedata.category(c) in ("Cc", "Cf", "Zl")}
"""Each of them as JSON spells it (U+E0041 as its surrogate pair)."""


def _screen(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
            ) -> tuple[int, str]:
    """``contextfold ARGS`` with a terminal as standard output: its exit code and what it shows."""
    code, screen = on_terminal(monkeypatch, *args)
    capsys.readouterr()
    return code, screen.decode()


def test_json_and_request_bodies_on_a_terminal_show_escapes_and_piped_stay_as_they_were(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``build``, ``replay``, ``audit --turn N --content`` and every ``--json`` wrote a tool output's
    U+202E and U+009B to the terminal raw (``json.dumps(..., ensure_ascii=False)``), where every
    text output shows them escaped. On a terminal they are now JSON escapes (the same JSON value;
    the CJK text stays as it is); piped, the output is byte for byte what it was."""
    from contextfold.api import open_store
    from contextfold.domain.events import (
        EvidenceRetrieved,
        GoalSet,
        ModelResponse,
        RunStarted,
        ToolCall,
        ToolResult,
        UserInput,
    )

    url = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(url) as s:
        run = s.run("r")
        run.append(RunStarted(agent="a", model="gpt-4o"), GoalSet(goal="fix " + RAW), UserInput("go " + RAW))
        run.build(provider="anthropic", window=20_000, reserve=2_000)
        run.append(ModelResponse(text="reply " + RAW, tool_calls=(
            ToolCall(call_id="c1", name="t", arguments=json.dumps({"a": RAW}, ensure_ascii=False)),)),
                   ToolResult(call_id="c1", content="out " + RAW),
                   EvidenceRetrieved(content="doc", source_ref="https://x/" + RAW), UserInput("next " + RAW))
        run.build(provider="anthropic", window=20_000, reserve=2_000)
    commands: dict[tuple[str, ...], str | None] = {  # the JSON each prints: all of its output
        ("build", "r", "--provider", "anthropic"): None, ("build", "r", "--json"): None,
        ("events", "r", "--json"): None, ("manifest", "r", "--json"): None, ("audit", "r", "--json"): None,
        ("audit", "r", "--turn", "2", "--json", "--content"): None,
        ("why", "r", "--turn", "2", "--json", "https://x/"): None,
        ("diff", "r", "1", "2", "--json"): None, ("replay", "r", "--turn", "2"): None,
        ("compact", "r", "--dry-run", "--json", "--keep-recent", "0"): None,
        ("audit", "r", "--turn", "2", "--content"): "as the model saw it:\n",  # or what follows this
    }
    for args, json_from in commands.items():
        code, shown = _screen(monkeypatch, capsys, "--store", url, *args)
        assert code == 0 and _hidden(shown) == [], (args, _hidden(shown))
        assert main(["--store", url, *args]) == 0
        piped = capsys.readouterr().out
        if args[0] == "build":  # each build makes a request of its own (its id differs)
            assert "\u202e" in piped and "\\u202e" in shown, args
            continue
        assert shown == piped.translate(_ESCAPES), args
        # diff's JSON was always ASCII; a mask stub quotes no content
        assert "\u202e" in piped or args[0] in ("diff", "compact"), args
        if json_from is not None:
            shown, piped = shown.split(json_from)[1], piped.split(json_from)[1]
        values = [[json.loads(line) for line in text.split("\n") if line] if args[0] == "events"
                  else json.loads(text) for text in (shown, piped)]
        assert values[0] == values[1], args  # the same JSON value
    assert "全角" in shown



def test_the_notes_of_a_folder_import_and_of_replay_show_escapes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A folder import's "skipped" note printed a file's name raw (ESC, BEL, U+202E: a file name
    holds any character but / and NUL), and ``replay --verify`` a record's builder."""
    folder = tmp_path / "traces"
    folder.mkdir()
    (folder / f"preds{ESC}]0;PWN\x07{ESC}[31mRED\u202e.json").write_text(json.dumps({"x": 1}))
    (folder / "ok.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["--store", url, "import", str(folder), "--run", "F"]) == 0
    out = capsys.readouterr().out
    assert _hidden(out) == [] and "preds\\x1b]0;PWN\\x07\\x1b[31mRED\\u202e.json" in out, out

    assert main(["--store", url, "build", "F/ok"]) == 0
    capsys.readouterr()
    assert main(["--store", url, "events", "F/ok", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for event in lines:
        if event["type"] == "context_built":
            event["builder"] = f"b{ESC}[31m\u202e"
            event["request_hash"] = event["manifest"]["request_hash"] = "0" * 64  # a mismatch, which
            # the builder note explains
    forged = tmp_path / "forged.jsonl"
    forged.write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert main(["--store", url, "import", str(forged), "--run", "g", "--format", "events"]) == 0
    capsys.readouterr()
    assert main(["--store", url, "replay", "g", "--turn", "1", "--verify"]) == 1
    err = capsys.readouterr().err
    assert _hidden(err) == [] and "note: recorded by b\\x1b[31m\\u202e, rebuilt by" in err, err


def test_an_integrity_failure_shows_the_escapes_of_the_stored_text_it_quotes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A tampered row whose chain hash was recomputed fails to parse, and the reason quotes its
    text: ``verify``'s FAILED line and ``audit``'s integrity line wrote its ESC and U+202E raw."""
    import sqlite3

    from contextfold.api import open_store
    from contextfold.domain.events import UserInput
    from contextfold.domain.log import chain_hash

    monkeypatch.delenv("CONTEXTFOLD_STORE", raising=False)
    db = tmp_path / "t.db"
    with open_store(f"sqlite:///{db}") as s:
        s.run("r").append(UserInput("hello"), UserInput("world"))
    con = sqlite3.connect(db)
    prev = con.execute("SELECT state FROM contextfold_events WHERE originator_version = 1").fetchone()[0][:64]
    body = b'{"content":[{"text":"w","type":"text\\u001b[2J\\u202e"}],"required":false,"type":"user_input"}'
    state = chain_hash("r", 2, prev.decode(), body).encode() + body
    con.execute("UPDATE contextfold_events SET state = ? WHERE originator_version = 2", (state,))
    con.commit()
    con.close()
    for command in (["verify", "r"], ["audit", "r"]):
        capsys.readouterr()
        assert main(["--store", f"sqlite:///{db}", *command]) == 3
        out = capsys.readouterr()
        shown = out.out + out.err
        assert "FAILED" in shown and "\\x1b[2J\\u202e" in shown, command
        assert not _hidden(shown), command
