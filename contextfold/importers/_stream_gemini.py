"""Gemini's ``streamGenerateContent`` folded (see :mod:`._stream_fold`): each chunk is a
``GenerateContentResponse`` whose candidate holds the parts that are new, so the response is the
chunks' parts in order. google-genai has no accumulator (its ``Chat`` keeps each chunk's content
as a model turn of its own); what it does say (``_extra_utils.StreamContinuation``): a chunk's
``usageMetadata`` is the running total (it replaces), ``finishReason`` comes on the last chunk, and
``CONTINUATION`` is a pause the SDK resumes (and clears) unless automatic continuation is off.

A function call arrives whole in one part, with its ``thoughtSignature``. Text arrives in pieces,
and a text signature may come on a later, empty text part: consecutive text parts of one kind
(thought or not) are joined into one, up to the part that carries a signature, as the same answer
returned whole holds them (``{"text": "Hello", "thoughtSignature": ...}``), so its calls without
an id are named after the same part positions (``gemini-<responseId>-<part>``).
"""

from __future__ import annotations

from typing import Any

from contextfold.importers._common import get_list, require_obj
from contextfold.importers._json import Bad, JsonPath
from contextfold.importers._stream_fold import Fold, Pieces, require_index
from contextfold.importers.gemini import either_key

__all__ = ["GeminiFold"]

_TEXT_KEYS = frozenset({"text", "thought", "thoughtSignature", "thought_signature"})


_CHUNK_KEYS = frozenset(
    {
        "candidates",
        "usageMetadata",
        "usage_metadata",
        "promptFeedback",
        "prompt_feedback",
        "modelVersion",
        "model_version",
        "responseId",
        "response_id",
    }
)


def _signed(part: dict[str, Any]) -> bool:
    return "thoughtSignature" in part or "thought_signature" in part


class _Candidate:
    __slots__ = ("extra", "finish", "parts", "role", "texts")

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self.texts: list[Pieces | None] = []
        """Per part, the pieces of its text when it is a text part still open to joining."""
        self.finish: str | None = None
        self.role: Any = "model"
        self.extra: dict[str, Any] = {}

    def add(self, candidate: dict[str, Any], path: JsonPath) -> None:
        for key, value in candidate.items():
            if key in ("finishReason", "finish_reason"):
                self.finish = getattr(value, "value", value)  # the SDK's enum, dumped as is
            elif key == "content":
                content = require_obj(value, (*path, key), "'content' to be an object")
                self.role = content.get("role", self.role)
                for i, raw in enumerate(get_list(content, "parts", (*path, key))):
                    self._part(
                        require_obj(raw, (*path, key, "parts", i), "a part object"), (*path, key, "parts", i)
                    )
            elif key != "index":
                self.extra[key] = value

    def _part(self, part: dict[str, Any], path: JsonPath) -> None:
        is_text = "text" in part and part.keys() <= _TEXT_KEYS
        last = self.texts[-1] if self.texts else None
        if is_text and last is not None and bool(self.parts[-1].get("thought")) == bool(part.get("thought")):
            last.add(part["text"], (*path, "text"))
            if _signed(part):  # a signature closes its part
                self.parts[-1] = {**self.parts[-1], **{k: v for k, v in part.items() if k != "text"}}
                self._close()
            return
        self.parts.append(part)
        if is_text:
            pieces = Pieces()
            pieces.add(part["text"], (*path, "text"))
            self.texts.append(pieces)
            if _signed(part):
                self._close()
        else:
            self.texts.append(None)

    def _close(self) -> None:
        """The last part takes no more text: its pieces become its text."""
        pieces = self.texts[-1]
        if pieces is not None:
            self.parts[-1] = {**self.parts[-1], "text": pieces.text()}
        self.texts[-1] = None

    def built(self, index: int, whole: bool, limits: frozenset[str]) -> dict[str, Any]:
        parts = [
            part if pieces is None else {**part, "text": pieces.text()}
            for part, pieces in zip(self.parts, self.texts, strict=True)
        ]
        if whole and self.finish in limits and parts and either_key(parts[-1], "functionCall"):
            parts.pop()  # read_response refuses the call that ends a cut response: no whole part
        candidate = {**self.extra, "index": index, "content": {"role": self.role, "parts": parts}}
        candidate["finishReason"] = "STOP" if whole else self.finish
        return candidate


class GeminiFold(Fold):
    provider = "gemini"
    limits = frozenset({"MAX_TOKENS"})

    def __init__(self) -> None:
        super().__init__()
        self.top: dict[str, Any] = {}
        self.candidates: dict[int, _Candidate] = {}
        self.blocked = False

    def add(self, event: dict[str, Any]) -> None:
        if not _CHUNK_KEYS & event.keys():
            raise Bad(
                (),
                "not a gemini stream chunk: none of 'candidates', 'usageMetadata', "
                "'promptFeedback', 'modelVersion'" + (" (a request body)" if "contents" in event else ""),
            )
        if "error" in event:
            error = event["error"]
            self.failure = str(error.get("message", error) if isinstance(error, dict) else error)
        for key, value in event.items():
            if key == "candidates":
                for i, raw in enumerate(get_list(event, key, ())):
                    candidate = require_obj(raw, (key, i), "a candidate object")
                    index = require_index(candidate, "index", (key, i))
                    self.candidates.setdefault(index, _Candidate()).add(candidate, (key, i))
            elif key != "error":
                self.top[key] = value  # usageMetadata: the running total replaces
                if key in ("promptFeedback", "prompt_feedback") and isinstance(value, dict):
                    self.blocked = self.blocked or either_key(value, "blockReason") is not None

    def ended(self) -> bool:
        if self.failure:
            return False
        return self.blocked or (
            bool(self.candidates)
            and all(c.finish is not None and c.finish != "CONTINUATION" for c in self.candidates.values())
        )

    def stop(self) -> str | None:
        first = self.candidates.get(min(self.candidates)) if self.candidates else None
        return first.finish if first else None

    def missing(self) -> list[str]:
        if self.ended():
            return []
        if any(c.finish == "CONTINUATION" for c in self.candidates.values()):
            return [
                "the rest of the response: it paused at finishReason 'CONTINUATION' (automatic "
                "continuation off: resume with its continuation_token and feed on)"
            ]
        return ["the stream's end (a finishReason)"]

    def body(self, whole: bool) -> dict[str, Any]:
        body = dict(self.top)
        if self.candidates:
            body["candidates"] = [
                self.candidates[i].built(i, whole, self.limits) for i in sorted(self.candidates)
            ]
        return body
