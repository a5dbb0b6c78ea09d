"""OpenHands event streams -> events.

Accepted shapes: a JSON array of OpenHands events (one run); an object with
``history`` (one run); JSONL with one run record (``history``) per line, as
OpenHands evaluation outputs are written (run suffix: ``instance_id``, else
``line-<N>``); and a session as OpenHands' file store keeps it, one JSON file
per event (``sessions/<id>/events/<n>.json``: ``importers.parse_event_files``).
Events of the V1 software-agent SDK (each with a ``kind``; in a list, an agent
server's ``{"items": [...]}`` page, or one file per event) are read by
:mod:`~contextfold.importers.openhands_v1`.

Mapping of an event stream (actions and observations linked by ``cause``):

- ``system`` action -> :class:`PolicySet`, and its ``tools`` in OpenAI chat's shape (the schemas
  the agent was given) -> :class:`ToolsRegistered` right after it; user ``message`` ->
  :class:`UserInput`
  (with ``image_urls``); agent ``message`` and ``finish`` -> :class:`ModelResponse`
  text (``finish`` is how the agent ends; it never gets an observation, so it
  is not recorded as a tool call): a finish's text is the reply's own words, then its
  final message.
- other agent actions (run, read, edit, think, browse, ...) -> tool calls.
  With ``tool_call_metadata`` the call keeps its ``tool_call_id`` and
  ``function_name`` and, when the raw ``model_response`` holds the call, its
  verbatim arguments. Actions from one model response (same response id,
  ``total_calls_in_response`` > 1) form ONE :class:`ModelResponse` with all
  their calls, emitted at the first of them: a parallel batch stays a batch
  even though OpenHands interleaves each action with its observation.
- Older streams have no tool ids: the call id is ``oh-<event id>`` (the
  action's ``id``, or its index in the history when events carry no ids),
  stable across imports; its name is the action type.
- observations -> :class:`ToolResult` for the call they answer: by
  ``tool_call_id``, else by ``cause``, else (oldest streams, strictly
  alternating) the last open call. ``exit_code`` from ``extras.metadata.exit_code``
  (or a top-level ``exit_code``); a non-zero exit code or an ``error``
  observation sets ``is_error``, and so does a ``read``/``edit``/``write`` observation whose
  content starts with ``ERROR:`` and a newline: OpenHands' file editor reports a refused
  command (``old_str`` not found or not unique, a missing parameter) that way, in an
  observation of the usual type and with no flag. ``read``/``edit``/``write`` observations are
  workspace content (``origin="workspace"``), the rest external.
- an ``error`` observation that answers no call (the agent's malformed call
  was refused) -> :class:`RuntimeNote` (``is_error``): OpenHands shows it to the model in a
  user-role message, but it is the runtime speaking; as a :class:`UserInput` it became the
  run's current input, required, and the user's task was cut first.
- a ``recall`` observation -> :class:`PolicySet` (``openhands://workspace_context``) for what
  the runtime adds (repository info, runtime hosts, date, operator instructions, secrets'
  descriptions, conversation instructions: ``additional_info.j2``), :class:`InstructionSet`
  for repository instructions and :class:`MemoryRecalled` for each microagent knowledge item.
- a ``condensation`` action that shows a ``summary`` -> :class:`HistoryCompacted` over the
  events it and the earlier ones forgot, when they are one legal cover (see
  :mod:`contextfold.importers._condensation`); otherwise it is skipped, the events kept whole.
- runtime bookkeeping (agent state changes, null observations, the recall
  action itself) carries no context and is skipped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from contextfold.domain.event_times import source_time
from contextfold.domain.events import (
    AnyEvent,
    ContentBlock,
    InstructionSet,
    MemoryRecalled,
    ModelResponse,
    PolicySet,
    RuntimeNote,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolsRegistered,
    UserInput,
)
from contextfold.importers import openhands_v1
from contextfold.importers._common import RunBuilder, build, media_block, require_obj, spelled_json
from contextfold.importers._condensation import Condensations
from contextfold.importers._json import Bad, Doc, JsonPath
from contextfold.importers._tools import function_shaped_tools

__all__ = ["is_event_object", "parse_doc", "parse_doc_timed", "parse_history", "parse_history_timed",
           "state_model"]

_SKIP_ACTIONS = frozenset({"recall", "change_agent_state", "null", "condensation_request", "pause",
                           "resume"})
_SKIP_OBSERVATIONS = frozenset({"agent_state_changed", "null", "condensation"})
_TEXT_ACTIONS = frozenset({"system", "message", "finish"})
_WORKSPACE_OBS = frozenset({"read", "edit", "write"})
_EDITOR_ERROR = "ERROR:\n"
"""How OpenHands' runtime writes a file-editor error into a read/edit observation's content
(``action_execution_server._execute_file_editor``: ``f'ERROR:\\n{result.error}'``)."""
_META = frozenset({"id", "timestamp", "source", "message", "action", "observation", "cause",
                   "tool_call_metadata", "llm_metrics", "timeout", "args", "extras", "content"})
_RUNTIME_ARGS = frozenset({"thought", "keep_prompt", "is_confirmed", "action_risk",
                           "confirmation_state", "security_risk", "blocking", "hidden",
                           "is_input", "impl_source", "translated_ipython_code",
                           "kernel_init_code", "wait_for_response"})


def _args(e: dict[str, Any]) -> dict[str, Any]:
    """Action arguments: ``args`` in current streams; the flat event in the oldest ones.

    A flat ``message``/``system``/``finish`` keeps its own ``content``: there it is the text
    (the user's task in a 2024 resolver output), not an observation's output, and without it
    every request rebuilt from such a stream opened with an empty user message."""
    args = e.get("args")
    if isinstance(args, dict):
        return args
    flat = {k: v for k, v in e.items() if k not in _META}
    if e.get("action") in _TEXT_ACTIONS and "content" in e:
        flat["content"] = e["content"]
    return flat


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _id(v: Any, path: JsonPath) -> Any:
    """An event id or ``cause``: a key into the ids seen, so a number or a string."""
    if isinstance(v, dict | list):
        raise Bad(path, "expected an event id (a number or a string)")
    return v


def _tcm(e: dict[str, Any], path: JsonPath) -> dict[str, Any] | None:
    t = e.get("tool_call_metadata")
    return None if t is None else require_obj(t, (*path, "tool_call_metadata"))


def _response_message(tcm: dict[str, Any]) -> dict[str, Any]:
    resp = tcm.get("model_response")
    if isinstance(resp, dict):
        choices = resp.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            msg = choices[0].get("message")
            if isinstance(msg, dict):
                return msg
    return {}


def _call(e: dict[str, Any], i: int, path: JsonPath) -> ToolCall:
    tcm = _tcm(e, path)
    args = _args(e)
    if tcm is not None:
        cid = tcm.get("tool_call_id")
        name = tcm.get("function_name")
        arguments = None
        for tc in _list(_response_message(tcm).get("tool_calls")):
            if isinstance(tc, dict) and tc.get("id") == cid:
                fn = tc.get("function")
                if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                    arguments = fn["arguments"]
        if arguments is None:
            arguments = spelled_json({k: v for k, v in args.items() if k not in _RUNTIME_ARGS})
        return build(ToolCall, path, call_id=cid, name=name, arguments=arguments)
    eid = e.get("id", i)
    return build(ToolCall, path, call_id=f"oh-{eid}", name=e.get("action"),
                 arguments=spelled_json({k: v for k, v in args.items() if k not in _RUNTIME_ARGS}))


def _finish_text(e: dict[str, Any], args: dict[str, Any], path: JsonPath) -> str:
    """What the model said when it finished: its reply's own text (the response's content, else
    ``thought``, as for every other action), then the final message it passed to ``finish``
    (``final_thought``). Why both: the reply text is the model's reasoning to the user and the
    final message is the call's argument; keeping only the message dropped what the model wrote
    (hundreds of characters in the Multi-SWE-bench runs)."""
    tcm = _tcm(e, path)
    thought = (_str(_response_message(tcm).get("content")) if tcm else "") or _str(args.get("thought"))
    final = _str(args.get("final_thought")) or _str(args.get("content"))
    texts = dict.fromkeys(t for t in (thought, final) if t.strip())  # once when they are the same
    return "\n\n".join(texts) or _str(e.get("message"))


def _batches(history: list[dict[str, Any]]) -> dict[int, list[int]]:
    """First action index of each parallel batch -> indices of all its actions.
    Actions that are a batch of one map to themselves."""
    groups: dict[int, list[int]] = {}
    open_batch: dict[str, int] = {}
    for i, e in enumerate(history):
        action = e.get("action")
        if not isinstance(action, str) or action in _SKIP_ACTIONS | _TEXT_ACTIONS:
            continue
        tcm = e.get("tool_call_metadata")
        total = tcm.get("total_calls_in_response") if isinstance(tcm, dict) else None
        resp = tcm.get("model_response") if isinstance(tcm, dict) else None
        rid = resp.get("id") if isinstance(resp, dict) else None
        if isinstance(total, int) and total > 1 and isinstance(rid, str) and rid:
            first = open_batch.get(rid)
            if first is not None and len(groups[first]) < total:
                groups[first].append(i)
                continue
            open_batch[rid] = i
        groups[i] = [i]
    return groups


_HOSTS_TEXT = ("The user has access to the following hosts for accessing a web application,\n"
               "each of which has a corresponding port:")
_HOSTS_ADVICE = ("When starting a web server, use the corresponding ports. You should also\n"
                 "set any options to allow iframes and CORS requests, and allow the server to\n"
                 "be accessed from any host (e.g. 0.0.0.0).\n"
                 "For example, if you are using vite.config.js, you should set server.host and "
                 "server.allowedHosts to true")


def _dict(v: Any) -> dict[Any, Any]:
    return v if isinstance(v, dict) else {}


def _workspace_context(extras: dict[str, Any]) -> str:
    """The runtime's part of a workspace-context recall, as OpenHands' ``additional_info.j2``
    renders it for the model (blank lines of the template's tags left out): the repository it
    cloned, the runtime information (working directory, hosts and ports, the operator's
    ``additional_agent_instructions``, the custom secrets' descriptions, today's date) and the
    conversation instructions. Why: only the repository instructions and the microagents were
    imported, so a rebuilt request lacked the date, the hosts and any operator instruction the
    model had been given."""
    parts: list[str] = []
    repo, directory = _str(extras.get("repo_name")), _str(extras.get("repo_directory"))
    if repo or directory:
        branch = _str(extras.get("repo_branch"))
        parts.append("<REPOSITORY_INFO>\nAt the user's request, repository " + repo + " has been cloned to "
                     "the current working directory " + directory + "."
                     + (f'\nThe repository has been checked out to branch "{branch}".' if branch else "")
                     + "\n</REPOSITORY_INFO>")
    runtime: list[str] = []
    if workdir := _str(extras.get("working_dir")):
        runtime.append(f"The current working directory is {workdir}\nThis is the default location "
                       "for all operations unless explicitly specified otherwise.")
    if hosts := _dict(extras.get("runtime_hosts")):
        runtime.append("\n".join([_HOSTS_TEXT, *(f"* {h} (port {p})" for h, p in hosts.items()),
                                   _HOSTS_ADVICE]))
    if extra := _str(extras.get("additional_agent_instructions")).strip():
        runtime.append(extra)
    if secrets := _dict(extras.get("custom_secrets_descriptions")):
        runtime.append("\n".join(["<CUSTOM_SECRETS>", "You are have access to the following environment "
                                   "variables", *(f"* $**{k}**: {d}" for k, d in secrets.items()),
                                   "</CUSTOM_SECRETS>"]))
    if date := _str(extras.get("date")):
        runtime.append(f"Today's date is {date} (UTC).")
    if runtime:
        parts.append("\n".join(["<RUNTIME_INFORMATION>", *runtime, "</RUNTIME_INFORMATION>"]))
    if conversation := _str(extras.get("conversation_instructions")).strip():
        parts.append(f"<CONVERSATION_INSTRUCTIONS>\n{conversation}\n</CONVERSATION_INSTRUCTIONS>")
    return "\n".join(parts)


def _recall(e: dict[str, Any], path: JsonPath, run: RunBuilder) -> None:
    extras = e.get("extras") if isinstance(e.get("extras"), dict) else {}
    assert isinstance(extras, dict)
    context = _workspace_context(extras)
    if context:  # the runtime's words (OpenHands' configuration and environment): runtime trust
        run.add(build(PolicySet, path, text=context, source_ref="openhands://workspace_context"), path)
    instr = extras.get("repo_instructions")
    if isinstance(instr, str) and instr.strip():
        repo = _str(extras.get("repo_name")) or "repository"
        run.add(build(InstructionSet, path, text=instr,
                      source_ref=f"openhands://{repo}/repo_instructions"), path)
    for k, item in enumerate(_list(extras.get("microagent_knowledge"))):
        if isinstance(item, dict) and isinstance(item.get("content"), str):
            name = _str(item.get("name")) or str(k)
            run.add(build(MemoryRecalled, path, memory_id=name, content=item["content"],
                          source_ref=f"openhands://microagent/{name}"), path)


def is_event_object(value: Any) -> bool:
    """Whether ``value`` is one OpenHands event: an object with ``action`` or ``observation``,
    or a V1 event (its ``kind``): what the first file of an event folder must hold."""
    return isinstance(value, dict) and ("action" in value or "observation" in value
                                        or openhands_v1.is_event(value))


def state_model(value: Any) -> str | None:
    """The model a conversation's state file names: the V1 SDK's ``base_state.json``
    (``agent.llm.model``), the earlier file store's ``metadata.json`` (``llm_model``)."""
    if not isinstance(value, dict):
        return None
    agent = value.get("agent")
    llm = agent.get("llm") if isinstance(agent, dict) else None
    model = llm.get("model") if isinstance(llm, dict) else value.get("llm_model")
    return model if isinstance(model, str) and model else None


def _forgotten(args: dict[str, Any], before: list[dict[str, Any]]) -> list[Any]:
    """The ids a condensation action forgets: its ``forgotten_event_ids``, or every id of the
    earlier events from ``forgotten_events_start_id`` to ``forgotten_events_end_id``."""
    ids = args.get("forgotten_event_ids")
    if isinstance(ids, list):
        return [x for x in ids if isinstance(x, int | str)]
    start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
    if not (isinstance(start, int) and isinstance(end, int)):
        return []
    return [eid for e in before if isinstance(eid := e.get("id"), int) and start <= eid <= end]


def parse_history(history: list[Any], path: JsonPath, *, model: str | None = None,
                  agent: str | None = None) -> list[AnyEvent]:
    return parse_history_timed(history, path, model=model, agent=agent)[0]


def parse_history_timed(history: list[Any], path: JsonPath, *, model: str | None = None,
                        agent: str | None = None) -> tuple[list[AnyEvent], list[datetime | None]]:
    """:func:`parse_history`'s events and each one's time: its OpenHands event's ``timestamp``
    (ISO 8601 without a zone, read as UTC: :mod:`contextfold.domain.event_times`), None for the
    events the import adds (the run's start, a loss it infers) and an entry without one."""
    if any(map(openhands_v1.is_event, history)):  # the software-agent SDK's events (``kind``)
        return openhands_v1.parse_events_timed(history, path, model=model, agent=agent)
    events = [require_obj(e, (*path, i), "an OpenHands event object")
              for i, e in enumerate(history)]
    if model is None:
        for e in events:
            tcm = e.get("tool_call_metadata")
            resp = tcm.get("model_response") if isinstance(tcm, dict) else None
            if isinstance(resp, dict) and isinstance(resp.get("model"), str):
                model = resp["model"]
                break
    run = RunBuilder(model=model, agent=agent)
    batches = _batches(events)
    call_of_action: dict[Any, str] = {}
    in_batch = {j for first, members in batches.items() for j in members if j != first}
    condensations = Condensations(run)
    for i, e in enumerate(events):
        condensations.begin(e, i)
        run.now = source_time(e.get("timestamp"))
        p = (*path, i)
        action, observation = e.get("action"), e.get("observation")
        if isinstance(action, str):
            args = _args(e)
            source = e.get("source")
            if action == "condensation":
                condensations.condense(_forgotten(args, events[:i]), args.get("summary"), p)
                continue
            if action in _SKIP_ACTIONS:
                continue
            if action == "system":
                run.add(build(PolicySet, p, text=_str(args.get("content")) or _str(e.get("message"))),
                        p)
                tools = function_shaped_tools(args.get("tools"), (*p, "args", "tools") if "args" in e
                                              else (*p, "tools"))
                if tools:
                    run.add(ToolsRegistered(tools=tuple(tools)), p)
            elif action == "message" and source in ("user", None):
                blocks: list[ContentBlock] = [TextBlock(
                    text=_str(args.get("content")) or _str(e.get("message")))]
                urls = _list(args.get("image_urls") or args.get("images_urls"))
                blocks += [media_block("image", p, url=u) for u in urls if isinstance(u, str)]
                run.add(build(UserInput, p, content=tuple(blocks)), p)
            elif action == "finish":
                run.add(build(ModelResponse, p, text=_finish_text(e, args, p)), p)
            elif action == "message":
                text = _str(args.get("content")) or _str(e.get("message")) or _str(args.get("thought"))
                run.add(build(ModelResponse, p, text=text), p)
            elif i in batches:
                calls = [_call(events[j], j, (*path, j)) for j in batches[i]]
                for j, c in zip(batches[i], calls, strict=True):
                    call_of_action[_id(events[j].get("id", j), (*path, j, "id"))] = c.call_id
                tcm = _tcm(e, p)
                text = _str(_response_message(tcm).get("content")) if tcm else ""
                text = text or _str(args.get("thought"))
                run.add(build(ModelResponse, p, text=text, tool_calls=tuple(calls)), p)
            elif i not in in_batch:  # pragma: no cover - every action is in a batch
                raise Bad(p, f"action {action!r} not assigned to a response")
        elif isinstance(observation, str):
            if observation in _SKIP_OBSERVATIONS:
                continue
            if observation == "recall":
                _recall(e, p, run)
                continue
            tcm = _tcm(e, p)
            cid: str | None = None
            if tcm is not None and isinstance(tcm.get("tool_call_id"), str):
                cid = tcm["tool_call_id"]
            elif "cause" in e:
                cid = call_of_action.get(_id(e["cause"], (*p, "cause")))
            elif "id" not in e:  # oldest streams: strictly action, observation, ...
                cid = run.last_open()
            content = _str(e.get("content")) or _str(e.get("message"))
            if cid is None:
                if observation == "error":  # the runtime's words, not the user's: never the current input
                    eid = e.get("id", i)
                    run.add(build(RuntimeNote, p, text=content, is_error=True,
                                  source_ref=f"openhands://error/{eid}"), p)
                continue  # answers a skipped runtime action
            extras = e.get("extras") if isinstance(e.get("extras"), dict) else {}
            assert isinstance(extras, dict)
            meta = extras.get("metadata") if isinstance(extras.get("metadata"), dict) else {}
            assert isinstance(meta, dict)
            code = meta.get("exit_code", extras.get("exit_code", e.get("exit_code")))
            exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
            run.add(build(ToolResult, p, call_id=cid, content=content,
                          exit_code=exit_code,
                          is_error=observation == "error" or (exit_code not in (None, 0)) or (
                              observation in _WORKSPACE_OBS and content.startswith(_EDITOR_ERROR)),
                          origin="workspace" if observation in _WORKSPACE_OBS else "external"),
                    p)
        else:
            raise Bad(p, "event has neither 'action' nor 'observation'")
    return run.events, run.times


def _record(rec: dict[str, Any], path: JsonPath) -> tuple[list[AnyEvent], list[datetime | None]]:
    history = rec.get("history")
    if not isinstance(history, list):
        raise Bad(path, "missing field 'history' (an array of events)")
    meta = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    llm = meta.get("llm_config") if isinstance(meta.get("llm_config"), dict) else {}
    assert isinstance(llm, dict)
    model = llm.get("model") if isinstance(llm.get("model"), str) else None
    agent = meta.get("agent_class") if isinstance(meta.get("agent_class"), str) else None
    return parse_history_timed(history, (*path, "history"), model=model, agent=agent)


def parse_doc(doc: Doc) -> list[tuple[str, list[AnyEvent]]]:
    return [(suffix, events) for suffix, events, _ in parse_doc_timed(doc)]


def parse_doc_timed(doc: Doc) -> list[tuple[str, list[AnyEvent], list[datetime | None]]]:
    """:func:`parse_doc`'s runs, each with its events' times (:func:`parse_history_timed`)."""
    value = doc.value
    if doc.jsonl:
        out: list[tuple[str, list[AnyEvent], list[datetime | None]]] = []
        seen: set[str] = set()
        for n, raw in enumerate(value):
            rec = require_obj(raw, (n,), "a run record with 'history'")
            iid = rec.get("instance_id")
            suffix = str(iid) if isinstance(iid, str | int) else f"line-{doc.lines[n]}"
            if suffix in seen:
                suffix = f"{suffix}-line-{doc.lines[n]}"
            seen.add(suffix)
            out.append((suffix, *_record(rec, (n,))))
        return out
    if isinstance(value, dict) and isinstance(value.get("items"), list) and "history" not in value:
        return [("", *parse_history_timed(value["items"], ("items",)))]  # a V1 agent server's event page
    if isinstance(value, dict):
        return [("", *_record(value, ()))]
    if not isinstance(value, list):
        raise Bad((), "expected an array of OpenHands events or objects with 'history'")
    return [("", *parse_history_timed(value, ()))]
