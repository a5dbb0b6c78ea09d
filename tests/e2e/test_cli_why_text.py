"""``why RUN --turn N TEXT``: a constraint asked about by its words, not by a fragment id.

The seed (9) has the manifest answer "why was this constraint lost"; a person asking it knows the
constraint's words, not that it was logged as e4. ``why`` matched ids, tool names and sources only,
and said of the words "it was not part of the projection at that turn" when the constraint was part
of it and had been dropped for room."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.cli import main
from contextfold.domain.events import ModelResponse, ToolCall, ToolResult, UserInput
from contextfold.domain.manifest import ContextManifest

RULE = "Never touch the Payments table directly."


def _cf(capsys: pytest.CaptureFixture[str], store: str, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["--store", store, *args])
    return code, capsys.readouterr().out


def _store(tmp_path: Path) -> str:
    """Run ``r``: a task, the rule (event 2), 80 steps of long output, and the next request built
    at a small window (turn 81): the rule is dropped for room."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(store) as s:
        run = s.run("r")
        run.append(UserInput("Migrate the billing schema."))
        for k in range(80):
            if k == 0:
                run.append(UserInput(RULE))
            run.append(ModelResponse(tool_calls=(ToolCall(call_id=f"c{k}", name="sh", arguments="{}"),)),
                       ToolResult(call_id=f"c{k}", content=f"step {k} output\n" * 150))
        run.append(UserInput("status?"))
        run.build("openai-chat", window=6_000, reserve=1_000)
    return store


def test_why_finds_a_dropped_constraint_by_its_words(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    code, out = _cf(capsys, store, "why", "r", "--turn", "81", "payments table")
    assert code == 0, out
    assert "DROPPED e2 (user_input" in out and "low_priority" in out, out
    assert "not part of the projection" not in out
    assert "matches 'payments table': the fragments whose logged text holds it" in out  # said how
    code, out = _cf(capsys, store, "why", "r", "--turn", "81", "payments table", "--json")
    data = json.loads(out)
    assert code == 0 and [(m["id"], m["verdict"], m["reason"]) for m in data["matches"]] == [
        ("e2", "dropped", "low_priority")]
    assert data["matches"][0]["matched"] == "text of event 2"


def test_words_kept_in_the_request_are_found_as_kept(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    code, out = _cf(capsys, store, "why", "r", "--turn", "81", "STATUS?")  # any case
    assert code == 0 and "KEPT    e163 (user_input" in out, out


def test_words_no_event_holds_are_still_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    code, out = _cf(capsys, store, "why", "r", "--turn", "81", "no such words anywhere")
    assert code == 1 and "nothing in turn 81's manifest matches" in out
    assert "nor does any logged text" in out, out


def test_words_a_summary_took_name_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _store(tmp_path)
    with open_store(store) as s:
        run = s.run("r")
        assert run.compact("summary", keep_recent=1).events
        run.build("openai-chat", window=6_000, reserve=1_000)
    code, out = _cf(capsys, store, "why", "r", "--turn", "81", "--record", "last", "payments table")
    assert code == 0, out
    assert "COMPACTED e2 (user_input): e2 was compacted: summarized: e165 covers events 1-160" in out, out
    assert "KEPT    e165 (history" in out  # the summary quotes the rule


def test_words_json_escapes_in_the_log_are_found_as_written(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """An event's JSON spells a quote or a line break as an escape: words holding one are found
    in the text as the user wrote it, not in its JSON."""
    store = f"sqlite:///{tmp_path / 's.db'}"
    with open_store(store) as s:
        run = s.run("r")
        run.append(UserInput('Reply "LGTM" only when\nall checks pass.'), ModelResponse(text="Noted."),
                   UserInput("go"))
        run.build("openai-chat", window=8_000)
    for words in ('reply "lgtm"', "when\nall checks"):
        code, out = _cf(capsys, store, "why", "r", "--turn", "2", words)
        assert code == 0 and "KEPT    e1 (user_input" in out, (words, out)


def test_nothing_found_is_a_value_not_a_message(tmp_path: Path) -> None:
    """``why`` chose the text search by comparing ``_not_found``'s message with ``_nothing``'s:
    a reworded message, or one naming the query differently, silently turned the search off.
    ``_not_found`` says None when it has nothing to add (no position, no compaction)."""
    from contextfold.cli_why import _not_found, _nothing

    store = _store(tmp_path)
    with open_store(store) as s:
        run = s.run("r")
        manifest = ContextManifest.model_validate(run.records(81)[0].manifest)
        assert _not_found(run, manifest, "payments table") is None
        assert _not_found(run, manifest, "c999") is None  # no such call: nothing to add either
        said = _not_found(run, manifest, "e9999")  # a position the log never held: said so
        assert said is not None and "has no position 9999" in said
        assert said != _nothing(manifest, "e9999")


def test_the_text_search_dumps_each_event_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_by_text`` dumped an event's JSON to test for the words, then dumped it again, as a
    dict, on a hit: twice the serialization for each event that holds them (on a 10,000-event
    run, every tool result that quotes a common word)."""
    from contextfold.cli_why import _by_text
    from contextfold.domain.event_values import FrozenModel
    from contextfold.domain.events import _Event

    store = _store(tmp_path)
    dumps: list[str] = []
    for name in ("model_dump", "model_dump_json"):
        original = getattr(FrozenModel, name)

        def counted(self: FrozenModel, *args: object, _original: object = original, _name: str = name,
                    **kwargs: object) -> object:
            if isinstance(self, _Event):
                dumps.append(_name)
            return _original(self, *args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(FrozenModel, name, counted)
    with open_store(store) as s:
        run = s.run("r")
        manifest = ContextManifest.model_validate(run.records(81)[0].manifest)
        dumps.clear()
        found = _by_text(run, manifest, "output")  # every tool result holds it: 80 hits
    assert len(found) >= 80
    read = manifest.log_version  # every event the build folded, none a record
    assert len(dumps) <= read, (len(dumps), read)
