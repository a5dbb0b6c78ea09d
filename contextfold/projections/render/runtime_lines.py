"""The lines the runtime writes about a tool call, outside any data block.

An error, a lost or cancelled result, an exit code, OpenAI Chat's note on the media a call
returned: each is a line starting with ``[runtime]`` that sits *outside* any data block, with
the runtime's authority, because the runtime wrote it (``data_blocks`` wraps everything else).
The fold prices a result's line from the same functions (``projections.framing``), so a line is
counted as it is written.
"""

from __future__ import annotations

from typing import Literal, TypeAlias, assert_never

from contextfold.domain.conversation import ToolResultPart

__all__ = ["ResultStatus", "media_follows_line", "runtime_header", "runtime_header_line"]

ResultStatus: TypeAlias = Literal["ok", "error", "lost", "cancelled"]


def media_follows_line(call_id: str, name: str) -> str:
    """The runtime line opening the OpenAI Chat user message that carries a tool's media."""
    return f"[runtime] media returned by call {call_id} ({name}) follows."


def _inline(value: str) -> str:
    """Ids and names on a runtime line: no line breaks, so they cannot start a new line."""
    return " ".join(value.split())


def runtime_header(result: ToolResultPart) -> str | None:
    """The runtime-authored line for a result, or None for a plain success.

    ``lost``/``cancelled`` are recovery answers the runtime wrote: they say so and
    warn against assuming success. An error names its exit code when there is one.
    """
    return runtime_header_line(result.call_id, result.name, result.status, result.exit_code)


def runtime_header_line(call_id: str, name: str | None, status: ResultStatus, exit_code: int | None
                        ) -> str | None:
    """:func:`runtime_header` from the result's plain values: what the fold prices a result's
    framing by (``projections.framing``), so a header is counted as it is written. ``name`` None:
    the call is named by its id alone (a tool the request does not offer: its name is whatever
    the model wrote, and a runtime line is no place for that; the fold priced it with the name)."""
    call = f"call {_inline(call_id)}" + ("" if name is None else f" ({_inline(name)})")
    match status:
        case "lost":
            return (
                f"[runtime] TOOL_RESULT_LOST: the result of {call} never arrived. "
                "Do not assume it succeeded."
            )
        case "cancelled":
            return (
                f"[runtime] TOOL_CALL_CANCELLED: {call} was cancelled before it returned a "
                "result. Do not assume it succeeded."
            )
        case "error":
            code = f" with exit code {exit_code}" if exit_code is not None else ""
            return f"[runtime] TOOL_ERROR: {call} failed{code}."
        case "ok":
            if exit_code is not None:
                return f"[runtime] exit code {exit_code}"
            return None
        case _:
            assert_never(status)
