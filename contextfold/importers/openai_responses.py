"""OpenAI Responses API ``input`` items -> events.

Accepted shapes: a request body ``{"instructions": ..., "input": str | [items]}``
(``model`` kept), a bare array of items, or JSONL with one item per line.

Mapping:

- the body's ``tools`` of type ``function`` -> one :class:`ToolsRegistered` right after
  :class:`RunStarted`; hosted tools (web search, file search, tool search, ...) and custom
  (free-text) tools are not registered (see :mod:`._tools`).
- ``instructions`` -> :class:`PolicySet` (first of the history, as the API prepends it).
- message items (``type: "message"`` or a bare ``{role, content}``):
  system/developer -> :class:`PolicySet`, user -> :class:`UserInput`,
  assistant -> text of a :class:`ModelResponse`.
- ``function_call`` / ``custom_tool_call`` / ``tool_search_call`` (and the
  shell/computer/patch call items) -> tool calls; ``*_output`` items ->
  :class:`ToolResult` by ``call_id``. An output of text, ``input_image`` and
  ``input_file`` parts keeps its text as the content and its images and files as
  blocks; other structured outputs are kept as compact JSON.
  A server-executed ``tool_search_call`` has no ``call_id``: its item ``id`` is
  the call id and its output (also without ``call_id``) answers the oldest open
  server search.
- One model turn: consecutive assistant output items (an assistant message,
  then the calls it made) form ONE :class:`ModelResponse` -- that is how the
  API returns them, and parallel calls must stay one batch. A new assistant
  message after a call starts a new response.
- ``additional_tools`` (developer-provided tools mid-conversation) ->
  :class:`ToolsRegistered` of its function tools, read as the body's.
- hosted tools' items (``web_search_call``, ``file_search_call``, ``code_interpreter_call``,
  ``image_generation_call``, ``mcp_call``, ``mcp_list_tools``, ``mcp_approval_request`` and
  ``mcp_approval_response``: :data:`~contextfold.domain.reasoning.HOSTED_RESPONSES_ITEMS`) are
  output the provider made and ran itself: kept verbatim, in order, among the
  :class:`OpenAIResponsesReasoning` items of the response they are part of (one after the
  response's calls opens the next response, as a message does). They are no tool call: nothing
  for the runtime to run or answer, and no pairing.
- ``reasoning`` items are kept verbatim as the :class:`OpenAIResponsesReasoning` of
  the response they open (a reasoning item after that response's calls opens the
  next one); the API wants them back before the calls they led to. A reasoning
  item that no message or call follows before a user turn or a result belongs to
  no response and is dropped. ``item_reference`` is refused: it needs server-side
  state this file does not contain.
"""

from __future__ import annotations

from typing import Any

from contextfold.domain.event_values import is_data_url
from contextfold.domain.events import (
    AnyEvent,
    ContentBlock,
    ModelResponse,
    OpenAIResponsesReasoning,
    PolicySet,
    ReasoningItem,
    TextBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
    ToolsRegistered,
    UserInput,
)
from contextfold.domain.reasoning import HOSTED_RESPONSES_ITEMS
from contextfold.domain.text_breaks import joined_text
from contextfold.importers._common import (
    RunBuilder,
    build,
    get_str,
    media_block,
    openai_parts,
    opt_str,
    require_obj,
    spelled_json,
    text_only,
)
from contextfold.importers._json import Bad, Doc, JsonPath
from contextfold.importers._tools import responses_tools

__all__ = ["output_events", "parse_doc", "parse_items"]

_CALLS = ("function_call", "custom_tool_call", "tool_search_call", "local_shell_call",
          "shell_call", "computer_call", "apply_patch_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "tool_search_output",
            "local_shell_call_output", "shell_call_output", "computer_call_output",
            "apply_patch_call_output")


def _media_part(kind: str, part: dict[str, Any], p: JsonPath) -> ContentBlock:
    """Responses media parts: input_image, input_file."""
    if kind == "input_image":
        url = opt_str(part, "image_url", p)
        fid = opt_str(part, "file_id", p)
        return media_block("image", p, url=url or (f"openai-file://{fid}" if fid else None),
                           detail=opt_str(part, "detail", p))
    if kind == "input_file":
        data = opt_str(part, "file_data", p)
        url = opt_str(part, "file_url", p)
        fid = opt_str(part, "file_id", p)
        title = opt_str(part, "filename", p)
        if data is not None and not is_data_url(data):
            return media_block("document", p, data=data, title=title)
        return media_block("document", p, title=title,
                           url=data or url or (f"openai-file://{fid}" if fid else None))
    raise Bad(p, f"unsupported content part type {kind!r}")


def _parts(content: Any, path: JsonPath) -> tuple[ContentBlock, ...]:
    return openai_parts(content, path, _media_part)


def _text(content: Any, path: JsonPath) -> str:
    return text_only(_parts(content, path), path)


_OUTPUT_PARTS = ("input_text", "output_text", "input_image", "input_file")
"""The parts a ``function_call_output.output`` list may hold: text, and images and files."""


def _output(item: dict[str, Any], path: JsonPath) -> tuple[str, tuple[ContentBlock, ...]]:
    """A call output's text and its media blocks. An output of text, image and file parts is
    split as a tool result is (text joined, images and files as blocks): a screenshot was kept
    as the compact JSON of its parts, base64 and all, ~115,000 tokens of text for one image.
    Anything else stays its compact JSON, so nothing is lost."""
    for key in ("output", "tools", "content"):
        if key in item:
            out = item[key]
            if isinstance(out, str):
                return out, ()
            if key == "output" and isinstance(out, list) and all(
                    isinstance(p, dict) and p.get("type") in _OUTPUT_PARTS for p in out):
                blocks = _parts(out, (*path, key))
                media = tuple(b for b in blocks if not isinstance(b, TextBlock))
                return "".join(b.text for b in blocks if isinstance(b, TextBlock)), media
            return spelled_json(out), ()
    return "", ()


class _Turn:
    """The assistant output items being gathered into one ModelResponse."""

    def __init__(self) -> None:
        self.texts: list[tuple[int, str]] = []
        """Each message's text, with the number of calls and items before it."""
        self.calls: list[ToolCall] = []
        self.reasoning: list[ReasoningItem] = []
        self.pending: list[tuple[dict[str, Any], JsonPath]] = []
        """Reasoning items not yet followed by a message or a call: they open what follows."""
        self.path: JsonPath | None = None

    def starts(self, item: JsonPath) -> None:
        """An output item (message or call) at ``item`` joins the turn (a new assistant message
        after the turn's output, or anything after its calls, opens the next one: the caller
        flushes first), preceded by the reasoning items pending before it."""
        self.path = self.path or item
        self.reasoning += [build(ReasoningItem, p, before_call=len(self.calls), raw=raw)
                           for raw, p in self.pending]
        self.pending = []

    def hosted(self, item: dict[str, Any], path: JsonPath) -> None:
        """A hosted tool's item at ``path`` joins the turn where it stands, verbatim."""
        self.starts(path)
        self.reasoning.append(build(ReasoningItem, path, before_call=len(self.calls), raw=item))

    def flush(self, run: RunBuilder, *, keep_pending: bool = False) -> None:
        if self.path is not None:
            extra: dict[str, Any] = {}
            if self.reasoning:
                extra["reasoning"] = build(OpenAIResponsesReasoning, self.path, items=tuple(self.reasoning))
            leading = sum(1 for r in self.reasoning if r.before_call == 0)
            text, breaks = joined_text(self.texts, "", leading)
            if breaks:
                extra["text_breaks"] = breaks
            run.add(build(ModelResponse, self.path, text=text, tool_calls=tuple(self.calls), **extra),
                    self.path)
        pending = self.pending if keep_pending else []  # else: reasoning that led to no output
        self.texts, self.calls, self.reasoning, self.pending, self.path = [], [], [], pending, None


def parse_items(items: list[Any], path: JsonPath, *, instructions: Any = None,
                model: str | None = None, tools: list[ToolSpec] | None = None,
                one_response: bool = False) -> list[AnyEvent]:
    """The events of a history's ``items``; ``one_response``: the items are one response's output
    (:func:`output_events`), all of it one :class:`ModelResponse`, whatever follows its calls."""
    run = RunBuilder(model=model, tools=tools or ())
    if instructions is not None:
        if not isinstance(instructions, str):
            raise Bad(("instructions",), "expected 'instructions' to be a string")
        run.add(PolicySet(text=instructions), ("instructions",))
    turn = _Turn()
    server_searches: list[str] = []
    for i, raw in enumerate(items):
        p = (*path, i)
        item = require_obj(raw, p, "an input item object")
        kind = item.get("type", "message")
        if not isinstance(kind, str):
            raise Bad((*p, "type"), "expected 'type' to be a string")
        if kind == "message":
            role = get_str(item, "role", p)
            if "content" not in item:
                raise Bad(p, "missing field 'content'")
            if role == "assistant":
                if (turn.calls or turn.texts) and not one_response:
                    turn.flush(run, keep_pending=True)
                turn.starts(p)
                said = _text(item["content"], (*p, "content"))
                turn.texts.append((len(turn.calls) + len(turn.reasoning), said))
                continue
            turn.flush(run)
            if role in ("system", "developer"):
                run.add(build(PolicySet, p, text=_text(item["content"], (*p, "content"))), p)
            elif role == "user":
                run.add(build(UserInput, p, content=_parts(item["content"], (*p, "content"))), p)
            else:
                raise Bad((*p, "role"), f"unknown role {role!r}")
        elif kind in _CALLS:
            cid = item.get("call_id")
            if cid is None and kind == "tool_search_call":
                cid = get_str(item, "id", p)
                server_searches.append(cid)
            elif not isinstance(cid, str):
                raise Bad(p, "missing field 'call_id'")
            name = item.get("name") or kind.removesuffix("_call")
            args = item.get("arguments", item.get("input", item.get("action", {})))
            if turn.calls and turn.pending and not one_response:  # the next response's reasoning
                turn.flush(run, keep_pending=True)
            turn.starts(p)
            turn.calls.append(build(ToolCall, p, call_id=cid, name=name,
                                    arguments=args if isinstance(args, str) else spelled_json(args)))
        elif kind in _OUTPUTS:
            turn.flush(run)
            cid = item.get("call_id")
            if cid is None and kind == "tool_search_output":
                cid = next((c for c in server_searches if run.is_open(c)), None)
                if cid is None:
                    raise Bad(p, "tool_search_output without call_id answers no open search")
            elif not isinstance(cid, str):
                raise Bad(p, "missing field 'call_id'")
            status = item.get("status")
            text, media = _output(item, p)
            run.add(build(ToolResult, p, call_id=cid, content=text, blocks=media,
                          is_error=status in ("failed", "incomplete")), p)
        elif kind == "additional_tools":
            turn.flush(run)
            tools = item.get("tools")
            if not isinstance(tools, list):
                raise Bad((*p, "tools"), "expected 'tools' to be an array")
            specs = responses_tools(tools, (*p, "tools"))
            run.add(build(ToolsRegistered, p, tools=tuple(specs)), p)
        elif kind in HOSTED_RESPONSES_ITEMS:
            if turn.calls and not one_response:  # after the calls (and their outputs): the next's
                turn.flush(run, keep_pending=True)
            turn.hosted(item, p)
        elif kind == "reasoning":
            turn.pending.append((item, p))
        elif kind == "item_reference":
            raise Bad(p, "item_reference needs server-side state; export the full items")
        else:
            raise Bad((*p, "type"), f"unsupported input item type {kind!r}")
    turn.flush(run)
    return run.events


def output_events(items: list[Any], path: JsonPath) -> list[AnyEvent]:
    """The events of ONE response's ``output`` items read on their own, as :func:`parse_items`
    reads them in a history (without the run's :class:`RunStarted`): the response, and the
    results of server-executed calls (``tool_search_output``) where they stand. An item that no
    model writes (a user or system message, a call's output the client sends) is refused: an
    output holding one is not a response. Every item of the output is the one response's, in its
    order: a hosted tool's item, a message or a reasoning item after its calls too (read as a
    history's items, a ``web_search_call`` after a ``function_call`` opened a second response,
    and one response read as two turns)."""
    for i, raw in enumerate(items):
        item = require_obj(raw, (*path, i), "an output item object")
        kind = item.get("type", "message")
        if (kind == "message" and item.get("role") != "assistant") or (
                kind in _OUTPUTS and kind != "tool_search_output") or kind == "additional_tools":
            raise Bad((*path, i), f"a response's output holds no {kind!r} item"
                      + (f" of role {item.get('role')!r}" if kind == "message" else ""))
    return parse_items(items, path, one_response=True)[1:]


def parse_doc(doc: Doc) -> list[tuple[str, list[AnyEvent]]]:
    value = doc.value
    if isinstance(value, dict) and not doc.jsonl and "input" in value:
        model = value.get("model") if isinstance(value.get("model"), str) else None
        inp = value["input"]
        instructions = value.get("instructions")
        if isinstance(inp, str):
            inp = [{"role": "user", "content": inp}]
        if not isinstance(inp, list):
            raise Bad(("input",), "expected 'input' to be a string or an array of items")
        tools = value.get("tools")
        if tools is not None and not isinstance(tools, list):
            raise Bad(("tools",), "expected 'tools' to be an array")
        try:
            return [("", parse_items(inp, ("input",), instructions=instructions, model=model,
                                     tools=responses_tools(tools or [], ("tools",))))]
        except Bad as e:
            server_state = [k for k in ("previous_response_id", "conversation") if value.get(k)]
            if server_state and e.reason.startswith("tool call pairing"):
                raise Bad(e.path, f"{e.reason} (the body continues server-side state through "
                          f"{' and '.join(server_state)}; import the full item list instead)"
                          ) from None
            raise
    if isinstance(value, dict) and not doc.jsonl:
        return [("", parse_items([value], ()))]
    if not isinstance(value, list):
        raise Bad((), "expected an array of input items or an object with 'input'")
    return [("", parse_items(value, ()))]
