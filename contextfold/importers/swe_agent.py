"""SWE-agent trajectories (``.traj``) -> events.

A ``.traj`` is one JSON object: ``history`` (the chat messages the model was sent:
``system``, ``user``, ``assistant``, ``tool``, some marked ``is_demo``), ``trajectory``
(one record per step: ``thought``, ``action``, ``observation``, ``response``) and
``info``, ``environment``, ``replay_config``. Both SWE-agent modes are read: classic,
where the model writes its command in its reply text and SWE-agent runs it, and
function calling, where the reply carries ``tool_calls`` and the observation comes
back as a ``tool`` message (``tool_call_ids``).

Mapping:

- ``system`` -> :class:`PolicySet` (runtime trust), as for OpenAI chat.
- a demonstration (``is_demo`` user message: a worked example from the agent's
  configuration, not from the user) -> :class:`InstructionSet` with source
  ``swe-agent://demonstration/<n>`` and ``origin="external"``: few-shot examples are
  instructions (the policy layer's stable prefix, its reserve: they are the same at every
  step), and trust=external, since a third party recorded them on another repository (the
  marshmallow demo holds that project's issue text, files and command output), not the
  workspace's project instructions an AGENTS.md is; shown as data either way (DESIGN 8).
- the other user messages before the first step (the task) -> :class:`UserInput`.
- each ``trajectory`` step -> :class:`ModelResponse` (the step's ``thought``, one tool
  call) and its :class:`ToolResult`. The steps come from ``trajectory`` because it
  records every step that ran: the history can lack the last one (a final ``submit``)
  or a re-queried one. A step is matched to the next history replies showing its
  ``action``; its result is the history message that answered that reply, as the model
  was shown it (SWE-agent's template around the command's output: the open file, the
  directory), else the step's raw ``observation``. In function-calling runs the call
  keeps its logged id, name and arguments from the matching reply; otherwise it is
  ``swe-<step>`` (1-based) with arguments ``{"command": action}``, named after the
  SWE-agent tool its command starts with (``open``, ``edit``, ``submit``, or one the system
  prompt documents), else ``bash``: a shell command, as function-calling mode names it.
- the tools a classic run calls are registered (:class:`ToolsRegistered`, before the first
  step) with the one parameter the calls carry, ``command``, and the description the system
  prompt gives the command (``docstring`` and ``signature``), else a plain one: a request
  rebuilt for any provider declares them as tools with their documentation, not as stubs
  the builder has to repair. A function-calling run's tools are not registered: their
  schemas are SWE-agent's configuration, which the file does not hold.
- without a ``trajectory`` (some function-calling demonstrations) the history after the
  task is read instead: ``assistant`` -> :class:`ModelResponse`, ``tool`` ->
  :class:`ToolResult` by ``tool_call_ids``, a ``user`` message answering an
  ``assistant`` action -> the :class:`ToolResult` of that action's call.
- results from SWE-agent's file tools (``open``, ``edit``, ``search_dir``, ...) are
  workspace content; every other result is external.
- content is a string or OpenAI chat parts: images (a multimodal task's screenshots, a
  browser tool's) are kept, in the task's :class:`UserInput` and, from the history
  message that carried an observation, in its result's ``blocks``.

SWE-agent records no exit status, so results carry neither ``exit_code`` nor
``is_error``: reading an error out of the text would mislabel a file that merely shows
``except ValueError:``. The run's model is ``replay_config.agent.model.name`` when the
file has it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from contextfold.domain.events import (
    AnyEvent,
    ContentBlock,
    InstructionSet,
    ModelResponse,
    PolicySet,
    TextBlock,
    ToolCall,
    ToolOrigin,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.importers._common import (
    RunBuilder,
    build,
    get_list,
    get_str,
    openai_parts,
    require_obj,
    spelled_json,
    text_of_blocks,
    text_only,
)
from contextfold.importers._json import Bad, Doc, JsonPath
from contextfold.importers.openai_chat import media_part, tool_calls

__all__ = ["command_docs", "command_name", "documented_tools", "is_trajectory", "parse_doc"]

_FILE_TOOLS = frozenset({"open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert",
                         "str_replace_editor", "search_file", "search_dir", "find_file", "filemap"})
"""SWE-agent's own commands whose output is the repository's content (files, matches, paths)."""
_SWE_AGENT_TOOLS = _FILE_TOOLS | frozenset({
    "submit", "exit_forfeit", "set_cursors", "view_image",
    # EnIGMA's (capture-the-flag) tools
    "connect_start", "connect_sendline", "connect_exec", "connect_stop", "debug_start",
    "debug_add_breakpoint", "debug_continue", "debug_step", "debug_exec", "debug_stop",
    "decompile", "disassemble",
    # the web browser bundle
    "open_site", "close_site", "screenshot_site", "click_mouse", "double_click_mouse",
    "move_mouse", "drag_mouse", "type_text", "scroll_on_page", "execute_script_on_page",
    "navigate_back", "navigate_forward", "reload_page", "wait_time", "set_browser_window_size",
    "get_console_output", "press_keys_on_page"})
"""Commands of SWE-agent's tool bundles: a classic step that starts with one is a call to that
tool; any other command is a shell command (``bash``, as SWE-agent's function-calling mode names
its shell). A bundle of the run's own is read from its system prompt's ``signature:`` lines."""
_SIGNATURE = re.compile(r"^\s*signature:\s*([A-Za-z0-9_-]{1,128})(?![A-Za-z0-9_-])", re.MULTILINE)
"""A documented command's name: up to 128 characters, a tool name's limit (a longer one is not
taken for a command, so its steps are shell commands)."""
_DOC_BLOCK = re.compile(
    r"^([A-Za-z0-9_-]{1,128}):[ \t]*\n[ \t]+docstring:[ \t]*(.*)\n[ \t]+signature:[ \t]*(.*)$", re.MULTILINE)
"""A command's documentation in a classic system prompt: ``name:``, then indented ``docstring:``
and ``signature:`` lines (the signature's first line; ``edit``'s goes on)."""
_COMMAND_PARAMETERS = {"type": "object", "properties": {"command": {
    "type": "string", "description": "the command line as the model wrote it in its reply"}},
    "required": ["command"]}
"""The schema of a classic call's arguments, as this importer writes them: ``{"command": ...}``."""
_BASH = ("Run a shell command. (SWE-agent classic mode: the model wrote the command in its reply "
         "and SWE-agent ran it.)")


def is_trajectory(value: Any) -> bool:
    """Whether a JSON document has the shape of a ``.traj``: a ``history`` of chat messages
    (an OpenHands ``history`` holds actions and observations instead)."""
    if not isinstance(value, dict) or not isinstance(value.get("history"), list):
        return False
    history = value["history"]
    if not history:
        return "trajectory" in value
    return isinstance(history[0], dict) and "role" in history[0]


def _parts(msg: dict[str, Any], path: JsonPath) -> tuple[ContentBlock, ...]:
    """A message's ``content``: a string or OpenAI chat parts (text, ``image_url``, ...)."""
    content = msg.get("content")
    return () if content is None else openai_parts(content, (*path, "content"), media_part)


def _text(msg: dict[str, Any], path: JsonPath) -> str:
    """A text-only message's content (system prompt, demonstration, reply)."""
    return text_only(_parts(msg, path), (*path, "content"), "\n")


def _answer(call_id: str, name: str, text: str, parts: tuple[ContentBlock, ...],
            path: JsonPath) -> ToolResult:
    """The result of call ``call_id`` to tool ``name``: ``text``, with the media ``parts`` (a
    screenshot) of the history message that carried the observation, if any."""
    media = tuple(b for b in parts if not isinstance(b, TextBlock))
    return build(ToolResult, path, call_id=call_id, content=text, blocks=media, origin=_origin(name))


def _optional_str(record: dict[str, Any], key: str, path: JsonPath) -> str:
    value = record.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Bad((*path, key), f"expected {key!r} to be a string")
    return value


def command_name(action: str, documented: frozenset[str] = frozenset()) -> str:
    """The tool name of a classic step: the SWE-agent tool its command starts with (one of
    :data:`_SWE_AGENT_TOOLS` or of ``documented``), else ``bash``: one declared shell tool,
    not one per shell command (each declared tool costs every request its schema)."""
    words = action.split(maxsplit=1)
    first = words[0] if words else ""
    return first if first in _SWE_AGENT_TOOLS or first in documented else "bash"


def documented_tools(system_prompt: str) -> frozenset[str]:
    """The commands a classic SWE-agent system prompt documents (``signature: <name> ...``)."""
    return frozenset(_SIGNATURE.findall(system_prompt))


def command_docs(system_prompt: str) -> dict[str, str]:
    """The description of each command a classic system prompt documents: its ``docstring``
    and, after it, its ``signature`` (``{"open": "opens the file ... Usage: open <path> ..."}``)."""
    return {name: f"{doc.strip()} Usage: {signature.strip()}"
            for name, doc, signature in _DOC_BLOCK.findall(system_prompt)}


class _Commands:
    """A classic run's commands: those its system prompt documents, and those its steps call."""

    def __init__(self) -> None:
        self.documented: frozenset[str] = frozenset()
        self.docs: dict[str, str] = {}
        self.called: dict[str, None] = {}  # in the order first called
        self.function_calling = False  # a step's call was logged (with its own arguments)

    def read(self, system_prompt: str) -> None:
        self.documented |= documented_tools(system_prompt)
        self.docs.update(command_docs(system_prompt))

    def call(self, action: str, step: int, path: JsonPath) -> ToolCall:
        """The call of a classic step (``swe-<step>``, arguments ``{"command": action}``)."""
        name = command_name(action, self.documented)
        self.called[name] = None
        return build(ToolCall, path, call_id=f"swe-{step}", name=name,
                     arguments=spelled_json({"command": action}))

    def registration(self) -> ToolsRegistered | None:
        """The tools the classic calls used; None in a function-calling run (its tools take
        arguments of their own shapes, and a step the history lacks is only written as a
        classic call)."""
        names = list(self.called)
        if not names or self.function_calling:
            return None
        return ToolsRegistered(tools=tuple(ToolSpec(
            name=n, parameters=_COMMAND_PARAMETERS,
            description=self.docs.get(n) or (_BASH if n == "bash" else f"SWE-agent's {n} command. "
                                             "(Classic mode: the model wrote it in its reply.)"))
            for n in names))


def _origin(name: str) -> ToolOrigin:
    return "workspace" if name in _FILE_TOOLS else "external"


def _model(doc: dict[str, Any]) -> str | None:
    """``replay_config.agent.model.name``; some SWE-agent versions store the config as JSON text."""
    config = doc.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return None
    agent = config.get("agent") if isinstance(config, dict) else None
    model = agent.get("model") if isinstance(agent, dict) else None
    name = model.get("name") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name else None


def _logged_call(msg: dict[str, Any], path: JsonPath) -> ToolCall | None:
    """The one tool call of a function-calling history message, as logged (OpenAI chat's)."""
    calls = msg.get("tool_calls")
    if not isinstance(calls, list) or len(calls) != 1:
        return None
    return tool_calls(msg, path, 0)[0]


def _preamble(run: RunBuilder, history: list[Any], commands: _Commands) -> int:
    """Record the system prompt, demonstrations and task (reading the commands the system
    prompt documents); the index of the first step's message."""
    demos = 0
    for i, raw in enumerate(history):
        p: JsonPath = ("history", i)
        msg = require_obj(raw, p, "a message object")
        role = get_str(msg, "role", p)
        if role == "system":
            text = _text(msg, p)
            commands.read(text)
            run.add(build(PolicySet, p, text=text), p)
        elif role == "user" and msg.get("is_demo") is True:
            demos += 1
            run.add(build(InstructionSet, p, text=_text(msg, p),
                          source_ref=f"swe-agent://demonstration/{demos}", origin="external"), p)
        elif role == "user":  # the task; a multimodal one shows its images
            run.add(build(UserInput, p, content=_parts(msg, p) or (TextBlock(text=""),)), p)
        elif role in ("assistant", "tool"):
            return i
        else:
            raise Bad((*p, "role"), f"unknown role {role!r} (expected system, user, assistant or tool)")
    return len(history)


def _observation_message(history: list[Any], reply: int, call_id: str | None) -> int | None:
    """The index of the history message that answered the reply at ``reply``: the ``tool``
    message naming ``call_id``, or, for a classic reply (``call_id`` None), the user message
    after it."""
    i = reply + 1
    msg = history[i] if i < len(history) else None
    if not isinstance(msg, dict):
        return None
    if call_id is None:
        return i if msg.get("role") == "user" else None
    ids = msg.get("tool_call_ids")
    return i if msg.get("role") == "tool" and isinstance(ids, list) and call_id in ids else None


_LOOKAHEAD = 3
"""How many of the history's next replies a step is looked for in (same ``action``): a step
the history lacks, or a reply it holds twice, shifts the two by one or two."""


def _steps_from_trajectory(run: RunBuilder, history: list[Any], start: int, steps: list[Any],
                           commands: _Commands) -> None:
    replies = [i for i in range(start, len(history))
               if isinstance(history[i], dict) and history[i].get("role") == "assistant"]
    ahead = 0  # the first reply no step has been matched to (they match in order)
    for n, raw in enumerate(steps, start=1):
        p: JsonPath = ("trajectory", n - 1)
        step = require_obj(raw, p, "a trajectory step object")
        action = get_str(step, "action", p)
        # the history's reply for this step: the next one showing the same action
        match = next((j for j in range(ahead, min(ahead + _LOOKAHEAD, len(replies)))
                      if history[replies[j]].get("action") == action), None)
        reply = None if match is None else replies[match]
        ahead = ahead if match is None else match + 1
        logged = None if reply is None else _logged_call(history[reply], ("history", reply))
        if logged is not None:
            commands.function_calling = True
        call = logged or commands.call(action, n, p)
        run.add(build(ModelResponse, p, text=_optional_str(step, "thought", p), tool_calls=(call,)), p)
        seen = None if reply is None else _observation_message(
            history, reply, None if logged is None else logged.call_id)
        observation = _optional_str(step, "observation", p)
        if seen is None:
            run.add(_answer(call.call_id, call.name, observation, (), p), p)
        else:  # as the model was shown it: the command's output inside SWE-agent's template
            parts = _parts(history[seen], ("history", seen))
            run.add(_answer(call.call_id, call.name, text_of_blocks(parts), parts, ("history", seen)), p)


def _steps_from_history(run: RunBuilder, history: list[Any], start: int, commands: _Commands) -> None:
    step = 0
    waiting: ToolCall | None = None  # a classic action's call, answered by the next user message
    for i, raw in enumerate(history[start:], start):
        p: JsonPath = ("history", i)
        msg = require_obj(raw, p, "a message object")
        role = get_str(msg, "role", p)
        if role == "assistant":
            step += 1
            logged = _logged_call(msg, p)
            action = _optional_str(msg, "action", p)
            waiting = None
            if logged is not None:
                commands.function_calling = True
                run.add(build(ModelResponse, p, text=_text(msg, p), tool_calls=(logged,)), p)
            elif action.strip():
                waiting = commands.call(action, step, p)
                thought = _optional_str(msg, "thought", p) or _text(msg, p)
                run.add(build(ModelResponse, p, text=thought, tool_calls=(waiting,)), p)
            else:
                run.add(build(ModelResponse, p, text=_text(msg, p)), p)
        elif role == "tool":
            ids = msg.get("tool_call_ids")
            call_id = ids[0] if isinstance(ids, list) and len(ids) == 1 else msg.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                raise Bad(p, "a tool message without one 'tool_call_ids' entry or a 'tool_call_id'")
            parts = _parts(msg, p)
            run.add(_answer(call_id, run.open_name(call_id) or "", text_of_blocks(parts), parts, p), p)
        elif role == "user" and waiting is not None:
            parts = _parts(msg, p)
            run.add(_answer(waiting.call_id, waiting.name, text_of_blocks(parts), parts, p), p)
            waiting = None
        elif role == "user":
            run.add(build(UserInput, p, content=_parts(msg, p) or (TextBlock(text=""),)), p)
        else:
            raise Bad((*p, "role"), f"unexpected role {role!r} after the first step")


def parse_doc(doc: Doc) -> list[tuple[str, list[AnyEvent]]]:
    """The one run of a ``.traj`` document (suffix ``""``)."""
    value = doc.value
    if doc.jsonl or not isinstance(value, dict):
        raise Bad((), "expected a SWE-agent trajectory: one JSON object with 'history'")
    history = get_list(value, "history", ())
    steps = value.get("trajectory")
    if steps is not None and not isinstance(steps, list):
        raise Bad(("trajectory",), "expected 'trajectory' to be an array")
    run = RunBuilder(model=_model(value), agent="swe-agent")
    commands = _Commands()
    start = _preamble(run, history, commands)
    first_step = len(run.events)
    if steps:
        _steps_from_trajectory(run, history, start, steps, commands)
    else:
        _steps_from_history(run, history, start, commands)
    registration = commands.registration()
    if registration is not None:  # the tools existed from the start: registered before the first step
        run.events.insert(first_step, registration)
    return [("", run.events)]
