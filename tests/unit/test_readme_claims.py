"""What README.md says of the command line, the environment and the public API matches the code.

Why: a user learns the commands from README's command list and ``contextfold --help``, and the
Python API from README's sample and ``help(contextfold.X)``. Each drifted apart as commands grew:
README's ``build`` line named neither ``--model`` nor the default provider ``neutral``, its
``compact`` line none of ``--window``, ``--reserve``, ``--keep-recent`` or ``--json``; its list of
exit code 1 left out ``why``, which ``--help`` lists; and ``help(contextfold.UserInput)`` read
"The base of the log's models", a docstring inherited from the base class. (The Python sample
itself runs in ``tests/e2e/test_readme_example.py``.)
"""

from __future__ import annotations

import argparse
import inspect
import re
from pathlib import Path

import contextfold
from contextfold.cli import EXIT_CODES, build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PACKAGE = ROOT / "contextfold"


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _command_list() -> dict[str, str]:
    """README's command list (the fenced block after "## The command line"), one text per
    command: its line and the indented lines that continue it."""
    section = README[README.index("## The command line"):]
    block = section[section.index("```\n") + 4:]
    block = block[:block.index("```")]
    commands: dict[str, str] = {}
    name = None
    for line in block.splitlines():
        head = re.match(r"  ([a-z]+)\b", line)
        if head is not None:
            name = head.group(1)
            commands[name] = ""
        if name is not None:
            commands[name] += line + "\n"
    return commands


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings
            if s.startswith("--") and s not in ("--help", "--store")}


def test_readme_lists_every_command_and_only_those() -> None:
    assert set(_command_list()) == set(_subparsers())


def test_readme_names_every_flag_of_each_command_and_no_flag_it_lacks() -> None:
    listed = _command_list()
    problems = []
    for name, parser in _subparsers().items():
        text = listed[name]
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", text)) - {"--store"}
        problems += [f"{name}: README does not name {flag}" for flag in sorted(_flags(parser) - named)]
        problems += [f"{name}: README names {flag}, which it does not take"
                     for flag in sorted(named - _flags(parser))]
    assert not problems, "\n".join(problems)


def test_readme_names_every_provider_build_takes() -> None:
    choices = _subparsers()["build"]._option_string_actions["--provider"].choices
    assert choices is not None
    line = _command_list()["build"]
    assert all(p in line for p in choices), (choices, line)


def test_readme_exit_code_1_names_the_commands_help_names() -> None:
    """``--help`` and README say which commands exit 1; both name the same ones."""
    help_line = next(line for line in EXIT_CODES.splitlines() if line.strip().startswith("1 "))
    sentence = README[README.index("1 is a check"):]
    sentence = sentence[:sentence.index(". ")]
    for command in ("replay --verify", "audit --turn", "why"):
        assert command in help_line, help_line
        assert command in sentence, sentence


def test_demo_help_says_it_builds_the_next_request_as_readme_does() -> None:
    """``contextfold demo --help`` said "show what was recorded"; the demo also verifies the hash
    chain and builds (and records) the next request, as README's quick start says."""
    from contextfold.cli_demo import DEMO_HOOKS, _load_demo_steps

    _load_demo_steps()  # as the demo does before its steps run
    help_text = _subparsers()["demo"].description or ""
    assert DEMO_HOOKS, "the demo no longer builds"
    assert "next request" in help_text and "hash chain" in help_text, help_text
    assert "next request" in _command_list()["demo"]


def test_readme_names_every_environment_variable_the_package_reads() -> None:
    read = set()
    for path in PACKAGE.rglob("*.py"):
        read |= set(re.findall(r"\"(CONTEXTFOLD_[A-Z_]+)\"", path.read_text()))
    assert read, "no environment variable found: the pattern no longer matches the code"
    environment = README[README.index("Environment: "):]
    assert not [v for v in sorted(read) if v not in environment], sorted(read)


def test_every_public_class_says_what_it_is_in_its_own_docstring() -> None:
    """``help(contextfold.X)``: a class without a docstring of its own shows its base's, which
    described another thing ("The base of the log's models", pydantic's BaseModel page)."""
    bare = [name for name in contextfold.__all__ if inspect.isclass(cls := getattr(contextfold, name))
            and not (cls.__dict__.get("__doc__") or "").strip()]
    assert not bare, bare


def test_the_fragment_docstring_spells_a_call_ref_as_the_build_writes_it() -> None:
    """``call://RUN/ID@POS`` (the position of the response that made the call: ids repeat in real
    logs), as ``show`` and the manifests spell it, not ``call://RUN/CALL_ID``."""
    doc = contextfold.ContextFragment.__doc__ or ""
    refs = re.findall(r"call://[^`]*", doc)
    assert refs and all("@" in ref for ref in refs), refs


def test_readme_prices_anthropic_tool_prompt_as_the_table_does() -> None:
    """README said 346 tokens "on Claude 4.x"; a Claude 4 model Anthropic's table does not list
    (Sonnet 4.6, Opus 4.6, which README names elsewhere) pays the dearest cell, 530."""
    from contextfold.projections.tool_prompt import DEAREST, tool_prompt_tokens

    sentence = README[README.index("Anthropic's tool-use system prompt ("):]
    sentence = sentence[:sentence.index("`contextfold/projections/tool_prompt.py`")]
    assert "4.x" not in sentence, sentence
    listed = ("claude-opus-4-0", "claude-opus-4-1", "claude-opus-4-5", "claude-sonnet-4-0",
              "claude-haiku-4-5", "claude-3-7-sonnet-latest")
    assert {m: tool_prompt_tokens("anthropic", m) for m in listed} == dict.fromkeys(listed, 346)
    assert "346" in sentence and str(DEAREST) in sentence
    # Sonnet 4.5 is charged what its recorded requests were billed (MEASURED_TOOL_PROMPT)
    assert tool_prompt_tokens("anthropic", "claude-sonnet-4-5") == 527 and "527 on Sonnet 4.5" in sentence
    for newer in ("claude-sonnet-4-6", "claude-opus-4-6"):
        assert tool_prompt_tokens("anthropic", newer) == DEAREST
    assert "4.6" in sentence.split(str(DEAREST), 1)[1], sentence  # named among those paying it
