"""The ids a summary keeps verbatim (``summary_text.identifiers``): what the documented id regex
finds, in work linear in the text, also on hyphen-joined text built to make it backtrack (a
performance hunt found a slug list costing seconds of CPU per compaction).

No timings: the scan is compared with the regex, the characters its searches read are counted,
and a text that took the regex ten minutes or more runs in a child process given two (``re``
holds the GIL: it cannot be interrupted in-process).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.projections import summary_text
from contextfold.projections.summary_text import kept_facts

ID_REGEX = re.compile(
    r"\bsha256:[0-9a-f]{8,64}\b"
    r"|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b"
    r"|\b[A-Za-z][A-Za-z0-9]*(?:[-_][A-Za-z0-9]+)*[-_](?=[A-Za-z0-9]*\d)[A-Za-z0-9]{3,}(?![A-Za-z0-9])"
    r"(?:(?:[-_][A-Za-z0-9]+)*+(?![^\W_]))?")
"""The id regex as documented (the reference): a joined id runs to the end of its run of segments
(``rel-2024-11``, ``build_2024_11``) unless a letter or digit outside ASCII follows it."""

REALISTIC = [
    "rolled out deployment dep-9931 (rev-77ab12)\nhealth check: not yet verified",
    "artifact build_2024_11 uploaded; request req-7f3a answered 200 in 41 ms",
    "CHG-5521 approved, ticket JIRA-42 linked, PR pr-1234 merged into release-2024-11-05",
    "pulled registry.example.com/app@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "trace 3f2504e0-4f89-41d3-9a0c-0305e82c3301 and span 00f067aa0ba902b7 (commit 1a2b3c4d5e6f)",
    "started i-0abc123def4567890 in us-east-1 on subnet-0bb1c79de3EXAMPLE; sg-903004f8 attached",
    "see how-to-cook-rice and why-we-moved-to-k8s-v2 (post-2023) on the blog",
    "node_modules/.bin/tsc-4_9 exited; run_2024-11-05T10:00:00Z failed with exit code 2",
    "ids: ord_8a7b6c, cus_NffrFeUfNV2Hib, pi_3MtwBwLkdIwHu7ix28a3tqPa, evt_1NG8Du2eZvKYlo2CvVdqJlA4",
    "v1.2.3 tagged; semver 2.0.0-rc.1; docker image app:2024.11.05-3; x-request-id: a1b2-c3d4",
    "Ωmega-123 résumé-456 naïve_789 ok-1é2 under_score-99x foo--bar-123 -leading-456 trailing-789-",
    "",
]

_PIECES = ["a", "b", "Z", "1", "9", "-", "_", "--", " ", ".", "é", "dep", "9931", "abc", "deadbeef",
           "0123abcd", "sha256:", "-1", "x1y", "abcdef01-2345-6789-abcd-ef0123456789", "\n", "Ω", "²",
           "1a2b3c4d5e6f", "how-to-cook-", "rice"]


@pytest.mark.parametrize("text", REALISTIC)
def test_realistic_ids_are_found_as_the_regex_finds_them(text: str) -> None:
    assert summary_text.identifiers(text) == ID_REGEX.findall(text)


def test_the_ids_a_summary_keeps_are_the_regexs() -> None:
    text = "\n".join(REALISTIC)
    expected = list(dict.fromkeys(ID_REGEX.findall(text)))[:6]
    assert expected == ["dep-9931", "rev-77ab12", "build_2024_11", "req-7f3a", "CHG-5521", "pr-1234"]
    assert kept_facts(text) == f"ids: {', '.join(expected)}; says: health check: not yet verified"


@settings(max_examples=4000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=20).map("".join))
def test_the_ids_found_are_the_regexs(text: str) -> None:
    assert summary_text.identifiers(text) == ID_REGEX.findall(text)


class _Counted:
    """A compiled pattern whose searches, matches and finditers add up the characters they were
    made over: from ``pos`` to the match's end (one more for a match: the character that ended
    it), or to the end of what was searched when none."""

    def __init__(self, pattern: re.Pattern[str], reads: list[int]) -> None:
        self.pattern, self.reads = pattern, reads

    def search(self, string: str, pos: int = 0) -> re.Match[str] | None:
        found = self.pattern.search(string, pos)
        self.reads[0] += (found.end() if found else len(string)) - pos
        return found

    def match(self, string: str, pos: int = 0) -> re.Match[str] | None:
        found = self.pattern.match(string, pos)
        self.reads[0] += (found.end() if found else pos) - pos + 1
        return found

    def finditer(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> Iterator[re.Match[str]]:
        self.reads[0] += min(endpos, len(string)) - pos
        return self.pattern.finditer(string, pos, endpos)


@pytest.mark.parametrize(("text", "expected"), [
    ("slugs: " + "how-to-cook-rice-" * 2_000, []),
    ("slugs: " + "how-to-cook-rice-" * 2_000 + "v2024", ["how-to-cook-rice-" * 2_000 + "v2024"]),
    ("a-" * 20_000 + "b", []),
    ("dep-9931-" * 4_000, ["dep-9931-" * 3_999 + "dep-9931"]),
    ("abcdef01-2345-6789-abcd-ef0123456789-" * 1_000 + "zz9999",
     ["abcdef01-2345-6789-abcd-ef0123456789"] * 1_000),
    ("x_" * 20_000 + "-a1b", []),
])
def test_joined_ids_are_read_a_bounded_number_of_times(
        monkeypatch: pytest.MonkeyPatch, text: str, expected: list[str]) -> None:
    """findall tried the joined-id shape at every segment of a run, each reading to the run's
    end (quadratic: these took it up to seconds each): each run is now read a few times over."""
    reads = [0]
    for name in ("_ID_SCAN", "_JOINED_RUN", "_JOINED_TAIL"):
        monkeypatch.setattr(summary_text, name, _Counted(getattr(summary_text, name), reads))
    assert summary_text.identifiers(text) == expected
    assert reads[0] <= 4 * len(text)


_CHILD = """
import json, sys
from contextfold.projections.summary_text import kept_facts
head, unit, times, tail = json.loads(sys.argv[1])
print(json.dumps(kept_facts(head + unit * times + tail)))
"""


def test_a_long_slug_list_is_summarised_in_linear_work() -> None:
    """A 256 KB tool result listing slugs (no digit: no id in it) took the id scan ~12 minutes
    of CPU (17.6 s at 40 KB); given two, in a child process, it finds the id after it."""
    parts = ("slugs: ", "how-to-cook-rice-", 15_420, "end\nrolled out dep-9931")
    done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(parts)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "ids: dep-9931"


@pytest.mark.parametrize(("text", "ids"), [
    ("released rel-2024-11 to staging", ["rel-2024-11"]),  # was rel-2024: an id that never existed
    ("artifact build_2024_11 uploaded", ["build_2024_11"]),  # was none: _2024 is followed by _
    ("release-2024-11-05 tagged", ["release-2024-11-05"]),
    ("rolled out dep-9931.", ["dep-9931"]),
    ("dep-9931é", ["dep-9931"]),  # a letter outside ASCII after the run: the id ends at its segment
    ("us-east-1 and pr-12", []),  # no segment of three with a digit: not of this shape (short_identifiers)
])
def test_a_joined_id_is_its_whole_run_of_segments(text: str, ids: list[str]) -> None:
    """The seed (5.3): ids are not summarised away, nor quoted wrong. Cut after its last segment
    of three or more with a digit, ``rel-2024-11`` was kept as ``rel-2024``."""
    assert summary_text.identifiers(text) == ids


def test_an_id_numbered_with_one_or_two_digits_is_kept() -> None:
    """``dep-3``, ``PR-42``: a joined id whose segments after the first are all under three
    characters was no id (the shape asks for one of three or more, with a digit), so a
    mask's stub and a summary dropped it (``test_compaction_past_input``). Such ids fill the slots
    the longer ones leave, after them: what a text's longer ids kept is kept as before (a version
    such as ``utf-8`` is one too, and must not push ``dep-9931`` out)."""
    assert kept_facts("Created deployment dep-3\nERROR: health check timed out") == "ids: dep-3"
    assert kept_facts("merged PR-42 and job-7; see dep-9931") == "ids: dep-9931, PR-42, job-7"
    long_ids = " ".join(f"dep-{i}000" for i in range(1, 8))
    assert kept_facts(f"charset=utf-8 {long_ids} dep-3") == kept_facts(long_ids)
    # shown whole, not as the head of a longer id: dep-4 is not said by dep-42
    assert kept_facts("dep-4 and dep-42", shown="dep-42 was rolled back") == "ids: dep-4"
    # what already is an id stays one, whole; a word with no digit is none; a code name, a file's
    # name, a CSS class, an encoding, a region are none
    assert kept_facts("rel-2024-11 how-to-cook test_mod_1 tests/dep-3.py mb-4 utf-8 us-east-1") == (
        "ids: rel-2024-11")


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=20).map("".join))
def test_short_ids_only_add_to_the_ids_kept(text: str) -> None:
    """Every id a text's longer ids kept is kept (the short ones fill what they leave)."""
    longer = list(dict.fromkeys(ID_REGEX.findall(text)))[:6]
    kept = kept_facts(text)
    assert all(re.search(rf"(?<![\w-]){re.escape(i)}(?![\w-])", kept) for i in longer)


@pytest.mark.parametrize("text", ["how-to-cook-rice-" * 4_000, "abc-1-" * 20_000 + "é", "x_1_" * 20_000 + "_",
                                  "abc" * 20_000 + "_1", "a-" * 20_000 + "b"])
def test_short_ids_are_found_in_one_pass(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """The short ids' shape reads a word and its number from where a word starts: one pass."""
    reads = [0]
    monkeypatch.setattr(summary_text, "_SHORT_ID", _Counted(summary_text._SHORT_ID, reads))
    assert summary_text.short_identifiers(text) == []
    assert reads[0] <= 4 * len(text)
