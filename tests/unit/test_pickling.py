"""Every error and every event pickles to itself: what a worker process is sent, returns or raises
reaches the other side as the same type, with the same message and fields.

A ``ProcessPoolExecutor`` (or ``multiprocessing.Pool``, Celery, RQ) pickles what the worker raised
and unpickles it in the parent. Pickle's default remade an exception as ``cls(*args)``, with
``args`` the one message: an error with fields of its own (``call_id=``, ``run_id,
expected_version``) failed to unpickle (TypeError; in a pool, ``BrokenProcessPool``), and an error
of one argument was remade from its message (``run "run 'r' not found" not found``)."""

from __future__ import annotations

import copy
import inspect
import pickle
from pathlib import Path

import pytest

import contextfold.domain.errors as errors
from contextfold.domain.release_versions import EVENT_CLASSES
from tests.process_workers import ERROR_FIELDS, made_error, one_of_every_event


def _made(name: str) -> errors.ContextfoldError:
    err = made_error(name)
    assert isinstance(err, errors.ContextfoldError)
    return err


def test_every_error_with_fields_of_its_own_has_arguments_here() -> None:
    own = {name for name in errors.__all__ if getattr(errors, name).__init__ is not Exception.__init__}
    assert own == set(ERROR_FIELDS)


@pytest.mark.parametrize("name", errors.__all__)
def test_an_error_unpickles_as_the_same_type_message_and_fields(name: str) -> None:
    err = _made(name)
    for back in (pickle.loads(pickle.dumps(err)), copy.copy(err), copy.deepcopy(err)):
        assert type(back) is type(err)
        assert str(back) == str(err)
        assert back.args == err.args
        assert vars(back) == vars(err)  # the fields and the notes


def test_a_remade_error_keeps_its_methods_working() -> None:
    """``RecordNotFoundError.on_store`` reads the fields ``__init__`` set: they must be there."""
    err = pickle.loads(pickle.dumps(_made("RecordNotFoundError")))
    assert isinstance(err, errors.RecordNotFoundError)
    again = err.on_store("postgresql://db/runs")
    assert "--store postgresql://db/runs" in str(again)


def test_the_refusal_of_a_handle_is_a_type_error_too() -> None:
    """Code that handles pickle's own "cannot pickle" (a TypeError) handles ours."""
    assert issubclass(errors.HandleNotPicklableError, TypeError)
    assert "open it by URL" in str(_made("HandleNotPicklableError"))
    assert inspect.getdoc(errors.HandleNotPicklableError)


def test_every_event_type_unpickles_equal_with_the_same_json() -> None:
    events = one_of_every_event()
    assert {type(e) for e in events} == set(EVENT_CLASSES)
    for event in events:
        back = pickle.loads(pickle.dumps(event))
        assert back == event
        assert back.model_dump_json() == event.model_dump_json()


def test_an_in_memory_store_refused_names_a_shared_store_not_reopening_its_url() -> None:
    """``sqlite:///:memory:`` lives in this process only: reopened by URL in a worker it is a new,
    empty store, so "open the store in the worker from its URL" would lose every run. Before, the
    refusal gave that advice for it as for a file."""
    import contextfold

    with contextfold.open_store("sqlite:///:memory:") as store:
        run = store.run("r")
        for handle in (store, run, store.events):
            with pytest.raises(errors.HandleNotPicklableError) as caught:
                pickle.dumps(handle)
            message = str(caught.value)
            assert "in-memory" in message and "new, empty store" in message, message
            assert "sqlite:///runs.db" in message and "open_store(" not in message, message


def test_a_file_store_refused_still_says_to_reopen_it_by_url(tmp_path: Path) -> None:
    import contextfold

    url = f"sqlite:///{tmp_path}/runs.db"
    with contextfold.open_store(url) as store:
        with pytest.raises(errors.HandleNotPicklableError, match="open_store") as caught:
            pickle.dumps(store.run("r"))
        assert "in-memory" not in str(caught.value)
