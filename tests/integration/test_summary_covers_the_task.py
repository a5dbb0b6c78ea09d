"""A summary that covers the run's task: the task still steers the turn after it.

An agent run whose task is its only input is compacted with the input covered (the documented
fallback of ``plan_compactions``): the requests that follow must still rank the tools against the
task, keep it as the summary's goal and instruction, and tell the model about the media it carried.
"""

from __future__ import annotations

import pytest

from contextfold.api import open_store
from contextfold.domain.conversation import DataPart, InstructionPart, MediaPart, UserMessage
from contextfold.domain.events import (
    AnyEvent,
    CompactionSummary,
    HandOff,
    ModelResponse,
    PolicySet,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.projections.fold_summary import HANDED_TASK_HEADER, USER_CONSTRAINTS_HEADER
from contextfold.projections.render.validate import PROVIDERS
from tests.unit.test_media import image_bytes
from tests.unit.test_rendered_within_count import shown_tokens

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda",
         "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon")
CATALOGUE = (ToolSpec(name="bash", description="run a shell command"),
             *(ToolSpec(name=f"{w}_sync", description=f"sync the {w} store") for w in WORDS),
             ToolSpec(name="github_create_issue", description="create an issue on a GitHub repository"))
"""22 tools, over max_tools: a catalogue ranked against the turn, not declared whole."""


def _work(turns: int = 6, first: int = 0) -> list[AnyEvent]:
    """The agent's turns after its task: long shell outputs a summary is worth making for."""
    out: list[AnyEvent] = []
    for i in range(first, first + turns):
        out += [ModelResponse(text=f"step {i}", tool_calls=(
                    ToolCall(call_id=f"k{i}", name="bash", arguments='{"cmd": "cat log"}'),)),
                ToolResult(call_id=f"k{i}", content=f"log line {i} " * 300)]
    return out


def _tools(built: object) -> list[str]:
    return sorted(t.name for t in built.manifest.tools)  # type: ignore[attr-defined]


def test_tools_are_still_ranked_against_the_task_a_summary_covers(sqlite_url: str) -> None:
    """The task was the only user message; once summarized the tools were ranked against an empty
    query (the latest *visible* user input: none), so ``github_create_issue`` left the request and
    the first registered tools filled the cap: the model was asked to file an issue with no tool."""
    task = "Investigate the crash in the logs, then file a GitHub issue about it"
    with open_store(sqlite_url) as store:
        run = store.run("task")
        run.append(PolicySet(text="You are a coding agent."), ToolsRegistered(tools=CATALOGUE),
                   UserInput(task), *_work())
        before = run.preview(provider="anthropic", window=100_000)
        report = run.compact("summary")
        assert report.events and report.events[0].covers_to >= 3  # the task input is covered
        after = run.preview(provider="anthropic", window=100_000)
        assert "github_create_issue" in _tools(before)
        assert _tools(after) == _tools(before)
        reasons = {t.name: t.reason.split(" ")[0] for t in after.manifest.tools}
        assert reasons["github_create_issue"] == "relevant" and "fallback" not in reasons.values()


HANDED = "Task: rotate the TLS certificate on host web-3; never restart nginx during business hours"


def _parts(built: object) -> list[object]:
    return [p for m in built.conversation.messages if isinstance(m, UserMessage)  # type: ignore[attr-defined]
            for p in m.parts]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_hand_offs_task_a_summary_covers_stays_the_goal_and_the_runtimes_instruction(
        sqlite_url: str, provider: str) -> None:
    """A worker run's task is the hand-off's note: the request's current input, in the runtime's
    voice. Summarized, it was a "decision" inside the summary's external-trust data block, the goal
    was empty and its "never restart nginx" read as a fact about the past, not a rule (a user's
    task in the same place is the goal, and its words are quoted with the user's authority)."""
    kit = (*CATALOGUE, ToolSpec(name="tls_rotate_certificate", description="rotate a host's TLS certificate"))
    with open_store(sqlite_url) as store:
        run = store.run("worker")
        run.append(PolicySet(text="You are worker B."), ToolsRegistered(tools=kit),
                   HandOff(from_agent="planner", to_agent="worker", mode="hand_off", note=HANDED), *_work())
        before = run.build(provider, window=100_000, reserve=1_000)
        report = run.compact("summary")
        summary = report.events[0]
        assert summary.covers_from <= 3 <= summary.covers_to  # the hand-off is covered
        assert summary.summary.goal == f"(the task handed over at event 3, planner -> worker) {HANDED}"
        assert not any(HANDED in d for d in summary.summary.decisions)  # not twice
        built = run.build(provider, window=100_000, reserve=1_000)
        parts = _parts(built)
        handed = [p for p in parts
                  if isinstance(p, InstructionPart) and p.text.startswith(HANDED_TASK_HEADER)]
        assert len(handed) == 1 and handed[0].authority == "runtime"
        assert f"- hand_off at event 3 (planner -> worker): {HANDED}" in handed[0].text
        data = next(p for p in parts if isinstance(p, DataPart) and p.label == "compaction_summary")
        assert "- hand_off at event 3" not in data.text and "never restart nginx" in data.text  # (the goal)
        assert not any(p.text.startswith(USER_CONSTRAINTS_HEADER) for p in parts
                       if isinstance(p, InstructionPart))  # no user said anything
        assert shown_tokens(provider, built) <= built.manifest.selected_tokens
        assert run.replay(turn=built.manifest.turn).ok
        # the task still ranks the tools (item of tool_query: a hand-off's task is an input)
        assert "tls_rotate_certificate" in _tools(before) and _tools(built) == _tools(before)


def test_a_summary_cites_the_media_of_the_inputs_and_results_it_covers(sqlite_url: str) -> None:
    """A covered input's screenshot vanished from later requests and the summary named neither it
    nor its artifact: the model was asked to fix a bug "shown in this screenshot" with no
    screenshot and no ref to it (the seed: a lossy summary keeps the original artifact refs)."""
    with open_store(sqlite_url) as store:
        shot = store.attach_image(image_bytes("PNG"))
        plot = store.attach_image(image_bytes("PNG", color=(200, 10, 10)))
        assert shot.artifact is not None and plot.artifact is not None
        events = (PolicySet(text="You are a coding agent."), ToolsRegistered(tools=CATALOGUE),
                  UserInput(content=(TextBlock(text="Fix the UI bug shown in this screenshot"), shot)),
                  ModelResponse(tool_calls=(ToolCall(call_id="p", name="bash", arguments="{}"),)),
                  ToolResult(call_id="p", content="the plot", blocks=(plot,)), *_work())
        run = store.run("shot")
        run.append(*events)
        report = run.compact("summary")
        summary = report.events[0].summary
        assert report.events[0].covers_to >= 5  # the input and the result are covered
        shot_ref = f"artifact:{shot.artifact.hash} (image/png, attached to the user's message at event 3)"
        plot_ref = f"artifact:{plot.artifact.hash} (image/png, in the result of call p at event 5)"
        assert summary.evidence_refs[:2] == (shot_ref, plot_ref)
        assert summary.goal == ("(inferred from the user's message at event 3) Fix the UI bug shown in "
                                f"this screenshot [attached: artifact:{shot.artifact.hash} image/png]")
        built = run.build("anthropic", window=100_000, reserve=1_000)
        data = next(p for p in _parts(built) if isinstance(p, DataPart) and p.label == "compaction_summary")
        assert shot_ref in data.text and plot_ref in data.text
        assert run.replay(turn=built.manifest.turn).ok
        hashed = shot.artifact.hash

        def reworded(covered: object, skeleton: CompactionSummary) -> CompactionSummary:
            """A plug-in may cite the media its own way: the refs are ones the covered events hold."""
            return skeleton.model_copy(update={"evidence_refs": (
                f"the screenshot: artifact:{hashed}", *skeleton.evidence_refs[1:])})

        again = store.run("shot2")
        again.append(*events)
        assert again.compact("summary", summarizer=reworded).events[0].summary.evidence_refs[0] == (
            f"the screenshot: artifact:{hashed}")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_task_inputs_image_stays_shown_beside_the_summary_that_covers_it(
        sqlite_url: str, provider: str) -> None:
    """The task's screenshot left every later request once a summary covered its input. The latest
    input is required in every build, so it stays shown beside the summary (as a required input
    does), asking no more room than before; once a newer input comes, a summary covers it."""
    with open_store(sqlite_url) as store:
        shot = store.attach_image(image_bytes("PNG"))
        assert shot.artifact is not None
        run = store.run("shot")
        run.append(PolicySet(text="You are a coding agent."), ToolsRegistered(tools=CATALOGUE),
                   UserInput(content=(TextBlock(text="Fix the UI bug shown in this screenshot"), shot)),
                   *_work())
        first = run.compact("summary").events[0]
        assert first.covers_from <= 3 <= first.covers_to
        built = run.build(provider, window=100_000, reserve=1_000)
        kinds = [("summary" if isinstance(p, DataPart) and p.label == "compaction_summary" else
                  "image" if isinstance(p, MediaPart) else "task" if isinstance(p, InstructionPart)
                  and p.text == "Fix the UI bug shown in this screenshot" else None) for p in _parts(built)]
        assert [k for k in kinds if k] == ["summary", "task", "image"]
        assert "e3" in {f.id for f in built.manifest.fragments}
        assert run.replay(turn=built.manifest.turn).ok
        # a newer input: the screenshot's is no longer the latest, and the next summary covers it
        run.append(UserInput("Now fix the footer too"), *_work(4, first=10))
        second = run.compact("summary").events[0]
        assert second.covers_to >= 3
        again = run.build(provider, window=100_000, reserve=1_000)
        assert not any(isinstance(p, MediaPart) for p in _parts(again))
        cited = f"artifact:{shot.artifact.hash} (image/png, attached to the user's message at event 3)"
        assert cited in "\n".join(p.text for p in _parts(again) if isinstance(p, DataPart))
