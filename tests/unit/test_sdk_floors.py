"""An SDK older than the ``validate`` extra's floor counts as absent: its check is skipped.

Why: an application may pin an older SDK and install contextfold without ``[validate]``. That SDK
imports, but its request types refuse what the renderers rightly emit (anthropic 0.40 does not know
``cache_control``), so every build for that provider failed (``contextfold demo`` exited 2). The
installed version is faked through ``importlib.metadata``; the SDK really imported is the current
one, so a body its types refuse shows whether the check ran.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import tomllib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextfold.domain.conversation import Conversation, InstructionPart, UserMessage
from contextfold.domain.errors import RenderError
from contextfold.projections.render import PROVIDERS, render, sdk_available, validate_request
from contextfold.projections.render import validate as validate_module
from contextfold.projections.render.validate import (
    SDK_FLOORS,
    SdkCheckSkippedWarning,
    sdk_check_skipped,
    validate_sdk_types,
)
from contextfold.projections.sdk_check import sdk_types_checked, sdk_types_unchecked
from tests.cli_runner import cf

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
CHAT = Conversation(messages=(UserMessage(parts=(InstructionPart(text="hello", authority="user",
                                                                 fragment_id="u1"),)),))
_REAL_VERSION = importlib.metadata.version


@pytest.fixture
def fake_versions(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str | None]]:
    """distribution -> the version ``importlib.metadata`` reports (None: no metadata); any other
    distribution reports its real version. The found-SDK memo starts empty and is put back."""
    faked: dict[str, str | None] = {}

    def version(distribution: str) -> str:
        if distribution in faked:
            value = faked[distribution]
            if value is None:
                raise importlib.metadata.PackageNotFoundError(distribution)
            return value
        return _REAL_VERSION(distribution)

    monkeypatch.setattr(importlib.metadata, "version", version)
    found, warned = dict(validate_module._SDK_FOUND), set(validate_module._SKIP_WARNED)
    validate_module._SDK_FOUND.clear()
    validate_module._SKIP_WARNED.clear()
    yield faked
    validate_module._SDK_FOUND.clear()
    validate_module._SDK_FOUND.update(found)
    validate_module._SKIP_WARNED.clear()
    validate_module._SKIP_WARNED.update(warned)


def _refused_by_the_sdk(provider: str) -> dict[str, Any]:
    """A body the protocol rules let through but the SDK's types refuse (an unknown option)."""
    return {**render(CHAT, provider, max_tokens=100), "temprature": 0.2}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_sdk_older_than_its_floor_is_skipped_as_if_absent(
        provider: str, fake_versions: dict[str, str | None]) -> None:
    distribution, floor = SDK_FLOORS[provider]
    fake_versions[distribution] = "0.1.0"
    assert not sdk_available(provider)
    with pytest.warns(SdkCheckSkippedWarning, match=f"{provider} requests are not checked"):
        body = _refused_by_the_sdk(provider)  # rendered and checked: the first skip says so
    assert validate_sdk_types(provider, body) is False  # not checked, not refused
    validate_request(provider, body)  # the protocol rules still run, and pass
    fake_versions[distribution] = floor
    assert not sdk_available(provider)  # the answer holds for the process (asked once)
    validate_module._SDK_FOUND.clear()  # the next process
    assert sdk_available(provider)
    with pytest.raises(RenderError, match="temprature"):
        validate_sdk_types(provider, body)


@pytest.mark.parametrize(("installed", "counts"), [
    ("0.40.0", False), ("0.123.9", False), ("0.124.0rc1", False), ("0.124.0.dev2", False),
    ("0.124", True), ("0.124.0", True), ("0.124.0.post1", True), ("0.124.1", True),
    ("0.200.0", True), ("1.0.0", True), ("2.17.0+local", True), (None, True),
])
def test_the_anthropic_sdk_counts_from_its_floor_on(installed: str | None, counts: bool,
                                                   fake_versions: dict[str, str | None]) -> None:
    """Releases compared as numbers (0.200 is above 0.124, not below it as text); a pre-release of
    the floor is below it; a package without metadata (vendored) is trusted, as before."""
    assert SDK_FLOORS["anthropic"] == ("anthropic", "0.124")
    fake_versions["anthropic"] = installed
    assert sdk_available("anthropic") is counts


def test_an_older_openai_counts_as_absent_for_both_its_apis(fake_versions: dict[str, str | None]) -> None:
    fake_versions["openai"] = "1.109.1"
    assert not sdk_available("openai-chat")
    assert not sdk_available("openai-responses")
    assert sdk_available("anthropic") and sdk_available("gemini")  # the others are unaffected


def test_a_missing_or_old_sdk_is_looked_for_once_not_at_every_build(
        fake_versions: dict[str, str | None], monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a found SDK was remembered: every validated build looked for a missing one again
    (``find_spec``, ~46 us, a tenth of a first build) and read an old one's metadata (~340 us)."""
    looked: list[str] = []
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        looked.append(name)
        return None if name == "google.genai" else real_find_spec(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    fake_versions["anthropic"] = "0.40.0"
    for _ in range(3):
        assert not sdk_available("gemini") and not sdk_available("anthropic")
    assert sorted(looked) == ["anthropic", "google.genai"]


def test_a_skipped_check_is_said_once_a_process_with_why(
        fake_versions: dict[str, str | None], monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing told a caller that a request went unchecked against the SDK's types: a typed
    warning says so, and why, the first time a provider's check is skipped (not at each build)."""
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: (
        None if name == "google.genai" else real_find_spec(name, package)))
    fake_versions["anthropic"] = "0.40.0"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            for provider in ("anthropic", "gemini", "openai-chat"):
                validate_request(provider, render(CHAT, provider, max_tokens=100))
    said = [(w.category, str(w.message)) for w in caught]
    assert said == [
        (SdkCheckSkippedWarning, "anthropic requests are not checked against the official SDK's request "
                                 "types: anthropic 0.40.0 is installed, older than 0.124, the first whose "
                                 "types accept every request contextfold renders; pip install "
                                 "'contextfold[validate]' to check them (the protocol rules are checked "
                                 "either way)"),
        (SdkCheckSkippedWarning, "gemini requests are not checked against the official SDK's request types: "
                                 "google-genai is not installed; pip install 'contextfold[validate]' to "
                                 "check them (the protocol rules are checked either way)"),
    ]
    assert sdk_check_skipped("anthropic") == ("anthropic 0.40.0 is installed, older than 0.124, the first "
                                              "whose types accept every request contextfold renders")
    assert sdk_check_skipped("openai-chat") is None


def test_the_command_line_says_it_once_on_one_line(fake_versions: dict[str, str | None],
                                                   tmp_path: Path) -> None:
    """A build for Anthropic with an old anthropic package: its request went unchecked and nothing
    said so. One line of ours on stderr (not Python's display of a warning), once a process.

    The demo, which said it before, shows the manifest and not the request: it no longer checks
    the request against the SDK's types (``cli_args.REQUEST_BODY_SHOWN``), so it has nothing to
    say; ``build``, which prints the request, does."""
    fake_versions["anthropic"] = "0.40.0"
    demo = cf("demo", cwd=tmp_path)
    assert (demo.returncode, demo.stderr) == (0, "")
    out = cf("build", "demo-fix-invoice", "--provider", "anthropic", cwd=tmp_path)
    assert out.returncode == 0
    assert out.stderr == ("contextfold: warning: anthropic requests are not checked against the official "
                          "SDK's request types: anthropic 0.40.0 is installed, older than 0.124, the first "
                          "whose types accept every request contextfold renders; pip install "
                          "'contextfold[validate]' to check them (the protocol rules are checked either "
                          "way)\n")
    again = cf("build", "demo-fix-invoice", "--provider", "anthropic", "--turn", "6", cwd=tmp_path)
    assert (again.returncode, again.stderr) == (0, "")  # said once a process


def test_a_caller_that_hands_out_no_body_can_turn_the_sdk_layer_off(
        fake_versions: dict[str, str | None]) -> None:
    """``sdk_types_unchecked``: the command line's ``manifest``, ``audit``, ``why``, ``diff`` and
    ``demo`` show no request body, and importing the SDK to check one was most of their time.
    Within the block a body the SDK's types refuse passes, and nothing says the check was skipped
    (it was not wanted); the protocol rules still refuse. Outside it, and in a thread the block
    did not start in, the check runs as before."""
    import threading

    body = _refused_by_the_sdk("anthropic")
    undeclared = {"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "t", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]}]}
    elsewhere: list[bool] = []
    with sdk_types_unchecked():
        assert not sdk_types_checked()
        validate_request("anthropic", body)  # not checked against the SDK's types
        with pytest.raises(RenderError, match="not declared"):
            validate_request("anthropic", undeclared)  # the protocol rules are
        thread = threading.Thread(target=lambda: elsewhere.append(sdk_types_checked()))
        thread.start()
        thread.join()
    assert elsewhere == [True]
    assert sdk_types_checked()
    with pytest.raises(RenderError, match="temprature"):
        validate_request("anthropic", body)
    fake_versions["anthropic"] = "0.40.0"  # an SDK too old: the skip is said outside the block only
    validate_module._SDK_FOUND.clear()  # as in a new process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with sdk_types_unchecked():
            validate_request("anthropic", body)
        assert caught == []
        validate_request("anthropic", body)
    assert [w.category for w in caught] == [SdkCheckSkippedWarning]


def test_the_floors_are_the_validate_extras() -> None:
    """One truth for the floors: pyproject.toml's ``validate`` extra (which says why each)."""
    extra = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["validate"]
    declared = {}
    for requirement in extra:
        match = re.fullmatch(r"([A-Za-z0-9._-]+)>=([0-9.]+)", requirement)
        assert match, f"the validate extra's {requirement!r} is not a plain floor"
        declared[match.group(1)] = match.group(2)
    assert dict(SDK_FLOORS.values()) == declared
    assert set(SDK_FLOORS) == set(PROVIDERS)
