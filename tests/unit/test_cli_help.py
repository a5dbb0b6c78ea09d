"""Every option's --help says what it does and, when it has one, its default.

A new user reads ``contextfold build --help`` to learn what ``--window`` is when it is left
out; a default the help does not state is one they must find in the code.
"""

from __future__ import annotations

import argparse

from contextfold.cli import COMMANDS, build_parser


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_command_and_option_has_help_and_states_its_default() -> None:
    parsers = _subparsers()
    assert set(parsers) == set(COMMANDS)
    missing = []
    for name, p in parsers.items():
        assert p.description, name
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            text = action.help or ""
            if not text.strip():
                missing.append(f"{name} {action.dest}: no help")
            has_default = (action.default not in (None, False, argparse.SUPPRESS)
                           and not action.required and action.option_strings)
            if has_default and "default" not in text:
                flags = "/".join(action.option_strings)
                missing.append(f"{name} {flags}: default {action.default!r} unstated")
    assert not missing, "\n".join(missing)


def test_integer_options_name_their_unit() -> None:
    """``--window WINDOW`` told nothing; ``--window TOKENS`` / ``--turn N`` say what to give."""
    bad = [f"{name} {'/'.join(a.option_strings)}" for name, p in _subparsers().items() for a in p._actions
           if a.type is int and a.option_strings and (a.metavar is None or a.metavar == a.dest.upper())]
    assert not bad, bad


def test_import_offers_every_format_the_importers_read() -> None:
    from contextfold.cli import IMPORT_FORMATS
    from contextfold.importers import FORMATS

    assert IMPORT_FORMATS == FORMATS
    assert set(_subparsers()["import"]._option_string_actions["--format"].choices or ()) == set(FORMATS)
