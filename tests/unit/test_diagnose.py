"""Log diagnosis and lean logs: a huge failing log keeps exit code, first error and tail."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.domain.errors import InvalidInputError
from contextfold.projections import diagnose as diagnose_module
from contextfold.projections import log_headers, log_patterns
from contextfold.projections.code_fences import open_fence
from contextfold.projections.diagnose import FirstError, LogDiagnosis, diagnose_log, lean_log
from contextfold.projections.graphemes import ESCAPE_SEQUENCE
from contextfold.projections.truncate import MINIMAL_MARKER, Truncation, split_lines, truncate
from tests.counters import Counter, cl100k, quarter

TWO_MB = 2 * 1024 * 1024


# ------------------------------------------------------------------ realistic logs


def pytest_log(rng: random.Random) -> tuple[str, str, str]:
    """A pytest run over a big suite with one failure: (log, first error line, last line)."""
    lines = ["============================= test session starts ==============================",
             "platform linux -- Python 3.11.9, pytest-8.3.2, pluggy-1.5.0",
             "rootdir: /srv/app", "configfile: pyproject.toml", "plugins: xdist-3.6.1",
             "collected 48211 items", ""]
    size = sum(len(x) + 1 for x in lines)
    i = 0
    while size < TWO_MB - 4000:
        mod = f"tests/unit/test_module_{i // 40:04d}.py"
        dots = "".join(rng.choice("....s") for _ in range(60))
        line = f"{mod} {dots} [{(i * 100) // 48211:3d}%]"
        if i % 97 == 0:
            line = f"{mod}:12: DeprecationWarning: datetime.utcnow() is deprecated"
        lines.append(line)
        size += len(line) + 1
        i += 1
    first = "E       AssertionError: assert 'pending' == 'paid'"
    lines += [
        "", "=================================== FAILURES ===================================",
        "___________________________ test_invoice_is_paid ____________________________", "",
        "    def test_invoice_is_paid():", "        inv = make_invoice()", "        pay(inv)",
        ">       assert inv.status == 'paid'", first,
        "E         - paid", "E         + pending", "",
        "tests/unit/test_billing.py:88: AssertionError",
        "=========================== short test summary info ============================",
        "FAILED tests/unit/test_billing.py::test_invoice_is_paid - AssertionError: assert",
    ]
    last = "============ 1 failed, 48010 passed, 200 skipped, 497 warnings in 912.31s ============"
    lines.append(last)
    return "\n".join(lines) + "\n", first, last


def cargo_log(rng: random.Random) -> tuple[str, str, str]:
    crates = ["serde", "tokio", "hyper", "regex", "syn", "quote", "rand", "clap", "tracing"]
    lines = ["    Updating crates.io index"]
    size = 0
    i = 0
    while size < TWO_MB // 2:
        line = (f"   Compiling {rng.choice(crates)}-{i} v{rng.randint(0, 3)}.{rng.randint(0, 40)}"
                f".{rng.randint(0, 9)}")
        lines.append(line)
        size += len(line) + 1
        i += 1
    first = "error[E0308]: mismatched types"
    lines += ["warning: unused variable: `cfg`", " --> src/config.rs:12:9", "",
              first, "  --> src/main.rs:41:18", "   |",
              '41 |     let port: u16 = env::var("PORT");', "   |               ---   ^^^^^^ "
              "expected `u16`, found `Result<String, VarError>`"]
    while size < TWO_MB:
        line = f"   Compiling app-part-{i} v0.1.0 (/srv/app/crates/part-{i})"
        lines.append(line)
        size += len(line) + 1
        i += 1
    last = "error: could not compile `app` (bin \"app\") due to 1 previous error"
    lines += ["Some errors have detailed explanations: E0308.", last]
    return "\n".join(lines) + "\n", first, last


def npm_log(rng: random.Random) -> tuple[str, str, str]:
    lines = ["> web@2.3.0 build", "> webpack --mode production", ""]
    size = 0
    i = 0
    while size < TWO_MB:
        kb = rng.randint(1, 900)
        line = f"asset chunk-{i:05x}.js {kb} KiB [emitted] [minimized] (name: chunk-{i})"
        lines.append(line)
        size += len(line) + 1
        i += 1
    lines += ["ERROR in ./src/app.tsx 14:2-30", "Module not found: Error: Can't resolve './Nav'",
              "webpack 5.91.0 compiled with 1 error in 48213 ms"]
    # the npm ERR! block comes after webpack's own ERROR line: the first match wins
    first = "ERROR in ./src/app.tsx 14:2-30"
    lines += ["npm ERR! code ELIFECYCLE", "npm ERR! errno 1",
              "npm ERR! web@2.3.0 build: `webpack --mode production`",
              "npm ERR! Exit status 1"]
    last = "npm ERR!     /root/.npm/_logs/2024-05-01T10_00_00_000Z-debug-0.log"
    lines.append(last)
    return "\n".join(lines) + "\n", first, last


LOGS = {"pytest": pytest_log, "cargo": cargo_log, "npm": npm_log}


@pytest.mark.parametrize("style", sorted(LOGS))
@pytest.mark.parametrize("count", [quarter, cl100k], ids=["quarter", "cl100k"])
def test_two_megabyte_failing_log_under_4k_keeps_exit_code_first_error_and_tail(
    style: str, count: Counter,
) -> None:
    log, first, last = LOGS[style](random.Random(7))
    assert len(log.encode()) >= TWO_MB - 8000
    result = lean_log(log, 1, 4000, count, artifact_ref="artifact://blake3/9f2c")
    assert result.truncated and result.strategy == "lean_log"
    assert result.tokens == count(result.text) <= 4000
    assert result.tokens > 3000  # the budget is used, not wasted
    text = result.text
    assert "exit code: 1" in text.split("\n")[0]
    assert first in text
    # the tail, then the line naming where the rest is
    assert text.rstrip("\n").split("\n")[-2:] == [last, "[full log: artifact://blake3/9f2c]"]
    lines, _ = split_lines(log)
    tail = result.kept[-1]
    assert tail.end == len(lines) and tail.end - tail.start > 10
    assert result.original_chars == len(log)


def test_diagnosis_of_a_pytest_log_counts_and_first_error() -> None:
    log, first, _ = pytest_log(random.Random(1))
    d = diagnose_log(log, 1)
    assert d.exit_code == 1 and d.first_error is not None
    assert d.first_error.pattern == "pytest_e" and d.first_error.text.split("\n")[0] == first
    lines, _ = split_lines(log)
    assert lines[d.first_error.line - 1] == first
    assert d.first_error.text.split("\n")[1:] == ["E         - paid", "E         + pending"]
    assert d.total_lines == len(lines)
    assert d.failed_lines >= 2 and d.warning_lines > 100


def test_python_traceback_is_taken_whole_up_to_its_exception_line() -> None:
    log = "\n".join([
        "INFO starting worker", "WARNING slow disk",
        "Traceback (most recent call last):",
        '  File "/srv/app/main.py", line 10, in <module>', "    main()",
        '  File "/srv/app/main.py", line 7, in main', "    raise ValueError(\"bad config\")",
        "ValueError: bad config", "INFO shutting down", "ERROR exited",
    ])
    d = diagnose_log(log, 2)
    assert d.first_error is not None
    assert (d.first_error.line, d.first_error.end_line) == (3, 8)
    assert d.first_error.pattern == "python_traceback"
    assert d.first_error.text.endswith("ValueError: bad config")
    assert d.warning_lines == 1 and d.total_lines == 10


@pytest.mark.parametrize(("line", "pattern"), [
    ("Traceback (most recent call last):", "python_traceback"),
    ("panic: runtime error: index out of range [3] with length 3", "panic"),
    ("thread 'main' panicked at src/main.rs:4:5:", "panic"),
    ("fatal: not a git repository (or any of the parent directories): .git", "fatal"),
    ("main.c:1:10: fatal error: stdio.h: No such file or directory", "fatal"),
    ("Segmentation fault (core dumped)", "segfault"),
    ("npm ERR! code E404", "npm_err"),
    ("npm error code ERESOLVE", "npm_err"),
    ("make: *** [Makefile:12: all] Error 2", "make"),
    ("make[2]: *** [build] Error 1", "make"),
    ("E       assert 1 == 2", "pytest_e"),
    ("FAILED tests/test_a.py::test_x - assert 1 == 2", "failed"),
    ("--- FAIL: TestAdd (0.00s)", "test_fail"),
    ("    --- FAIL: TestAdd/negative (0.00s)", "test_fail"),
    ("FAIL\texample.com/calc\t0.002s", "test_fail"),
    (" FAIL  src/sum.test.js", "test_fail"),
    ("FAIL: test_parse (tests.test_cli.CliTest)", "test_fail"),
    ("src/app.ts(3,7): error TS2322: Type 'string' is not assignable to type 'number'.", "error"),
    ("C:\\src\\App\\Program.cs(12,5): error CS1002: ; expected [C:\\src\\App\\App.csproj]", "error"),
    ("error: linker `cc` not found", "error"),
    ("error[E0425]: cannot find value `x` in this scope", "error"),
    ("2024-05-01 10:00:00 ERROR db connection refused", "error"),
    ("TypeError: Cannot read properties of undefined (reading 'map')", "error"),
    ('Exception in thread "main" java.lang.NullPointerException', "exception"),
])
def test_each_documented_pattern_is_recognised(line: str, pattern: str) -> None:
    d = diagnose_log(f"building...\n{line}\ndone", 1)
    assert d.first_error is not None
    assert d.first_error.pattern == pattern and d.first_error.line == 2


@pytest.mark.parametrize("line", ["collected 12 items", "12 passed, 0 failed in 1.2s",
                                  "no errors found", "Exceptions: none raised", "FAIL_FAST=1 make test",
                                  "the error handler2: ready"])
def test_benign_lines_are_not_key_errors(line: str) -> None:
    assert diagnose_log(line, 0).first_error is None


def test_ansi_colours_do_not_hide_an_error() -> None:
    d = diagnose_log("\x1b[1m\x1b[31merror\x1b[0m: aborting due to previous error\n", 101)
    assert d.first_error is not None and d.first_error.text.startswith("error: aborting")


@pytest.mark.parametrize("coloured", [
    "\x1b[1m\x1b[31merror\x1b(B\x1b[m: cannot find module 'x'",  # tput sgr0 resets with ESC ( B
    "\x1b]0;build: make\x07error: cannot find module 'x'",  # an OSC window title, BEL-ended
    "\x1b]8;;file:///src/a.c\x1b\\error\x1b]8;;\x1b\\: cannot find module 'x'",  # an OSC 8 hyperlink
])
def test_charset_and_osc_sequences_do_not_hide_an_error(coloured: str) -> None:
    """Only CSI sequences were stripped: ``error\\x1b(B\\x1b[m:`` was no ``error:``."""
    d = diagnose_log(f"building\n{coloured}\ndone\n", 1)
    assert d.first_error is not None and d.first_error.line == 2
    assert d.first_error.text == "error: cannot find module 'x'"


def test_an_error_printed_over_a_progress_bar_is_read_as_the_terminal_shows_it() -> None:
    """A pip progress bar redrawn with ``\\r`` is one line with the error at its end: the header
    quoted its first 400 characters of progress frames, and the error appeared nowhere."""
    frames = "".join(f"\rDownloading torch.whl {i / 20:.1f}% |{'#' * (i // 50):40}|" for i in range(2000))
    error = "ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device"
    cleanup = "\n".join(f"  cleanup {i}" for i in range(400))
    log = "Collecting torch\n" + frames + "\r" + error + "\r\n" + cleanup
    d = diagnose_log(log, 1)
    assert d.first_error is not None
    assert (d.first_error.line, d.first_error.pattern) == (2, "error")
    assert d.first_error.text.split("\n")[0] == error
    result = lean_log(log, 1, 300, cl100k, artifact_ref="artifact://x")
    assert result.tokens <= 300 and "No space left on device" in result.text.split("[log excerpt]")[0]
    # a bar's last frame is what is left of it: a warning it overwrote is not counted
    assert diagnose_log("\rwarning: slow 1%\rdone 100%\n", 0).warning_lines == 0


def test_a_cursor_sent_to_column_one_is_read_as_a_carriage_return() -> None:
    """npm redraws its progress line with ``ESC [1G``: stripped as a colour code, it glued the
    frames and the error after them into one line, ``…packagesERROR:``, which is no ``ERROR``."""
    frames = "".join(f"\x1b[1G\x1b[0Kfetching {i}/300 packages" for i in range(300))
    error = "ERROR: ENOSPC: no space left on device, write"
    d = diagnose_log(f"npm install\n{frames}\x1b[1G\x1b[0K{error}\nnpm exited\n", 1)
    assert d.first_error is not None and (d.first_error.line, d.first_error.text) == (2, error)


def test_a_header_quotes_a_long_line_around_its_error_not_its_head() -> None:
    """An error deep inside one long line (a JSON body with its error member in the middle, a
    stream of progress notes) was quoted by its first 400 characters."""
    frames = "".join(f"fetching {i}/3000 packages | " for i in range(3000))
    error = "ERROR: ENOSPC: no space left on device, write"
    line = frames + error + " ... " + "retrying " * 2000
    log = "npm install\n" + line + "\n" + "\n".join(f"  cleanup {i}" for i in range(40)) + "\n"
    d = diagnose_log(log, 1)
    assert d.first_error is not None and d.first_error.line == 2
    variants = [h for h, framed in log_headers.header_variants(d, "artifact://x") if framed]
    assert all(error in h for h in variants[:4])  # the fourth quotes the line it names, clipped
    clipped = variants[1].split("\n")[2]
    assert clipped.startswith("[") and " chars omitted] …" in clipped and clipped.endswith("chars omitted]")
    result = lean_log(log, 1, 400, cl100k, artifact_ref="artifact://x")
    assert result.tokens <= 400 and error in result.text.split("[log excerpt]")[0]


_RUSTC_TAIL = ["error[E0308]: mismatched types", "  --> src/main.rs:14:18", "   |",
               '14 |     let y: i32 = "a";', "   |            ---   ^^^ expected `i32`, found `&str`", "",
               'error: could not compile `m` (bin "m") due to 1 previous error']
_TRACEBACK_TAIL = ["Traceback (most recent call last):", '  File "/app/m.py", line 3, in <module>',
                   "    main()", "KeyError: 'user_id'", "exited"]


@pytest.mark.parametrize("tail", [_RUSTC_TAIL, _TRACEBACK_TAIL], ids=["rustc", "traceback"])
def test_a_one_line_header_quotes_the_line_it_names(tail: list[str]) -> None:
    """The short headers quoted the block's last line under its first line's number: the model
    read ``[first key error] line 301:    |`` for a rustc error. A traceback is quoted by its
    exception line, under that line's number."""
    lines = [f"   Compiling dep{i} v0.1.{i}" for i in range(300)] + tail
    log = "\n".join(lines) + "\n"
    quoted = 0
    for budget in range(48, 160):  # (a header takes at most two thirds of the grant: log_headers)
        out = lean_log(log, 101, budget, cl100k, artifact_ref="artifact:abc").text
        for m in re.finditer(r"^\[first key error\] line (\d+): (.*)$", out, re.MULTILINE):
            quoted += 1
            assert m.group(2).strip() == lines[int(m.group(1)) - 1].strip(), budget
    assert quoted  # the one-line headers were used


def test_clipping_around_a_match_keeps_whole_graphemes_and_at_most_the_line_limit() -> None:
    line = "é" * 300 + "👍🏽" * 300 + " error: x" + "ü" * 1000  # 80 before the match: mid-emoji
    at = line.index("error")
    clipped = log_headers._clip(line, at)
    kept = clipped.split(" …", 1)[1].rsplit("… [", 1)[0]
    assert "error: x" in kept and len(kept) <= log_headers._HEADER_LINE_CHARS and kept in line
    assert not kept.startswith("\U0001f3fd")  # no orphan skin-tone modifier
    assert log_headers._clip(line) == log_headers._clip(line, 10)  # an early match: the head


def test_a_go_test_failure_is_the_first_key_error_not_none_found() -> None:
    """Go's verdict lines were counted as failed lines while the header said "none found"."""
    noise = "\n".join(f"ok  \tpkg/mod{i}\t0.01s" for i in range(300))
    log = noise + "\n--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3, want 4\nFAIL\nFAIL\tcalc\t0.002s\n"
    d = diagnose_log(log, 1)
    assert d.first_error == FirstError(line=301, end_line=302, pattern="test_fail",
                                       text="--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3, want 4")
    assert d.error_lines == d.failed_lines == 3


_RULE = "-" * 70
_VERDICTS = {  # log lines, the error the verdict stands for, the first key error's lines
    "unittest": (["test_a (t.T) ... ok", "test_b (t.T) ... FAIL", "", "=" * 70, "FAIL: test_b (t.T)", _RULE,
                  "Traceback (most recent call last):", '  File "/app/t.py", line 5, in test_b',
                  "    self.assertEqual(total(), 50.97)", "AssertionError: 50.98 != 50.97", "", _RULE,
                  "Ran 2 tests in 0.001s", "", "FAILED (failures=1)"],
                 "AssertionError: 50.98 != 50.97", (5, 10)),
    "unittest error": (["=" * 70, "ERROR: test_c (t.T)", _RULE, "Traceback (most recent call last):",
                        '  File "/app/t.py", line 9, in test_c', '    d["k"]', "KeyError: 'k'"],
                       "KeyError: 'k'", (2, 7)),
    "gradle": (["> Task :app:compileJava FAILED", "/app/src/main/java/App.java:5: error: cannot find symbol",
                '        Strin g = "x";', "        ^", "  symbol:   class Strin", "  location: class App",
                "1 error", "", "FAILURE: Build failed with an exception."], "location: class App", (1, 6)),
    "pytest collect": (["collected 0 items / 1 error", "", "=" * 36 + " ERRORS " + "=" * 36,
                        "_____________________ ERROR collecting tests/test_a.py ______________________",
                        "ImportError while importing test module '/app/tests/test_a.py'.",
                        "E   ModuleNotFoundError: No module named 'requests'"],
                       "No module named 'requests'", (4, 6)),
    "webpack": (["asset main.js 1 KiB [emitted]", "ERROR in ./src/index.js 3:0-25",
                 "Module not found: Error: Can't resolve './missing' in '/app/src'"],
                "Can't resolve", (2, 3)),
    "go test -v": (["=== RUN   TestAdd", "    add_test.go:10: Add(1, 2) = 4, want 3",
                    "--- FAIL: TestAdd (0.00s)", "=== RUN   TestSub", "--- PASS: TestSub (0.00s)",
                    "FAIL", "exit status 1",
                    "FAIL\texample.com/m\t0.002s"], "Add(1, 2) = 4, want 3", (2, 3)),
    "go subtest": (["=== RUN   TestAdd/neg", "    --- PASS: TestAdd/pos (0.00s)",
                    "        add_test.go:10: got -4", "    --- FAIL: TestAdd/neg (0.00s)",
                    "--- FAIL: TestAdd (0.00s)"], "got -4", (3, 4)),
}


@pytest.mark.parametrize("name", sorted(_VERDICTS))
def test_a_verdict_line_is_quoted_with_the_error_it_stands_for(name: str) -> None:
    """A verdict or title line (``FAIL: test_b (t.T)``, ``> Task :app:compileJava FAILED``) was the
    whole first key error: the traceback, javac error or E line after it (for ``go test -v`` the
    test's log before it) was left out of the header."""
    lines, error, (line, end_line) = _VERDICTS[name]
    first = diagnose_log("\n".join(lines) + "\n", 1).first_error
    assert first is not None and error in first.text
    assert (first.line, first.end_line) == (line, end_line)


@pytest.mark.parametrize("log", [
    "t.py::test_a FAILED [ 50%]\nt.py::test_b FAILED [100%]\n\nE   assert 1 == 2\n",  # another verdict first
    "t.py::test_a FAILED [ 50%]\nt.py::test_b PASSED [ 60%]\nt.py::test_c PASSED [ 70%]\n"
    "t.py::test_d PASSED [ 80%]\nE   assert 1 == 2\n",  # too far
])
def test_a_verdict_takes_no_error_of_another_verdict_or_far_below(log: str) -> None:
    first = diagnose_log(log, 1).first_error
    assert first is not None and (first.line, first.end_line) == (1, 1)


_TOOL_ERRORS = {  # log lines, exit code, the first key error's line and pattern
    "yarn v1": (["yarn install v1.22.19", "[1/4] Resolving packages...",
                 'error Couldn\'t find package "left-padd" on the "npm" registry.',
                 "info Visit https://yarnpkg.com/en/docs/cli/install for documentation"], 1, 3, "yarn_err"),
    "pnpm": (["Progress: resolved 1, reused 0, downloaded 0, added 0",
              " ERR_PNPM_FETCH_404  GET https://registry.npmjs.org/left-padd: Not Found - 404", "",
              "This error happened while installing a direct dependency of /app"], 1, 2, "pnpm_err"),
    "eslint": (["", "/app/src/app.js", "  2:1   warning  Unexpected console statement  no-console",
                "  10:7  error    'x' is assigned a value but never used  no-unused-vars", "",
                "✖ 2 problems (1 error, 1 warning)"], 1, 4, "error"),
    "kubectl": (['Error from server (NotFound): deployments.apps "web" not found'], 1, 1, "error"),
    "go build": (["# example.com/m", "./main.go:5:2: undefined: foo"], 1, 2, "located"),
    "go test compile": (["# example.com/m [example.com/m.test]", "./main_test.go:5:2: undefined: foo",
                         "FAIL\texample.com/m [build failed]", "FAIL"], 1, 2, "located"),
    "ruff": (["src/a.py:1:8: F401 [*] `os` imported but unused", "Found 1 error."], 1, 1, "located"),
    "shell 127": (["+ cd /app", "+ pytest -q", "bash: line 2: pytest: command not found"], 127, 3,
                  "not_found"),
    "ENOENT": (["python: can't open file '/app/manage.py': [Errno 2] No such file or directory"], 2, 1,
               "not_found"),
    "cmake": (["-- Detecting CXX compile features - done", "CMake Error at CMakeLists.txt:27 (find_package):",
               '  Could not find a package configuration file provided by "LLVM"', "",
               "-- Configuring incomplete, errors occurred!"], 1, 2, "error"),
    "apt": (["Ign:1 http://archive.ubuntu.com/ubuntu jammy InRelease",
             "Err:2 http://security.ubuntu.com jammy InRelease",
             "  Temporary failure resolving 'proxy'", "Reading package lists... Done",
             "E: Unable to locate package llvm-dev"], 100, 2, "error"),
    "apt, no fetch error": (["Reading package lists... Done", "E: Unable to locate package llvm-dev"], 100, 2,
                            "error"),
    "go test -json": (['{"Action":"run","Package":"m","Test":"TestAdd"}',
                       '{"Action":"output","Package":"m","Test":"TestAdd","Output":"=== RUN   TestAdd\\n"}',
                       '{"Action":"output","Test":"TestAdd","Output":"    add_test.go:10: got 3\\n"}',
                       '{"Action":"output","Test":"TestAdd","Output":"--- FAIL: TestAdd (0.00s)\\n"}',
                       '{"Action":"fail","Package":"m","Test":"TestAdd","Elapsed":0}'], 1, 3, "go_json_fail"),
    "any path:line:col": (["Linking", "lib/parse.zig:41:13: expected type 'u8', found 'i32'", "done"], 1, 2,
                          "located"),
}


@pytest.mark.parametrize("name", sorted(_TOOL_ERRORS))
def test_common_tools_errors_are_key_errors(name: str) -> None:
    """yarn, pnpm, eslint, kubectl, go build/vet, ruff, a shell's missing command or file: the
    header said ``none found`` (or named a later summary line)."""
    lines, code, line, pattern = _TOOL_ERRORS[name]
    d = diagnose_log("\n".join(lines) + "\n", code)
    assert d.first_error is not None and (d.first_error.line, d.first_error.pattern) == (line, pattern)
    assert d.error_lines >= 1


@pytest.mark.parametrize("log", [
    "error handling middleware registered\nserving on :8080\n",
    "+ ls /app/cache\nls: cannot access '/app/cache': No such file or directory\n+ mkdir -p /app/cache\n",
    "+ which rg || echo none\nbash: rg: command not found\nnone\n",
    "src/a.py:1:8: F401 [*] `os` imported but unused (fixed)\n./main.go:5:2: note: inlined\n",
    "lib/parse.zig:41:13: note: here\n",
    "Ran 12 checks: errors=0 failures=0\nlint: 0 errors, 0 warnings\n",
])
def test_tool_words_in_a_passing_run_are_no_key_errors(log: str) -> None:
    """The words a failing tool prints, a passing run prints too: they count only in a failing
    command's output (a zero count never)."""
    d = diagnose_log(log, 0)
    assert d.first_error is None and d.error_lines == 0
    if "errors=0" in log:
        assert diagnose_log(log, 1).first_error is None


@pytest.mark.parametrize(("line", "counted"), [
    ("test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out", False),
    ("[INFO] Tests run: 3, Failures: 0, Errors: 0, Skipped: 0, Time elapsed: 0.01 s", False),
    ("Ran 12 checks: errors=0 failures=0", False),
    ("summary: failed = 0, passed = 12", False),
    ("test result: FAILED. 0 passed; 1 failed; 0 ignored", True),
    ("[ERROR] Tests run: 2, Failures: 1, Errors: 0, Skipped: 0 <<< FAILURE!", True),
    ("10 failed, 2 passed", True),
    ("failures=0 but the run FAILED", True),
    ("Failures: 0.5% of requests", True),
])
def test_a_zero_failure_count_is_no_failed_line(line: str, counted: bool) -> None:
    """``0 failed`` and ``Failures: 0`` were counted: a cargo run with one failing test had a
    failed line per test binary."""
    assert diagnose_log(f"{line}\n", 1).failed_lines == int(counted)


def test_an_msbuild_error_comes_before_its_build_failed_summary() -> None:
    log = "Build started.\nProgram.cs(12,5): error CS1002: ; expected\n    1 Error(s)\n\nBuild FAILED.\n"
    d = diagnose_log(log, 1)
    assert d.first_error is not None and (d.first_error.line, d.first_error.pattern) == (2, "error")


def test_a_quoted_error_block_closes_the_code_fence_it_opens() -> None:
    """The header quoted an error's continuation lines, ``  ```rust`` and 8 more, and never closed
    the fence: the log excerpt after it read as code (and its own fences inverted)."""
    body = "".join(f"  let x{i}: u8 = 300;\n" for i in range(12))
    log = ("\n".join(f"step {i} ok" for i in range(3000)) + "\nerror: snippet does not compile:\n  ```rust\n"
           + body + "  ```\n" + "\n".join(f"step {i} ok" for i in range(2000)) + "\n")
    assert open_fence(log) is None
    d = diagnose_log(log, 1)
    assert d.first_error is not None and "  ```rust" in d.first_error.text
    assert open_fence(d.first_error.text) == "  ```rust"
    framed = [h for h, is_framed in log_headers.header_variants(d, "artifact://x") if is_framed]
    assert framed and all(open_fence(h) is None for h in framed)
    for budget in (120, 300, 600, 2500):
        result = lean_log(log, 1, budget, cl100k, artifact_ref="artifact://x")
        assert result.tokens <= budget and open_fence(result.text) is None


def test_cargo_error_keeps_its_location_pointer() -> None:
    log, first, _ = cargo_log(random.Random(3))
    d = diagnose_log(log, 101)
    assert d.first_error is not None and d.first_error.text.split("\n")[:2] == [
        first, "  --> src/main.rs:41:18"]


def test_a_rust_panic_keeps_its_message_on_the_next_line() -> None:
    """Since Rust 1.73 a panic prints its message on the line after ``panicked at FILE:L:C:``,
    unindented: the block ended before it."""
    log = ("     Running `target/debug/m`\nthread 'main' panicked at src/main.rs:4:5:\n"
           "assertion `left == right` failed\n  left: 1\n right: 2\n"
           "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n")
    first = diagnose_log(log, 101).first_error
    assert first is not None and (first.line, first.end_line, first.pattern) == (2, 5, "panic")
    assert first.text.endswith("assertion `left == right` failed\n  left: 1\n right: 2")
    old_style = diagnose_log("thread 'main' panicked at 'boom', src/main.rs:4:5\nnext\n", 101).first_error
    assert old_style is not None and old_style.end_line == 1  # the message is on its line


def test_a_rustc_error_keeps_its_source_lines_and_labels() -> None:
    """rustc's source line starts with its number in column 0 (``14 |``): it ended the block, and
    the label saying what was wrong was left out."""
    log = ("   Compiling m v0.1.0 (/app)\nerror[E0308]: mismatched types\n  --> src/main.rs:14:18\n   |\n"
           '14 |     let y: i32 = "a";\n   |            ---   ^^^ expected `i32`, found `&str`\n\n'
           "For more information about this error, try `rustc --explain E0308`.\n")
    first = diagnose_log(log, 101).first_error
    assert first is not None and (first.line, first.end_line) == (2, 6)
    assert first.text.endswith("expected `i32`, found `&str`")


def test_a_log_that_fits_is_returned_unchanged() -> None:
    log = "ok\nERROR x\n"
    result = lean_log(log, 1, 100, quarter)
    assert result.text == log and not result.truncated


def test_tight_budget_degrades_the_header_but_keeps_the_exit_code() -> None:
    body = [f"step {i}" for i in range(2000)]
    tb = ["Traceback (most recent call last):"] + [f'  File "m{i}.py", line {i}, in f'
                                                   for i in range(40)] + ["KeyError: 'user'"]
    log = "\n".join(body[:1000] + tb + body[1000:])
    for budget in (30, 60, 120, 400):
        result = lean_log(log, 3, budget, quarter)
        assert result.tokens <= budget and not result.over_budget
        assert "exit code: 3" in result.text
    rich = lean_log(log, 3, 400, quarter).text
    assert "KeyError: 'user'" in rich and "lines of this error omitted" in rich
    tiny = lean_log(log, 3, 2, quarter)
    assert tiny.over_budget and tiny.text == MINIMAL_MARKER


log_lines = st.lists(
    st.sampled_from(["ok", "INFO step", "ERROR boom", "warning: w", "E   assert x",
                     "Traceback (most recent call last):", '  File "x"', "ValueError: v",
                     "FAILED t", "😀 unicode é", "", "npm ERR! x"]) | st.text(max_size=20),
    min_size=1, max_size=80,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=log_lines, budget=st.integers(0, 150),
       exit_code=st.none() | st.integers(-9, 255))
def test_lean_log_never_exceeds_and_keeps_whole_lines(lines: list[str], budget: int,
                                                      exit_code: int | None) -> None:
    log = "\n".join(line.replace("\n", " ") for line in lines)
    result = lean_log(log, exit_code, budget, quarter, artifact_ref="artifact://x")
    assert result.tokens == quarter(result.text)
    assert result.over_budget or result.tokens <= budget
    originals, _ = split_lines(log)
    for r in result.kept:  # whole lines; or an excerpt's characters, where no line fits its room
        window = "\n".join(originals[r.start - 1:r.end]) if result.unit == "line" else log[r.start - 1:r.end]
        assert window in result.text


# ------------------------------------------------------------------ the candidate-line scan


def _diagnosis_line_by_line(text: str, exit_code: int | None) -> LogDiagnosis:
    """The diagnosis as first written: every pattern tried on every line (the reference)."""
    lines, _ = split_lines(text)
    shown = (ESCAPE_SEQUENCE.sub("", diagnose_module._TO_COLUMN_ONE.sub("\r", line)) for line in lines)
    clean = [line.rstrip("\r").rpartition("\r")[2] for line in shown]
    first: FirstError | None = None
    errors = warnings = failed = 0
    failing = exit_code not in (None, 0)
    for i, line in enumerate(clean):
        name = log_patterns.match_line(line, -1, failing)
        if name is not None:
            errors += 1
            if first is None:
                start, end = diagnose_module._span(clean, i, name, failing)
                first = FirstError(line=start + 1, end_line=end + 1, pattern=name,
                                   text="\n".join(clean[start:end + 1]))
        warnings += bool(log_patterns.WARNING.search(line))
        failed += bool(log_patterns.FAILED.search(line))
    located = [i for i, line in enumerate(clean) if log_patterns.LOCATED.match(line)]
    if first is None and failing and located:
        first, errors = diagnose_module._first_error(clean, located[0], "located", True), 1
    return LogDiagnosis(exit_code=exit_code, first_error=first, error_lines=errors,
                        warning_lines=warnings, failed_lines=failed, total_lines=len(lines))


_PIECES = ["ERROR", "error:", "Error", "TypeError:", "error[E0308]:", "eRRor:", "warn", "WARNING",
           "DeprecationWarning", "fail", "FAILED", "Failures", "faıl", "faİl", "ſ", "K", "fatal:",
           "FATAL", "panic: ", "panicked at", "Segmentation fault", "SIGSEGV", "npm ERR! ",
           "npm error ", "make: ***", "gmake[2]: ***", "E   x", "E  ", "Traceback (most recent call last):",
           "java.lang.NullPointerException", "Exception", "\x1b[31m", "\x1b[0m", "er\x1b[1mror:", "\r",
           "--- FAIL: ", "FAIL", " FAIL  ", "error TS2322:", "error CS1002:", "\x1b(B", "\x1b]0;t",
           "\x07", "\x1b\\", "\x1b]8;;u\x1b\\", "\x1b[1G", "\x1b[G", "\x1b[2G",
           "\r\r", " ", "  ", "\t", "\n", "\n", "\n", "ok", "step 12", "é", "😀", "\ud800", "-", ":", "_",
           "x", "ERR_PNPM_X", "error ", "command not found", "No such file or directory", "a.go:1:2: x",
           "b.py:3:4: F401", ".pyi:1:2: E1", "Error from server", "CMake Error", "E: ", "Err:1 ",
           "  1:2  error  ", "x:1:2: y", "1", "PY:",
           '{"Test":"T","Output":"    x\\n"}', '{"Test":"T","Output":"--- FAIL: T"}',
           '"Output":"\\t--- FAIL: ',
           # translated messages (log_translations): each pattern behind its own hint
           "错误：", "错误", "致命错误：", "エラー: ", "오류:", "Fehler: ", "erreur : ", "errore:", "erro :",
           "Ошибка:", "ошибка", "警告：", "Warnung: ", "attention : ", "aviso:", "没有那个文件或目录",
           "未找到命令", "erreur fatale :", "schwerwiegender Fehler:", "x.c:1:2: 警告：", "x:1:2: note: ",
           "x:1:2: Warnung:", "：", "errored"]


@settings(max_examples=400, deadline=None)
@given(pieces=st.lists(st.sampled_from(_PIECES) | st.text(max_size=6), max_size=60),
       exit_code=st.none() | st.integers(-1, 3))
def test_the_candidate_scan_diagnoses_as_every_pattern_on_every_line(pieces: list[str],
                                                                      exit_code: int | None) -> None:
    """Only lines holding a pattern's word are searched: the diagnosis is the one every pattern
    tried on every line gives (colour codes, carriage returns, case folds, line starts)."""
    text = "".join(pieces)
    assert diagnose_log(text, exit_code) == _diagnosis_line_by_line(text, exit_code)



@pytest.mark.parametrize("line_blocks", [False, True], ids=["whole-candidates", "line-blocks"])
def test_a_log_cut_again_gives_what_a_first_cut_gives(line_blocks: bool) -> None:
    """The memo kept across cuts of one log (its lines, diagnosis, line blocks, probes) changes
    no result: cuts in any order equal cuts made with nothing remembered."""
    from contextfold.projections import truncate as truncate_module
    from contextfold.projections.tokens import get_counter

    log, _, _ = pytest_log(random.Random(11))
    counter = get_counter()
    rule = counter.line_splitting if line_blocks else None
    budgets = [4000, 3990, 2500, 4000, 600, 3000]

    def cut(budget: int) -> Truncation:
        return lean_log(log, 1, budget, counter.count, artifact_ref="artifact://x", line_splitting=rule)

    remembered = [cut(b) for b in budgets]
    fresh = []
    for b in budgets:
        truncate_module._PROBES.clear()
        fresh.append(cut(b))
    assert remembered == fresh
    assert all(r.tokens == counter.count(r.text) <= b for r, b in zip(remembered, budgets, strict=True))


def test_a_failing_one_line_output_shows_its_head_and_tail_not_only_the_diagnosis() -> None:
    """A failing API call answers with a JSON error body on one line: no whole line fits, and
    the grant showed the diagnosis and a marker only (64 of 800 tokens)."""
    import json

    body = json.dumps({"error": {"message": "rate limited, retry after 30s", "details": [
        {"i": i, "msg": f"item {i} failed validation"} for i in range(400)]}, "request": "req_77"})
    for budget in (120, 400, 800, 3000):
        result = lean_log(body, 1, budget, cl100k, artifact_ref="artifact:abc")
        assert result.truncated and result.tokens <= budget
        assert cl100k(result.text) == result.tokens
        assert "exit code: 1" in result.text.split("\n", 1)[0]  # the diagnosis comes first
        assert "artifact:abc" in result.text  # where the rest is
        assert "[first key error] line 1" in result.text  # the JSON error member is one
        assert result.unit == "char" and len(result.kept) == 2
        assert '{"error": {"message": "rate limited' in result.text  # the head
        assert '"request": "req_77"}' in result.text  # the tail
        assert result.tokens >= 0.9 * budget


@pytest.mark.parametrize(("line", "is_error"), [
    ('{"error": {"code": 429, "message": "rate limited"}}', True),
    ('{"errors": [{"field": "email"}]}', True),
    ('{"error": "invalid token"}', True),
    ('{"error": null, "result": [1, 2]}', False),
    ('{"errors": [], "ok": true}', False),
    ('{"error": false}', False),
])
def test_a_json_error_member_that_holds_something_is_a_key_error(line: str, is_error: bool) -> None:
    diagnosis = diagnose_log(f"GET /v1/items\n{line}\n", 1)
    assert (diagnosis.first_error is not None) == is_error
    if is_error:
        assert diagnosis.first_error is not None and diagnosis.first_error.line == 2


def test_a_negative_budget_is_refused_by_lean_log_as_by_every_cut() -> None:
    """The budget check is the one every cut's entry point shares (``check_budget``): the same
    error and message from ``lean_log`` as from ``truncate``."""
    messages = []
    with pytest.raises(InvalidInputError) as refused:
        lean_log("x\n" * 50, 1, -1, cl100k)
    messages.append(str(refused.value))
    with pytest.raises(InvalidInputError) as refused:
        truncate("x", -1, kind="log", count=cl100k)
    messages.append(str(refused.value))
    assert messages == ["max_tokens must be >= 0, got -1"] * 2
