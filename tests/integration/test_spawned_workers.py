"""contextfold in worker processes started by ``spawn`` and ``forkserver``.

``spawn`` is the start method of macOS and Windows, ``forkserver`` Linux's default from Python
3.14: a worker is a fresh interpreter, and what crosses to it or back is pickled (a
``ProcessPoolExecutor``'s arguments, results and errors). What a user can rely on: the events,
build settings, results, manifests and replay reports pickle equal; every error a worker raises
reaches the parent as itself; a store or run handle is refused where it is pickled, with the fix
named (open the store in the worker by URL); workers sharing a run by URL lose no event and
record each build once. One pool of two workers per start method, shared by the module's tests:
a start costs ~0.5-1 s."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor

import pytest

import contextfold
import contextfold.domain.errors as errors
from contextfold import (
    BuildConfig,
    ConcurrencyConflictError,
    ContextBuilt,
    HandleNotPicklableError,
    ModelResponse,
    RecordNotFoundError,
    RequiredContextExceedsBudgetError,
    RunNotFoundError,
    ToolCall,
    ToolResult,
    UnknownToolCallError,
    UserInput,
)
from tests.process_workers import (
    append_and_build,
    child_facts,
    echo,
    fail_on_store,
    made_error,
    one_of_every_event,
    raise_error,
    return_handle,
    start_worker,
)

METHODS = ("spawn", "forkserver")
WAIT = 120.0
"""Seconds a task may take: a worker's start, its import of the package and a few builds."""


@pytest.fixture(scope="module")
def pools() -> Iterator[dict[str, ProcessPoolExecutor]]:
    made = {method: ProcessPoolExecutor(2, mp_context=mp.get_context(method), initializer=start_worker,
                                        initargs=({"CONTEXTFOLD_MEMO_MB": "48"},))
            for method in METHODS}
    try:
        yield made
    finally:
        for pool in made.values():
            pool.shutdown(cancel_futures=True)


def _run_with_a_long_output(url: str) -> tuple[contextfold.Store, contextfold.Run]:
    store = contextfold.open_store(url)
    run = store.run(f"r-{uuid.uuid4().hex[:8]}")
    run.append(UserInput("Fix the failing test"))
    run.append(ModelResponse(tool_calls=[ToolCall(call_id="c1", name="pytest", arguments="{}")]))
    run.append(ToolResult(call_id="c1", content="FAILED test_x.py::test_y - assert 1 == 2\n" * 200,
                          is_error=True, exit_code=1))
    return store, run


@pytest.mark.parametrize("method", METHODS)
def test_every_error_raised_in_a_worker_reaches_the_parent_as_itself(
        pools: dict[str, ProcessPoolExecutor], method: str) -> None:
    """Pickle's default remade ours as ``cls(message)``: the parent got a BrokenProcessPool (and
    the pool was dead) for an error with fields, a message wrapped in itself for the others."""
    futures = {name: pools[method].submit(raise_error, name) for name in errors.__all__}
    for name, future in futures.items():
        err = future.exception(WAIT)
        expected = made_error(name)
        assert type(err) is type(expected), (name, err)
        assert str(err) == str(expected)
        assert {k: v for k, v in vars(err).items() if k != "__notes__"} == \
            {k: v for k, v in vars(expected).items() if k != "__notes__"}
        assert getattr(err, "__notes__", None) == ["a note added in the worker"]


@pytest.mark.parametrize(("what", "error", "fields"), [
    ("stale", ConcurrencyConflictError, {"expected_version": 1}),
    ("unknown call", UnknownToolCallError, {"call_id": "never-issued"}),
    ("no record", RecordNotFoundError, {"turn": 2, "count": 0}),
    ("no run", RunNotFoundError, {}),
    ("over budget", RequiredContextExceedsBudgetError, {}),
])
def test_a_store_operation_failing_in_a_spawned_worker_is_typed_in_the_parent(
        pools: dict[str, ProcessPoolExecutor], store_url: str, what: str, error: type[Exception],
        fields: dict[str, object]) -> None:
    store, run = _run_with_a_long_output(store_url)
    with store:
        err = pools["spawn"].submit(fail_on_store, store_url, run.run_id, what).exception(WAIT)
        assert type(err) is error, err
        assert {k: getattr(err, k) for k in fields} == fields
        assert store.run(run.run_id).version == 3 + (what == "over budget")  # nothing else written


def test_what_a_worker_is_sent_and_returns_pickles_equal(
        pools: dict[str, ProcessPoolExecutor], store_url: str) -> None:
    """Every event type, the events as read, a build's settings, its result (a long tool output
    in it: the result's view of it read the text back through the parent's store), its manifest,
    a replay report and the store's run listing."""
    store, run = _run_with_a_long_output(store_url)
    with store:
        built = run.build("anthropic", window=16_000, reserve=2_000)
        report = run.replay(built.manifest.turn)
        values = [*one_of_every_event(), *run.events(),
                  BuildConfig(provider="openai-responses"), built, built.manifest, report, store.runs()]
        for value, back in zip(values, pools["spawn"].map(echo, values, timeout=WAIT), strict=True):
            assert back == value, type(value)
        back = pickle.loads(pickle.dumps(built))
        assert (back.request, back.body_bytes, back.fragments) == (built.request, built.body_bytes,
                                                                   built.fragments)
        assert any(f.token_count > 1000 for f in back.fragments)  # the long output, whole


@pytest.mark.parametrize("method", METHODS)
def test_a_store_or_run_handle_is_refused_where_it_is_pickled_and_the_pool_lives_on(
        pools: dict[str, ProcessPoolExecutor], sqlite_url: str, method: str) -> None:
    """Before: ``TypeError: cannot pickle '_thread.lock' object`` (a RunState: "Can't pickle local
    object"), naming nothing of ours nor the fix."""
    store, run = _run_with_a_long_output(sqlite_url)
    with store:
        for handle, name in ((store, "Store"), (run, "Run"), (store.events, "EventStore"),
                             (run.state(), "RunState")):
            err = pools[method].submit(echo, handle).exception(WAIT)
            assert isinstance(err, HandleNotPicklableError), err
            assert err.handle == name
            assert "open_store(" in str(err) or "EventStore(" in str(err)
        for name in ("Run", "RunState"):  # returned by a worker: refused there, typed here
            err = pools[method].submit(return_handle, sqlite_url, run.run_id, name).exception(WAIT)
            assert isinstance(err, HandleNotPicklableError) and err.handle == name, err
        assert pools[method].submit(echo, "alive").result(WAIT) == "alive"
        process = mp.get_context(method).Process(target=echo, args=(run,))  # type: ignore[attr-defined]
        with pytest.raises(HandleNotPicklableError, match=run.run_id):
            process.start()  # refused before a child is started
        assert process.pid is None


def test_a_url_with_a_password_is_shown_masked_in_the_refusal(pg_url: str) -> None:
    url = pg_url.replace("postgres@", "postgres:s3cret@", 1)
    with contextfold.open_store(url) as store, pytest.raises(HandleNotPicklableError) as caught:
        pickle.dumps(store.run("r"))
    assert "s3cret" not in str(caught.value) and "postgres:***@" in str(caught.value)


def test_workers_of_both_start_methods_share_a_run_by_url(
        pools: dict[str, ProcessPoolExecutor], store_url: str) -> None:
    """Four workers (two spawned, two from the fork server) append and build one run: every input
    and reply is in the log once, each build is recorded once (its turn and request hash), the
    chain verifies and every record replays."""
    rounds = 4
    with contextfold.open_store(store_url) as store:
        run = store.run(f"shared-{uuid.uuid4().hex[:8]}")
        run.append(UserInput("go"))
        futures: list[Future[dict[str, object]]] = [
            pools[method].submit(append_and_build, store_url, run.run_id, f"{method}{w}", rounds)
            for method in METHODS for w in range(2)]
        results = [f.result(WAIT) for f in futures]
        texts = Counter(getattr(rec.event, "text", None) for rec in run.events())
        workers = [f"{method}{w}" for method in METHODS for w in range(2)]
        for worker in workers:
            for k in range(rounds):
                assert texts[f"{worker}-{k}"] == 1 and texts[f"reply to {worker}-{k}"] == 1
        records = [rec.event for rec in run.events() if isinstance(rec.event, ContextBuilt)]
        built = [tuple(b) for r in results for b in r["builds"]]  # type: ignore[attr-defined]
        assert Counter((r.turn, r.request_hash) for r in records) == Counter(built)
        assert run.verify().ok
        for turn in sorted({r.turn for r in records}):
            count = sum(r.turn == turn for r in records)
            for index in range(1, count + 1):
                assert run.replay(turn, record=index).ok, (turn, index)
        last = results[0]["last"]
        assert isinstance(last, contextfold.BuildResult)
        assert last.manifest.encoding == run.replay(last.manifest.turn, record="last").rebuilt.encoding


@pytest.mark.parametrize("method", METHODS)
def test_a_worker_reads_its_environment_and_forks_as_a_parent_would(
        pools: dict[str, ProcessPoolExecutor], sqlite_url: str, method: str) -> None:
    """What the package sets up as it loads, in a fresh interpreter: ``$CONTEXTFOLD_MEMO_MB`` read
    there, the offline encoding loaded, the fork hooks registered (a fork of the worker appends
    through the handle it inherited)."""
    with contextfold.open_store(sqlite_url) as store:
        run = store.run("r")
        facts = pools[method].submit(child_facts, sqlite_url, "r").result(WAIT)
        assert facts == {"memo_ceiling": 48 * 2**20, "encoding": "cl100k_base", "grandchild_exitcode": 0}
        texts = [getattr(rec.event, "text", None) for rec in run.events()]
        assert texts[0] == "from the spawned worker" and texts[-1] == "from a fork of the worker"
        assert run.verify().ok
