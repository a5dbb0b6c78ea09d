"""Ctrl-C at any point of a command: "interrupted" and exit code 130, never a traceback.

The command line imports the whole package first (~0.5 s); a Ctrl-C that landed then printed a
traceback of the import machinery. The interrupt is staged deterministically: the child process
raises KeyboardInterrupt from an import hook when the package's heavy module is first imported,
which is where a real Ctrl-C in that window lands."""

from __future__ import annotations

import subprocess
import sys
import textwrap

INTERRUPT_WHILE_LOADING = textwrap.dedent("""
    import sys

    class CtrlC:
        def find_spec(self, name, path=None, target=None):
            if name == "contextfold.api":
                raise KeyboardInterrupt
            return None

    sys.meta_path.insert(0, CtrlC())
    from contextfold.console import main
    sys.exit(main(["runs"]))
""")


def test_a_ctrl_c_while_the_package_loads_exits_130_saying_interrupted() -> None:
    done = subprocess.run([sys.executable, "-c", INTERRUPT_WHILE_LOADING], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stderr, done.stdout) == (130, "contextfold: interrupted\n", "")


def test_importing_the_package_loads_no_module_until_a_name_is_used() -> None:
    """What lets the entry point catch that interrupt: ``import contextfold`` imports none of its
    modules (nor pydantic); the first use of a public name imports the module defining it."""
    probe = textwrap.dedent("""
        import sys
        import contextfold
        loaded = sorted(m for m in sys.modules if m.startswith("contextfold.") or m == "pydantic")
        print(loaded)
        from contextfold import UserInput, open_store
        print(UserInput.__module__, open_store.__module__, "contextfold.api" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          check=True)
    assert done.stdout.splitlines() == ["[]", "contextfold.domain.events contextfold.api True"]
