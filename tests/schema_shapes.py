"""A JSON Schema's shape: what a pin of it hashes (``test_user_types``, ``test_json_outputs``).

Without its ``description`` keys: a model's or a field's docstring reworded is no change of
shape, and a pin that moved with every docstring would be changed without a thought."""

from __future__ import annotations

__all__ = ["shape"]


def shape(node: object) -> object:
    """``node`` (a JSON Schema, or part of one) without its ``description`` keys."""
    if isinstance(node, dict):
        return {key: shape(value) for key, value in node.items() if key != "description"}
    if isinstance(node, list):
        return [shape(value) for value in node]
    return node
