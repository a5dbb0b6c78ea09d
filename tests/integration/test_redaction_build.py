"""Builds of a run whose tool output, files, evidence, memory and instructions carry the secrets
corpus: zero leaks in every provider's request and in the recorded manifest; look-alikes survive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextfold.api import open_store
from contextfold.domain.errors import ArtifactNotFoundError
from contextfold.domain.events import (
    ContextBuilt,
    EvidenceRetrieved,
    FileRead,
    GoalSet,
    InstructionSet,
    MemoryRecalled,
    ModelResponse,
    PolicySet,
    ToolCall,
    ToolResult,
    UserInput,
)
from contextfold.domain.fragments import ToolCallBlock
from contextfold.domain.manifest import BuildConfig
from contextfold.projections.builder import build_context
from contextfold.projections.render.validate import PROVIDERS
from tests.unit.test_redact import LOOKALIKES, SECRETS, _line

CORPUS = "\n".join(_line(t, s) for t, s, _ in SECRETS)
LOOKS = "\n".join(LOOKALIKES)
# every secret, and every 12-character window of it: no recognisable piece may survive
NEEDLES = sorted({s for _, s, _ in SECRETS} | {s[i:i + 12] for _, s, _ in SECRETS
                                                for i in range(0, max(1, len(s) - 11), 6)
                                                if "\n" not in s[i:i + 12] and "-----" not in s[i:i + 12]
                                                and "PRIVATE" not in s[i:i + 12]}
                 - {w for w in (s[i:i + 12] for _, s, _ in SECRETS for i in range(len(s))) if w in LOOKS})
"""Windows shared with a look-alike (a publishable key, a bare JWT header) are not evidence of a leak."""


def _events() -> list[object]:
    big = ("INFO step ok\n" * 8000) + CORPUS + "\n" + LOOKS  # > artifact threshold: comes from an artifact
    return [
        PolicySet(text="You are a careful coding agent."),
        InstructionSet(text="AGENTS.md\n" + CORPUS + "\n" + LOOKS, source_ref="file://AGENTS.md@abc"),
        GoalSet(goal="Rotate the leaked credentials"),
        UserInput("Find every credential in the repo"),
        ModelResponse(tool_calls=(ToolCall(call_id="c1", name="grep", arguments='{"q": "key"}'),
                                  ToolCall(call_id="c2", name="cat", arguments='{"f": "app.log"}'))),
        ToolResult(call_id="c1", content=CORPUS + "\n" + LOOKS),
        ToolResult(call_id="c2", content=big, is_error=True, exit_code=1),
        FileRead(path=".env", content=CORPUS, revision="abc"),
        EvidenceRetrieved(content="wiki page\n" + CORPUS + "\n" + LOOKS, source_ref="https://wiki/creds"),
        MemoryRecalled(memory_id="m1", content="remembered: " + CORPUS, source_ref="memory://m1"),
        UserInput("Now list what you found"),
    ]


@pytest.fixture(scope="module")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('redact') / 'runs.db'}"
    with open_store(url) as store:
        store.run("leaky").append(*_events())  # type: ignore[arg-type]
    return url


def _assert_no_leak(blob: str, where: str) -> None:
    leaked = [n for n in NEEDLES if n in blob]
    assert not leaked, f"{where} leaks {leaked[:5]}"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_secret_reaches_any_provider_request_or_manifest(store_url: str, provider: str) -> None:
    with open_store(store_url) as store:
        run = store.run("leaky")
        built = run.build(provider=provider, window=400_000, reserve=8_000)
        request = json.dumps(built.request, ensure_ascii=False)
        _assert_no_leak(request, f"{provider} request")
        _assert_no_leak(built.manifest.model_dump_json(), "manifest")
        recorded = [r.event for r in run.events() if isinstance(r.event, ContextBuilt)][-1]
        _assert_no_leak(json.dumps(recorded.model_dump(mode="json")), "context_built event")
        for frag in built.fragments:
            _assert_no_leak(frag.model_dump_json(), f"fragment {frag.id}")
        # the raw stays in the log
        assert any("AKIAZ7Q3B4N5K6L7M8P9" in json.dumps(r.event.model_dump(mode="json"))
                   for r in run.events())
        # look-alikes are not false positives: each survives in the request
        false_positives = [x for x in LOOKALIKES
                           if json.dumps(x, ensure_ascii=False)[1:-1] not in request]
        assert false_positives == [], f"false positives: {false_positives}"
        rules = {r.rule for r in built.manifest.redactions}
        assert rules == {rule for _, _, rule in SECRETS}
        ids = {r.fragment_id for r in built.manifest.redactions}
        kinds = {f.kind for f in built.manifest.fragments if f.id in ids}
        assert kinds == {"tool_result", "evidence", "memory", "instruction"}


def test_manifest_records_where_and_why_but_never_content(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("leaky")
        built = run.build(provider="anthropic", window=400_000, reserve=8_000, record=False)
        manifest = built.manifest.model_dump_json()
        for frag in built.fragments:  # no fragment text of any length > 40 appears in the manifest
            for block in frag.content:
                text = getattr(block, "text", "")
                for line in text.splitlines():
                    if len(line) > 40:
                        assert line not in manifest, line
        state = run.state()
        by_id = {f.id: f for f in built.manifest.fragments}
        for rec in built.manifest.redactions:
            assert rec.fragment_id in by_id and rec.end > rec.start
            frag = state.entries[rec.fragment_id].fragment
            raw = "\n".join(getattr(b, "text", "") for b in frag.content)
            if not any(getattr(b, "artifact", None) for b in frag.content):
                original = raw[rec.start:rec.end]
                assert original in {s for _, s, _ in SECRETS} or any(s in original for _, s, _ in SECRETS)


def test_stable_prefix_with_redacted_instructions_is_stable(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("leaky")
        a = run.build(provider="anthropic", window=400_000, reserve=8_000, record=False)
        b = run.build(provider="anthropic", window=400_000, reserve=8_000, record=False)
        assert a.manifest.cache_key == b.manifest.cache_key
        assert a.manifest.request_hash == b.manifest.request_hash


def test_redaction_is_configurable(store_url: str, tmp_path: Path) -> None:
    with open_store(store_url) as store:
        run = store.run("leaky")
        off = run.build(config=BuildConfig(provider="anthropic", window=400_000, redact=False), record=False)
        assert "AKIAZ7Q3B4N5K6L7M8P9" in json.dumps(off.request) and not off.manifest.redactions
        cfg = BuildConfig(provider="anthropic", window=400_000,
                          redact_disabled_rules=("aws_access_key_id", "secret_assignment",
                                                 "high_entropy_assignment"),
                          redact_allow=(r"Tr0ub4dor&3xyz",))
        some = run.build(config=cfg, record=False)
        request = json.dumps(some.request)
        assert "AKIAZ7Q3B4N5K6L7M8P9" in request and "Tr0ub4dor&3xyz" in request
        assert "hunter2hunter2" in request  # its rule is disabled
        assert "ghp_4fT9kLm2Qx7Rv1Zp8Wb3Nc6Yd0Hs5Jg2Ka9E" not in request


def test_tight_budget_never_leaves_half_a_private_key(store_url: str) -> None:
    with open_store(store_url) as store:
        run = store.run("leaky")
        for window in (3_000, 6_000, 12_000):
            built = run.build(provider="openai-chat", window=window, reserve=1_000, record=False)
            _assert_no_leak(json.dumps(built.request), f"window {window}")
            assert built.manifest.selected_tokens <= built.manifest.budget_tokens


@pytest.mark.parametrize("window", [20_000, 30_000])
def test_a_cut_fragment_keeps_its_redaction_records_build_after_build(store_url: str, window: int) -> None:
    """A build remembers its cuts for the next one; the next build of the same state must still
    redact the cut fragment and record it: the same manifest, not one without its redactions."""
    with open_store(store_url) as store:
        state = store.run("leaky").state()
        config = BuildConfig(provider="neutral", window=window, reserve=1_000)
        first = build_context(state, config, load_text=store.cited_text)
        again = build_context(state, config, load_text=store.cited_text)
        assert first.manifest.truncations, "the window is meant to cut a tool result"
        cut = {t.id for t in first.manifest.truncations}
        assert cut & {r.fragment_id for r in first.manifest.redactions}
        assert again.manifest == first.manifest


def test_a_build_given_no_load_text_refuses_a_stored_text_instead_of_sending_its_preview(
        tmp_path: Path) -> None:
    """``build_context`` without the ``load_text`` port, over a fresh state holding a stored
    output (the 2 MB log here), read its logged preview as the whole text: the first 2 KB sent
    uncut with no truncation record, a request unlike the one ``Run.build`` makes of the same
    state, and unlike its own once an earlier build had left the text in the state's memo (this
    file's cut test passed only after the other tests ran). It refuses now, naming the artifact."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    # a text no other test built: the process's memos, keyed by content, would supply it unread
    big = "".join(f"INFO {tmp_path.name} step {i} ok\n" for i in range(8000)) + "error: disk full\n"
    with open_store(url) as store:
        store.run("stored").append(
            UserInput("Run the build"),
            ModelResponse(tool_calls=(ToolCall(call_id="c1", name="make", arguments="{}"),)),
            ToolResult(call_id="c1", content=big, is_error=True, exit_code=2),
            UserInput("Why did it fail?"))
    config = BuildConfig(provider="neutral", window=20_000, reserve=1_000)
    with open_store(url) as store:
        state = store.run("stored").state()
        with pytest.raises(ArtifactNotFoundError, match="no load_text"):
            build_context(state, config)
        ported = build_context(state, config, load_text=store.cited_text).manifest
        assert "e3" in {t.id for t in ported.truncations}
    with open_store(url) as store:
        built = store.run("stored").build(config=config, record=False).manifest
        assert built.request_hash == ported.request_hash


def test_a_stored_result_whose_placeholders_outgrow_its_secrets_is_shown_whole_where_it_fits(
        tmp_path: Path) -> None:
    """A stored (artifact-backed) result is redacted when a build needs its text; 120 short
    passwords' placeholders make it longer than logged. It was priced as logged and cut back to
    that at every window (first without a truncation record, then with one); it is priced as
    shown now (``redacted_units``), so a window that holds it shows it whole, counted as sent.
    Where it must be cut: ``test_redacted_prices``."""
    store = open_store(f"sqlite:///{tmp_path / 'r.db'}")
    run = store.run("r")
    run.append(UserInput("show the config"))
    run.append(ModelResponse(tool_calls=[ToolCall(call_id="c1", name="cat", arguments='{"path": "a"}')]))
    run.append(ToolResult(call_id="c1", content="\n".join(f"svc{i}.password=pw{i}x" for i in range(1, 121))))
    logged = run.state().fragment("e3").token_count
    sizes = set()
    for window in (8_000, 20_000, 200_000):
        built = run.preview(provider="anthropic", window=window)
        line = next(f for f in built.manifest.fragments if f.id == "e3")
        assert not line.truncated and not built.manifest.truncations
        assert "pw7x" not in built.body and "[REDACTED" in built.body
        assert all(f"svc{i}.password=[REDACTED" in built.body for i in range(1, 121))
        assert line.tokens > logged
        assert built.manifest.selected_tokens <= built.manifest.budget_tokens
        sizes.add(line.tokens)
    assert len(sizes) == 1  # the same whatever the window
    store.close()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_model_reply_beside_its_calls_is_redacted_in_text_and_arguments(tmp_path: Path, provider: str
                                                                         ) -> None:
    """A model copies what it read into its calls: the reply's text and its calls' arguments
    reach every later request. Both were sent as logged while the manifest said the reply was
    redacted (the layout read the calls from the log). Arguments stay the JSON they were."""
    calls = (ToolCall(call_id="c1", name="sh", arguments=json.dumps({"cmd": CORPUS, "n": 1})),
             ToolCall(call_id="c2", name="sh", arguments="raw " + CORPUS))
    with open_store(f"sqlite:///{tmp_path / 'runs.db'}") as store:
        run = store.run("chatty")
        run.append(UserInput("rotate them"), ModelResponse(text="I found:\n" + CORPUS, tool_calls=calls),
                   ToolResult(call_id="c1", content="done"), ToolResult(call_id="c2", content="done"),
                   UserInput("next"))
        built = run.build(provider=provider, window=400_000, reserve=8_000)
        _assert_no_leak(json.dumps(built.request, ensure_ascii=False), f"{provider} request")
        for frag in built.fragments:
            _assert_no_leak(frag.model_dump_json(), f"fragment {frag.id}")
        head = next(f for f in built.fragments if f.id == "e2")
        shown = [b.arguments for b in head.content if isinstance(b, ToolCallBlock)]
        assert json.loads(shown[0])["n"] == 1 and shown[1].startswith("raw ")
        records = [r for r in built.manifest.redactions if r.fragment_id == "e2"]
        whole = "\n".join(["I found:\n" + CORPUS, *(c.arguments for c in calls)])
        assert {r.rule for r in records} == {rule for _, _, rule in SECRETS}
        forms = [form for _, s, _ in SECRETS for form in (s, json.dumps(s)[1:-1])]  # as the JSON holds it
        assert all(any(f in whole[r.start:r.end] or whole[r.start:r.end] in f for f in forms)
                   for r in records)
        # priced as shown: the reply's line counts the placeholders, not the secrets
        line = next(f for f in built.manifest.fragments if f.id == "e2")
        assert line.tokens < run.state().entries["e2"].token_count
