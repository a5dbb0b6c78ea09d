"""A run's whole life as a state machine: what an agent runtime does to a run through the public
API, in any order, with the promises that tie the projections together checked after every step,
on SQLite and PostgreSQL.

Why beside ``test_random_runs`` (seeded walks, checked at the end) and the pure property tests
(generated logs folded in memory): a hypothesis state machine checks after every step, so the
first step that breaks a promise is the one reported, and it shrinks a failure to the shortest
sequence of steps that shows it. The rules are the runtime's moves: inputs, responses with
parallel calls, results in any order (a duplicate, one for an unknown call), lost and cancelled
calls, plans, goals, instructions, policies, evidence, memory, files read again with new content,
tools registered, compactions, live builds and rebuilds at any provider and window (windows too
small for the required content included), a store closed and opened again (a new process), an
export imported into a fresh store, hand-offs. The invariants, read through the library's own
readers after every step:

- the long-lived ``Run``'s incremental projection builds what a fresh handle folding the log
  from the start builds (same bytes, same manifest);
- every recorded build replays to its record (``Run.replay``, what ``replay --verify`` runs),
  also after the store was reopened and in the copy an export was imported into;
- every tool call in a request is answered once, by its result or, where the log holds none, by
  a recorded (or, previewed, planned) ``TOOL_RESULT_LOST``/cancellation, never a made-up one;
- the current user input is in the request; a request never exceeds its budget; a larger window
  keeps all a smaller one kept; the manifest's layers add up to its selected tokens.

Modest by default (a run of the suite); search wider with ``CONTEXTFOLD_MACHINE_EXAMPLES=200
CONTEXTFOLD_MACHINE_STEPS=60 pytest tests/integration/test_run_life_machine.py``.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from contextfold import (
    BuildResult,
    CompactionError,
    DuplicateToolCallError,
    DuplicateToolResultError,
    EvidenceRetrieved,
    FileRead,
    GoalSet,
    HandOff,
    InstructionSet,
    MemoryRecalled,
    ModelResponse,
    PlanStep,
    PlanUpdated,
    PolicySet,
    RenderError,
    RequiredContextExceedsBudgetError,
    Run,
    RunStarted,
    Store,
    ToolCall,
    ToolCallCancelled,
    ToolResult,
    ToolResultLost,
    ToolSpec,
    ToolsRegistered,
    UnknownToolCallError,
    UserInput,
    open_store,
)
from tests.cli_runner import cf
from tests.conftest import PG_URL, _pg_admin_exec
from tests.request_calls import calls_and_answers

PROVIDERS = ("neutral", "openai-chat", "openai-responses", "anthropic", "gemini")
WINDOWS = (150, 400, 1_000, 2_500, 6_000, 20_000, 128_000)
"""From windows the required content alone overflows (the typed error) to ones that hold all."""
WORDS = ("alpha", "beta", "error:", "FAILED", "Traceback", "```python", "def", "x():", "```",
         '{"a": [1, {"b": 3}]}', "é", "日本", "😀", "\n")
SIZES = (1, 6, 60, 400, 1_500)
EXAMPLES = int(os.environ.get("CONTEXTFOLD_MACHINE_EXAMPLES", "20"))
STEPS = int(os.environ.get("CONTEXTFOLD_MACHINE_STEPS", "25"))
ANSWERS = ("tool_result", "tool_result_lost", "tool_call_cancelled")
ID_SHAPES = ("c{}", "call_{}", "functions.get_weather:{}", "toolu_" + "x" * 70 + "{}", "fc/{}@a")
"""Call ids as models issue them: ones every provider takes, a Kimi-style one Anthropic refuses,
one too long for OpenAI, one with the ``/`` and ``@`` of OpenAI's free-form ids."""
T = TypeVar("T")
REACHED: Counter[str] = Counter()
"""What the machine's steps came to (a build recorded or refused, a compaction appended...): the
test checks that some build was recorded and replayed, so a change that made every build fail
is not a pass."""


def event(what: str) -> None:
    REACHED[what] += 1

texts = st.builds(lambda size, words: " ".join(words[i % len(words)] for i in range(size)),
                  st.sampled_from(SIZES), st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))


def _refused(action: Callable[[], T]) -> T | RequiredContextExceedsBudgetError | None:
    """``action()``, the typed budget error it raised, or None for a request with no message (a
    run holding only system content, which no provider takes)."""
    try:
        return action()
    except RequiredContextExceedsBudgetError as exc:
        assert exc.required_tokens > exc.budget, str(exc)  # the error carries what overflowed
        return exc
    except RenderError as exc:
        if "at least one" not in str(exc):
            raise
        return None


def request_tool_pairs(provider: str, body: dict[str, Any]) -> tuple[list[str], dict[str, list[str]]]:
    """The tool call ids of a rendered request in order, and each answered id's answers (as JSON)."""
    calls, answered = calls_and_answers(provider, body)
    answers: dict[str, list[str]] = {}
    for call_id, item in answered:
        answers.setdefault(call_id, []).append(json.dumps(item, ensure_ascii=False))
    return calls, answers


class RunLife(RuleBasedStateMachine):
    """One run per example, driven through ``contextfold``'s public API."""

    url: ClassVar[str]
    fresh_urls: ClassVar[list[Callable[[], str]]]
    """(In a list: a function held as a class attribute would be called as a method.)"""
    workdir: ClassVar[Path]

    def __init__(self) -> None:
        super().__init__()
        self.run_id = f"life-{uuid.uuid4().hex[:10]}"
        self.store: Store = open_store(self.url)
        self.run: Run = self.store.run(self.run_id)
        self.calls = 0
        self.open: list[str] = []  # calls no answer was appended for yet (a build may record one)
        self.answered: list[str] = []  # calls with a ToolResult
        self.closed: list[str] = []  # calls answered lost or cancelled, no late result yet
        self.tools = ["pytest", "read_file"]
        self.current_input: int | None = None  # the log position of the input a request answers
        self.replayed: set[tuple[int, int]] = set()  # (turn, record) replayed since the last reopen
        self.exported = False
        self.steps = 0

    def teardown(self) -> None:
        self.store.close()

    @initialize(model=st.sampled_from((None, "gpt-4o", "claude-sonnet-4-5")), text=texts)
    def start(self, model: str | None, text: str) -> None:
        self.append(RunStarted(agent="machine", model=model),
                    ToolsRegistered(tools=[ToolSpec(name=t, description=f"{t} tool") for t in self.tools]),
                    UserInput(text))

    # ------------------------------------------------------------ what the runtime appends

    def append(self, *events: Any) -> None:
        recorded = self.run.append(*events)
        self.steps += 1
        for rec in recorded:
            if rec.event.type == "user_input":
                self.current_input = rec.position
            elif rec.event.type == "model_response" or (rec.event.type == "hand_off" and rec.event.note):
                self.current_input = None  # (an answer or a note joins an earlier item: still current)

    @rule(text=texts, required=st.booleans())
    def user_input(self, text: str, required: bool) -> None:
        self.append(UserInput(text, required=required and len(text) < 200))

    @rule(text=texts, names=st.lists(st.sampled_from(("pytest", "read_file", "deploy", "unregistered")),
                                     max_size=3),
          shapes=st.lists(st.sampled_from(ID_SHAPES), min_size=3, max_size=3), reuse=st.integers(0, 20))
    def model_response(self, text: str, names: list[str], shapes: list[str], reuse: int = -1) -> None:
        """A response with parallel calls, ids of the shapes models issue; ``reuse`` picks an id an
        earlier call of the run had (gpt-4o reuses them): taken once that call is answered, refused
        while it is open (nothing written)."""
        calls = []
        for name, shape in zip(names, shapes, strict=False):
            self.calls += 1
            calls.append(ToolCall(call_id=shape.format(self.calls), name=name,
                                  arguments=json.dumps({"n": self.calls})))
        used = self.answered + self.closed + self.open
        if calls and 0 <= reuse < len(used):
            calls[0] = calls[0].model_copy(update={"call_id": used[reuse]})
            if used[reuse] in self.open or used[reuse] in [c.call_id for c in calls[1:]]:
                self._refused_append(DuplicateToolCallError, ModelResponse(text=text[:300], tool_calls=calls))
                return
            for ids in (self.answered, self.closed):  # the id is a new call's now
                while used[reuse] in ids:
                    ids.remove(used[reuse])
        self.append(ModelResponse(text=text[:300], tool_calls=calls))
        self.open += [c.call_id for c in calls]

    @rule(names=st.lists(st.sampled_from(("pytest", "read_file", "deploy")), min_size=1, max_size=3),
          order=st.permutations(range(3)), content=texts)
    def tool_round(self, names: list[str], order: list[int], content: str) -> None:
        """A response whose parallel calls are all answered, in any order: a closed group."""
        self.model_response("", names, ["c{}"] * 3)
        batch = self.open[-len(names):]
        for i in (i for i in order if i < len(batch)):
            self.append(ToolResult(call_id=batch[i], content=content if i == 0 else f"ok {i}", exit_code=0))
            self.open.remove(batch[i])
            self.answered.append(batch[i])

    @precondition(lambda self: bool(self.open))
    @rule(pick=st.integers(0, 2), content=texts, failed=st.booleans())
    def tool_result(self, pick: int, content: str, failed: bool) -> None:
        call_id = self.open[pick % len(self.open)]
        self.append(ToolResult(call_id=call_id, content=content, is_error=failed,
                               exit_code=1 if failed else 0))
        self.open.remove(call_id)
        self.answered.append(call_id)

    @precondition(lambda self: bool(self.answered))
    @rule(pick=st.integers(0, 5))
    def duplicate_result(self, pick: int) -> None:
        call_id = self.answered[pick % len(self.answered)]
        self._refused_append(DuplicateToolResultError, ToolResult(call_id=call_id, content="again"))

    @precondition(lambda self: bool(self.closed))
    @rule(pick=st.integers(0, 2), content=texts)
    def late_result(self, pick: int, content: str) -> None:
        """A result after its call was answered lost or cancelled: logged as a note, not an answer."""
        call_id = self.closed.pop(pick % len(self.closed))
        self.append(ToolResult(call_id=call_id, content=content))
        self.answered.append(call_id)  # a second one is a duplicate

    @rule()
    def unknown_result(self) -> None:
        self._refused_append(UnknownToolCallError, ToolResult(call_id="nobody-called-this", content="x"))

    @precondition(lambda self: bool(self.open))
    @rule(pick=st.integers(0, 2), cancel=st.booleans())
    def lost_or_cancelled(self, pick: int, cancel: bool) -> None:
        call_id = self.open[pick % len(self.open)]
        self.append(ToolCallCancelled(call_id=call_id, reason="user stopped it") if cancel
                    else ToolResultLost(call_id=call_id, reason="worker died"))
        self.open.remove(call_id)
        self.closed.append(call_id)

    def answers(self, planned: Iterable[str] = ()) -> dict[tuple[str, int], str | None]:
        """Each call of the log, (id, position of its response), with its answer's event type (the
        first: a later one is late), or None; ``planned``: a preview's repairs, answering too.
        Scoped as the store pairs them: an answer goes to the open call of its id."""
        scoped: dict[tuple[str, int], str | None] = {}
        open_at: dict[str, int] = {}
        for rec in self.run.events():
            if isinstance(rec.event, ModelResponse):
                for c in rec.event.tool_calls:
                    open_at[c.call_id] = rec.position
                    scoped[(c.call_id, rec.position)] = None
            elif rec.event.type in ANSWERS and rec.event.call_id in open_at:  # type: ignore[union-attr]
                scoped[(rec.event.call_id, open_at.pop(rec.event.call_id))] = rec.event.type  # type: ignore[union-attr]
        for repair in planned:
            kind, _, call_id = repair.partition(":")
            if call_id in open_at:
                scoped[(call_id, open_at.pop(call_id))] = kind
        return scoped

    def _refused_append(self, error: type[Exception], event: Any) -> None:
        version = self.run.version
        with pytest.raises(error):
            self.run.append(event)
        assert self.run.version == version  # nothing written

    @rule(steps=st.lists(st.sampled_from(("pending", "ready", "in_progress", "done")), min_size=1,
                         max_size=3))
    def plan(self, steps: list[str]) -> None:
        self.append(PlanUpdated(steps=[PlanStep(id=f"s{i}", title=f"step {i}", status=s,
                                                depends_on=(f"s{i - 1}",) if i else ())
                                       for i, s in enumerate(steps)]))

    @rule(kind=st.sampled_from(("goal", "instruction", "policy")), text=texts)
    def direction(self, kind: str, text: str) -> None:
        text = text[:600]
        if kind == "goal":
            self.append(GoalSet(goal=text, success_contract=("pytest -q exits 0",)))
        elif kind == "instruction":
            self.append(InstructionSet(text=text, source_ref="file://AGENTS.md"))
        else:
            self.append(PolicySet(text=text, pinned_tools=("pytest",)))

    @rule(kind=st.sampled_from(("evidence", "memory", "file")), text=texts, key=st.integers(0, 2))
    def retrieved(self, kind: str, text: str, key: int) -> None:
        if kind == "evidence":
            self.append(EvidenceRetrieved(content=text, source_ref=f"doc://{key}", semantic_key=f"k{key}"))
        elif kind == "memory":
            self.append(MemoryRecalled(memory_id=f"m{key}", content=text, source_ref=f"mem://{key}"))
        else:  # the same path read again with other content: the newer supersedes it
            self.append(FileRead(path=f"src/f{key}.py", content=text, revision=f"r{self.steps}"))

    @rule(names=st.lists(st.sampled_from(("deploy", "search", "lint", "fmt")), min_size=1, max_size=3,
                         unique=True))
    def register_tools(self, names: list[str]) -> None:
        self.append(ToolsRegistered(tools=[ToolSpec(name=n, description=f"{n} things") for n in names]))

    @rule(mode=st.sampled_from(("hand_off", "resume")), note=st.sampled_from(("", "carry on with the fix")))
    def hand_off(self, mode: str, note: str) -> None:
        self.append(HandOff(mode=mode, from_agent="a", to_agent="b", note=note))

    # ------------------------------------------------------------ what the runtime asks for

    @rule(strategy=st.sampled_from(("mask", "summary")), window=st.sampled_from((None, *WINDOWS)),
          keep_recent=st.integers(0, 2))
    def compact(self, strategy: str, window: int | None, keep_recent: int) -> None:
        version = self.run.version
        got: object
        try:
            got = _refused(lambda: self.run.compact(strategy, window=window, keep_recent=keep_recent))  # type: ignore[arg-type]
        except CompactionError as exc:  # a summary the last build's window could not hold: refused
            assert "nothing was written" in str(exc), str(exc)
            got = exc
        event(f"compact {strategy}: {type(got).__name__} {len(getattr(got, 'positions', ())) > 0}")
        if isinstance(got, RequiredContextExceedsBudgetError | CompactionError):
            assert self.run.version == version  # nothing appended
        self._sync_open()
        self.steps += 1

    @rule(provider=st.sampled_from(PROVIDERS), window=st.sampled_from(WINDOWS))
    def build(self, provider: str, window: int) -> None:
        version, turn = self.run.version, self.run.next_turn()
        before = len(self.run.records(turn))
        got = _refused(lambda: self.run.build(provider, window=window))
        event(f"build: {type(got).__name__}")
        self.steps += 1
        if not isinstance(got, BuildResult):
            assert self.run.version == version  # refused: no record, no recovery event
            return
        records = self.run.records(turn)
        assert len(records) == before + 1
        assert records[-1].request_hash == got.manifest.request_hash
        self.check_request(got, preview=False)
        self._sync_open()

    def _sync_open(self) -> None:
        """Calls a build or compaction recorded lost or cancelled leave the open ones."""
        newest: dict[str, str | None] = {}  # each id's newest call, answered or not
        for (call_id, _), answer in sorted(self.answers().items(), key=lambda item: item[0][1]):
            newest[call_id] = answer
        answered = {call_id for call_id, answer in newest.items() if answer is not None}
        self.closed += [c for c in self.open if c in answered]
        self.open = [c for c in self.open if c not in answered]

    @precondition(lambda self: self.run.next_turn() > 1)
    @rule(pick=st.integers(1, 30), provider=st.sampled_from(PROVIDERS))
    def rebuild(self, pick: int, provider: str) -> None:
        turn = 1 + pick % (self.run.next_turn() - 1)
        records = self.run.records(turn)
        if records:  # rebuilt as recorded
            got = _refused(lambda: self.run.build(turn=turn))
            assert isinstance(got, BuildResult)
            assert got.manifest.request_hash == records[0].request_hash
        else:  # recorded, marked as a rebuild, unless it does not fit
            version = self.run.version
            got = _refused(lambda: self.run.build(provider, turn=turn))
            if not isinstance(got, BuildResult):
                assert self.run.version == version
        self.steps += 1

    @rule()
    def reopen(self) -> None:
        """A new process: the store closed, and opened again from its URL alone."""
        self.store.close()
        self.store = open_store(self.url)
        self.run = self.store.run(self.run_id)
        self.replayed.clear()
        self.check_replays(self.run)

    @precondition(lambda self: not self.exported)  # once a run: a fresh store is costly to make
    @rule()
    def export_import(self) -> None:
        """``events --json --with-artifacts`` imported into a fresh store: the same run there."""
        self.exported = True
        path = self.workdir / f"{self.run_id}-{self.steps}.jsonl"
        exported = cf("--store", self.url, "events", self.run_id, "--json", "--with-artifacts",
                      cwd=self.workdir)
        assert exported.returncode == 0, exported.stderr
        path.write_text(exported.stdout, encoding="utf-8")
        copy_url = self.fresh_urls[0]()
        imported = cf("--store", copy_url, "import", str(path), "--run", self.run_id, "--format", "events",
                      cwd=self.workdir)
        assert imported.returncode == 0, imported.stderr
        with open_store(copy_url) as copy:
            there = copy.run(self.run_id)
            assert there.verify().ok
            assert [r.hash for r in there.events()] == [r.hash for r in self.run.events()]
            self.check_replays(there, done=set())
            for provider in PROVIDERS[::2]:
                here_built = _refused(lambda: self.run.preview(provider, window=20_000))  # noqa: B023
                there_built = _refused(lambda: there.preview(provider, window=20_000))  # noqa: B023
                assert _same(here_built, there_built), provider

    # ------------------------------------------------------------ the promises

    def check_replays(self, run: Run, done: set[tuple[int, int]] | None = None) -> None:
        """Every record of every turn replays to its hashes (each once per store opened)."""
        done = self.replayed if done is None else done
        count: Counter[int] = Counter()
        for rec in run.events():
            if rec.event.type == "context_built":
                count[rec.event.turn] += 1
                turn, k = rec.event.turn, count[rec.event.turn]
                if (turn, k) not in done:
                    report = run.replay(turn, record=k)
                    assert report.ok, (turn, k, report.differences)
                    event("replayed")
                    done.add((turn, k))

    @invariant()
    def recorded_turns_replay(self) -> None:
        self.check_replays(self.run)

    @invariant()
    def incremental_build_is_a_fresh_fold(self) -> None:
        provider = PROVIDERS[self.steps % len(PROVIDERS)]
        small, large = WINDOWS[self.steps % (len(WINDOWS) - 1)], WINDOWS[self.steps % (len(WINDOWS) - 1) + 1]
        version = self.run.version
        here = _refused(lambda: self.run.preview(provider, window=small))
        event(f"preview: {type(here).__name__}")
        fresh = _refused(lambda: self.store.run(self.run_id).preview(provider, window=small))
        assert _same(here, fresh), (provider, small)
        wider = _refused(lambda: self.run.preview(provider, window=large))
        assert self.run.version == version  # previews write nothing
        if isinstance(here, BuildResult):
            self.check_request(here, preview=True)
            assert isinstance(wider, BuildResult), (provider, large, wider)
            kept = {f.id for f in here.manifest.fragments}
            shown = {f.id for f in wider.manifest.fragments}
            twins = {x.id for x in wider.manifest.excluded_items  # its very text kept (``twins``)
                     if x.reason == "duplicate" and x.replaced_by in shown}
            dropped = kept - shown - twins
            assert not dropped, (provider, small, large, sorted(dropped))
        if isinstance(wider, BuildResult):
            self.check_request(wider, preview=True)

    def check_request(self, built: BuildResult, *, preview: bool) -> None:
        m = built.manifest
        assert m.selected_tokens <= m.budget_tokens, (m.selected_tokens, m.budget_tokens)
        assert m.selected_tokens == sum(f.tokens for f in m.fragments) + m.tool_tokens + m.overhead_tokens
        assert m.selected_tokens == sum(m.layer_tokens.values()) + 3  # the reply's priming
        for layer, name in enumerate(m.layer_tokens, start=1):
            if name != "tools":
                assert sum(f.tokens for f in m.fragments if f.layer == layer) <= m.layer_tokens[name]
        calls, answers = request_tool_pairs(m.provider, json.loads(built.body_bytes))
        if m.provider not in ("neutral", "openai-chat"):  # (these take a reused id: answers go by place)
            assert len(calls) == len(set(calls)), calls
        assert set(answers) == set(calls), (calls, sorted(answers))
        assert all(len(a) == calls.count(c) for c, a in answers.items()), answers
        scoped = self.answers(m.repairs if preview else ())
        for shown in set(calls):
            found = [key for key in scoped if _shows(shown, *key)]
            assert found, (shown, m.repairs)  # a call the log has
            if len(found) == 1:
                assert scoped[found[0]] is not None, (found, m.repairs)  # answered, or recorded as not
                if scoped[found[0]] != "tool_result":  # never a made-up success
                    text = answers[shown][0].upper()
                    assert "LOST" in text or "CANCEL" in text, answers[shown]
        if self.current_input is not None:  # the input, or a summary that covers it (and quotes it)
            pos = self.current_input
            assert f"e{pos}" in {f.id for f in m.fragments} or any(
                _covers(f.source_ref, self.run_id, pos) for f in m.fragments), (pos, m.fragments)


def _shows(shown: str, call_id: str, position: int) -> bool:
    """Whether a request's ``shown`` id is the call ``call_id`` issued at ``position``: its logged
    id, or its alias (``projections.call_ids``: the id's word characters, shortened, ``_`` and
    the position, maybe ``_<n>``)."""
    if shown == call_id:
        return True
    match = re.fullmatch(rf"(.+)_{position}(?:_\d+)?", shown)
    return match is not None and re.sub(r"[^A-Za-z0-9_-]+", "_", call_id).startswith(match.group(1)[:8])


def _covers(source_ref: str, run_id: str, position: int) -> bool:
    """Whether ``source_ref`` is a summary's cover (``events://RUN/A-B``) holding ``position``."""
    prefix = f"events://{run_id}/"
    if not source_ref.startswith(prefix):
        return False
    first, _, last = source_ref[len(prefix):].partition("-")
    return int(first) <= position <= int(last)


def _same(a: object, b: object) -> bool:
    if isinstance(a, BuildResult) and isinstance(b, BuildResult):
        return a.body_bytes == b.body_bytes and a.manifest == b.manifest
    return type(a) is type(b) and str(a) == str(b)


@pytest.fixture
def fresh_urls(store_url: str, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """URLs of empty stores on the backend of ``store_url``, removed afterwards."""
    schemas: list[str] = []

    def fresh() -> str:
        if store_url.startswith("sqlite"):
            return f"sqlite:///{tmp_path / f'copy-{uuid.uuid4().hex[:8]}.db'}"
        schemas.append(f"cf_test_{uuid.uuid4().hex[:12]}")
        return f"{PG_URL}{'&' if '?' in PG_URL else '?'}schema={schemas[-1]}"
    yield fresh
    for schema in schemas:
        _pg_admin_exec(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_run_life_keeps_its_projections_in_agreement(store_url: str, fresh_urls: Callable[[], str],
                                                        tmp_path: Path) -> None:
    machine = type("Life", (RunLife,), {"url": store_url, "fresh_urls": [fresh_urls],
                                        "workdir": tmp_path})
    REACHED.clear()
    run_state_machine_as_test(machine, settings=settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, database=None,
        suppress_health_check=list(HealthCheck)))
    print(sorted(REACHED.items()))
    assert REACHED["build: BuildResult"] and REACHED["replayed"], REACHED  # not a run of refusals
