"""``RedactionPolicy.key``: the memos keyed on it (redactions, compiled rules) never let two
policies that differ in one field share an answer."""

from __future__ import annotations

import dataclasses
import json

import pytest

from contextfold.projections.redact import RedactionPolicy, policy_from, redact
from contextfold.projections.redact_calls import redact_arguments

TEXT = "key AKIAZ7Q3B4N5K6L7M8P9, example AKIAIOSFODNN7EXAMPLE, ticket INTERNAL-42"

VARIANTS: dict[str, RedactionPolicy] = {
    "disabled": policy_from(disabled=["aws_access_key_id"]),
    "allow": policy_from(allow=[r"AKIAZ7.*"]),
    "deny": policy_from(deny={"ticket": r"INTERNAL-\d+"}),
    "redact_examples": policy_from(redact_examples=True),
}
"""One policy per field, each differing from the default in that field only."""


def test_every_field_is_in_the_key_and_the_hash() -> None:
    given = {f.name for f in dataclasses.fields(RedactionPolicy) if f.init}
    assert given == VARIANTS.keys()  # a field added to the policy needs a variant here
    base = RedactionPolicy()
    for name, variant in VARIANTS.items():
        assert variant.key != base.key and variant != base, name
        assert hash(variant) == hash(variant.key)
    again = policy_from(deny={"ticket": r"INTERNAL-\d+"})
    assert again is not VARIANTS["deny"] and again == VARIANTS["deny"]
    assert hash(again) == hash(VARIANTS["deny"]) and {again: 1}[VARIANTS["deny"]] == 1
    assert RedactionPolicy() != "policy"


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_policy_differing_in_one_field_never_shares_a_remembered_redaction(name: str) -> None:
    base, variant = RedactionPolicy(), VARIANTS[name]
    text = f"{TEXT} ({name})"  # a text of this test's own: the memo holds it for ``base`` first
    first = redact(text, base)
    assert "[REDACTED:aws_access_key_id]" in first.text and "INTERNAL-42" in first.text
    got = redact(text, variant)
    assert got.text != first.text
    assert got == redact(text, dataclasses.replace(variant))  # an equal policy: the same answer
    args = json.dumps({"note": text})
    assert redact_arguments(args, base).text != redact_arguments(args, variant).text


def test_custom_rules_differing_in_their_regex_only_are_compiled_apart() -> None:
    text = "ticket INTERNAL-42 (compiled)"
    whole = redact(text, policy_from(deny={"ticket": r"INTERNAL-\d+"}))
    part = redact(text, policy_from(deny={"ticket": r"INTERNAL-4"}))
    assert whole.text == "ticket [REDACTED:custom:ticket] (compiled)"
    assert part.text == "ticket [REDACTED:custom:ticket]2 (compiled)"
