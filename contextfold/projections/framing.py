"""What a fragment's framing costs in tokens, apart from its content.

Why a module of its own: the fold counts it once per fragment, with the counter that has just
counted the fragment's content (its tables warm), and a build reads it from the entry; a build
that meets a fragment without one (a view made elsewhere) counts it the same way. Counted the
first time a build saw the fragment, it was the dearest of a new tool result's facts (~57 us in
the agent loop for the wrapper of a source ref with a random call id, ~10 us warm).

Every fragment pays ``MESSAGE_OVERHEAD`` tokens of message framing; a data fragment
(instruction, evidence, memory, tool result, or any text not authored by the runtime or the
user) also pays its ``<data ...>`` wrapper, counted from the very text ``render.data_blocks``
writes (:func:`~contextfold.projections.render.data_blocks.data_frame`): the source escaped,
the label the layout gives the kind (:data:`DATA_LABEL`). A tool result also pays the runtime
line the renderers put before it (an error, its exit code, a lost or cancelled call: ~20
tokens that a run of failing calls would otherwise add to the request uncounted), and a lost
or cancelled one is framed as the runtime's (``trust="runtime"``, its own label). A data
fragment's text is shown neutralised: what that adds (a ``[data]`` marker per role line of a
transcript, ~30% of its tokens) is framing too, counted from the text as logged; a cut of such
a text is fitted by its neutralised count (:func:`neutralised_count`).

What one provider's request repeats is priced in that provider's builds only
(``fragment_facts``): Gemini's ``functionResponse`` names the tool again beside its id
(:func:`response_name_tokens`); OpenAI's and Anthropic's results carry the id alone, and so
does ``neutral``'s price, which follows OpenAI's framing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal, NamedTuple, TypeVar

from contextfold.projections.render.data_blocks import data_frame, neutralise
from contextfold.projections.render.runtime_lines import ResultStatus, runtime_header_line
from contextfold.projections.tool_names import shown_names

__all__ = ["DATA_KINDS", "DATA_LABEL", "MESSAGE_OVERHEAD", "NOTE_LABEL", "SUMMARY_LABEL", "AnswerFrame",
           "data_tag", "framing_tokens", "is_data", "media_alone", "neutralised_count", "neutralised_extra",
           "response_name_tokens", "truncated_extra_tokens"]

MESSAGE_OVERHEAD = 4
DATA_KINDS = frozenset({"instruction", "evidence", "memory", "tool_result"})
NOTE_LABEL = "note"
"""The label of a note the layout shows as data: a hand-off's, a late result's."""
SUMMARY_LABEL = "compaction_summary"
"""The label of a compaction summary the layout shows as data."""
DATA_LABEL: dict[str, str] = {
    "instruction": "instructions", "evidence": "evidence", "memory": "memory",
    "tool_result": "tool_result", "history": NOTE_LABEL, "user_input": "user_data",
}
"""The ``kind`` a data block names for a fragment kind (the layout's, and so the renderers')."""


class AnswerFrame(NamedTuple):
    """What a tool result's runtime line says: the answered call and how it ended."""

    call_id: str
    name: str | None
    status: ResultStatus
    exit_code: int | None


T = TypeVar("T", bound=str)


def is_data(kind: str, trust: str) -> bool:
    """Whether a fragment is shown as a data block (neutralised, wrapped) rather than as text
    the runtime or the user authored."""
    return kind in DATA_KINDS or trust not in ("runtime", "user")


def data_tag(kind: str, trust: T, status: str | None = None) -> tuple[T | Literal["runtime"], str]:
    """The (trust, kind label) a data block's tag shows for a fragment: a lost or cancelled
    answer (``status``) is the runtime's recovery answer and says so. The layout tags blocks by
    it, so the framing counted here is the framing written. (Typed by the ``trust`` given, so
    a fragment's ``Trust`` comes back one: a type checker without pydantic's plugin checks
    the model it goes into.)"""
    if status in ("lost", "cancelled"):
        return "runtime", f"tool_result_{status}"
    return trust, DATA_LABEL.get(kind, kind)


def _frame(kind: str, trust: str, source_ref: str, answer: AnswerFrame | None, truncated: bool) -> str:
    return data_frame(source_ref, *data_tag(kind, trust, None if answer is None else answer.status),
                      truncated)


def _header_tokens(answer: AnswerFrame, count: Callable[[str], int]) -> int:
    """The runtime line and its line break; under the longest name a request may show the
    tool by (an unregistered tool a provider refuses is shown under an alias)."""
    name = answer.name or ""
    tokens = 0
    for shown in shown_names(name):
        line = runtime_header_line(answer.call_id, shown, answer.status, answer.exit_code)
        tokens = max(tokens, 0 if line is None else count(line + "\n"))
    return tokens


def response_name_tokens(answer: AnswerFrame | None, count: Callable[[str], int]) -> int:
    """The tool's name a Gemini ``functionResponse`` repeats for the answer ``answer`` (the
    call's name, under the longest name the request may show the tool by): 0 for a fragment
    that answers no call. The call's ``functionCall`` pays its own copy; this one went unpriced,
    ~2-6 tokens per result a long run sends (``render.gemini``). A result shown in the note of
    calls to a tool the request does not offer carries no name: priced all the same (rare, and
    the safe side)."""
    if answer is None or not answer.name:
        return 0
    return max(map(count, shown_names(answer.name)))


def media_alone(text: str, media: bool) -> bool:
    """Whether a data fragment with ``media`` is shown as its media alone, no data block: its text
    is blank (a tool that returned only a screenshot or a PDF). The layout leaves the block out
    then (an empty ``<data>`` block before the medium said nothing), and so does its price."""
    return media and not text.strip()


def framing_tokens(kind: str, trust: str, source_ref: str, count: Callable[[str], int],
                   answer: AnswerFrame | None = None, texts: Iterable[str] = (),
                   label: str | None = None, block: bool = True) -> int:
    """The framing tokens of a fragment of ``kind`` and ``trust`` from ``source_ref``;
    ``answer`` for a tool result; ``texts``, the fragment's texts as logged, for what
    neutralising them adds when they are shown in a data block (:func:`neutralised_extra`);
    ``label``, for runtime text the layout shows as a data block all the same (a compaction
    summary, a note: :data:`SUMMARY_LABEL`, :data:`NOTE_LABEL`); ``block=False`` for a data
    fragment shown as its media alone (:func:`media_alone`): no wrapper, no text in one."""
    header = 0 if answer is None else _header_tokens(answer, count)
    if not block or (label is None and not is_data(kind, trust)):
        return MESSAGE_OVERHEAD + header
    frame = (_frame(kind, trust, source_ref, answer, False) if label is None
             else data_frame(source_ref, trust, label))
    return MESSAGE_OVERHEAD + header + count(frame) + sum(neutralised_extra(text, count) for text in texts)


def neutralised_extra(text: str, count: Callable[[str], int]) -> int:
    """The tokens neutralising ``text`` adds (``[data]`` markers, ``‹ ›`` for forged tags): 0 for
    the text that has nothing to neutralise, which ``neutralise`` returns as it is."""
    shown = neutralise(text)
    return 0 if shown is text else max(0, count(shown) - count(text))


_NEUTRALISED_COUNTS: dict[Callable[[str], int], Callable[[str], int]] = {}


def neutralised_count(count: Callable[[str], int]) -> Callable[[str], int]:
    """``count`` of a text as a data block shows it (neutralised): the measure a cut of a text
    that needs neutralising is fitted with. One function per counter, so the cut's memo of
    probes (keyed by the counter) is shared across builds."""
    hit = _NEUTRALISED_COUNTS.get(count)
    if hit is None:
        def shown_count(text: str) -> int:
            return count(neutralise(text))
        if len(_NEUTRALISED_COUNTS) >= 64:
            _NEUTRALISED_COUNTS.clear()
        hit = _NEUTRALISED_COUNTS[count] = shown_count
    return hit


_EXTRA: dict[tuple[Callable[[str], int], str, str], int] = {}
"""(counter, trust shown, label) -> tokens of ``truncated="true"``: the attribute follows the
label, so what it adds does not depend on the source (two counts per label and encoding)."""


def truncated_extra_tokens(kind: str, trust: str, count: Callable[[str], int],
                           status: str | None = None) -> int:
    """What the ``truncated="true"`` attribute adds to a data block's framing (0 for text that
    is not a data block): the builder adds it to a fragment it cuts or shows reduced.
    ``status``: a tool result's (a lost or cancelled answer is framed as the runtime's)."""
    if not is_data(kind, trust):
        return 0
    trust, label = data_tag(kind, trust, status)
    key = (count, trust, label)
    hit = _EXTRA.get(key)
    if hit is None:
        if len(_EXTRA) >= 1024:
            _EXTRA.clear()
        marked, plain = data_frame("", trust, label, True), data_frame("", trust, label)
        hit = _EXTRA[key] = max(0, count(marked) - count(plain))
    return hit
