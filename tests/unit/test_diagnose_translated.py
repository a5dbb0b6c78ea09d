"""The log diagnosis reads tools that speak the user's language (``projections.log_translations``).

Under ``LANG=zh_CN.UTF-8`` gcc prints ``错误：`` for ``error:``, git ``致命错误：`` for ``fatal:``,
coreutils ``没有那个文件或目录``: none was a key error, so a long failing build's log named the
closing ``make: *** … 错误 1`` line its first error and the compiler's error was cut away; in
German, Japanese or French the ``path:line:col:`` fallback named gcc's warning line.
"""

from __future__ import annotations

import pytest

from contextfold.projections import log_patterns
from contextfold.projections.diagnose import diagnose_log, lean_log
from contextfold.projections.tokens import get_counter

_ZH_ERROR = "src/module_200.c:42:12: 错误：‘config_timeout’未声明(在此函数内第一次使用)"


def _build_log(warning: str, error: str, closing: str) -> str:
    lines = ["mkdir -p build"]
    for i in range(400):
        lines.append(f"gcc -O2 -Wall -Iinclude -c src/module_{i:03d}.c -o build/module_{i:03d}.o")
        if i == 200:
            lines += ["src/module_200.c: In function ‘init_200’:", f"src/module_200.c:17:5: {warning}",
                      error, "   42 |     return config_timeout * 2;", "      |            ^~~~~~~~~~~~~~"]
    return "\n".join([*lines, closing]) + "\n"


def test_a_cut_chinese_build_log_keeps_gccs_error_not_makes_closing_line() -> None:
    log = _build_log("警告：未使用的变量‘tmp’ [-Wunused-variable]", _ZH_ERROR,
                     "make[1]: *** [Makefile:31：build/module_200.o] 错误 1")
    d = diagnose_log(log, 2)
    assert d.first_error is not None and d.first_error.pattern == "error"
    assert d.first_error.text.startswith(_ZH_ERROR) and d.warning_lines == 1 and d.error_lines == 2
    counter = get_counter("cl100k_base")
    cut = lean_log(log, 2, 2_000, counter.count, line_splitting=counter.line_splitting)
    assert cut.truncated and _ZH_ERROR in cut.text


@pytest.mark.parametrize(("warning", "error"), [
    ("Warnung: unbenutzte Variable »tmp« [-Wunused-variable]",
     "Fehler: »config_timeout« nicht deklariert (erste Benutzung in dieser Funktion)"),
    ("警告: 未使用の変数 ‘tmp’ [-Wunused-variable]", "エラー: ‘config_timeout’ が宣言されていません"),
    ("attention : variable « tmp » inutilisée [-Wunused-variable]",
     "erreur : « config_timeout » non déclaré (première utilisation dans cette fonction)"),
    ("경고: 사용되지 않는 변수 ‘tmp’ [-Wunused-variable]", "오류: ‘config_timeout’ 선언되지 않음"),
    ("предупреждение: неиспользуемая переменная «tmp»", "ошибка: «config_timeout» не описан"),
    ("attenzione: variabile \"tmp\" non usata", "errore: \"config_timeout\" non dichiarato"),
    ("aviso: variable ‘tmp’ sin usar", "error: ‘config_timeout’ no se declaró aquí"),
    ("警告：未使用的變數‘tmp’", "錯誤：‘config_timeout’ 未宣告"),
])
def test_gcc_in_another_language_names_its_error_not_its_warning(warning: str, error: str) -> None:
    located = f"src/module_200.c:42:12: {error}"
    d = diagnose_log(_build_log(warning, located, "make: *** [Makefile:31: all] Error 2"), 2)
    assert d.first_error is not None and d.first_error.pattern == "error"
    assert d.first_error.text.startswith(located) and d.warning_lines == 1


@pytest.mark.parametrize(("line", "pattern"), [
    ("致命错误：不是 git 仓库（或者任何父目录）：.git", "fatal"),
    ("main.c:1:10: 致命错误：stdio.h：没有那个文件或目录", "fatal"),
    ("main.c:1:10: 致命的エラー: stdio.h: そのようなファイルやディレクトリはありません", "fatal"),
    ("main.c:1:10: schwerwiegender Fehler: stdio.h: Datei oder Verzeichnis nicht gefunden", "fatal"),
    ("main.c:1:10: erreur fatale : stdio.h : Aucun fichier ou dossier de ce type", "fatal"),
    ("main.c:1:10: 치명적 오류: stdio.h: 그런 파일이나 디렉터리가 없습니다", "fatal"),
    ("ls: 无法访问 'build/app': 没有那个文件或目录", "not_found"),
    ("bash: pytset：未找到命令", "not_found"),
    ("bash: pytset: コマンドが見つかりません", "not_found"),
    ("bash: pytset: Befehl nicht gefunden", "not_found"),
    ("cat: x.txt: Нет такого файла или каталога", "not_found"),
    ("错误：无法解析主机", "error"),
    ("Ошибка: сборка прервана", "error"),
])
def test_translated_messages_are_key_errors(line: str, pattern: str) -> None:
    d = diagnose_log(f"building...\n{line}\ndone", 1)
    assert d.first_error is not None and (d.first_error.pattern, d.first_error.line) == (pattern, 2)


@pytest.mark.parametrize("line", ["没有错误：0 个", "编译完成，错误 0 个", "make: 没有什么可以做的为 'all'。",
                                  "Fehlerbehandlung aktiviert", "terreur: film", "エラーなし"])
def test_translated_words_in_passing_output_are_no_key_errors(line: str) -> None:
    assert diagnose_log(f"step\n{line}\nok", 1).first_error is None


def test_the_located_fallback_skips_warning_and_note_lines() -> None:
    """A compiler in a language the table does not know (Dutch gcc: ``fout:``): its first
    ``path:line:col:`` line that is no warning or note."""
    log = "\n".join(["cc -c a.c", "a.c:3:5: waarschuwing: ongebruikte variabele ‘x’",
                     "a.c:4:1: note: declared here", "a.c:5:2: 附注：此处声明",
                     "a.c:9:12: fout: ‘y’ niet gedeclareerd", "a.c:10:1: more", "exit 1"])
    d = diagnose_log(log, 1)
    assert d.first_error is not None and (d.first_error.pattern, d.first_error.line) == ("located", 5)
    warnings_only = log.replace("fout", "waarschuwing").replace("a.c:10:1: more\n", "")
    assert diagnose_log(warnings_only, 1).first_error is None


_LINES = ["src/a.c:1:2: 错误：x", "致命错误：y", "エラー: z", "오류: z", "Fehler: z", "erreur : z",
          "errore: z", "erro: z", "Ошибка: z", "x 错误 1", "没有错误：", "警告：w", "Warnung: w",
          "avertissement : w", "没有那个文件或目录", "命令：未找到命令", "error: e", "fatal: f",
          "the errored job", "erreur fatale : f", "error fatal: f", "make: *** [a] 错误 1",
          "ls: x: Datei oder Verzeichnis nicht gefunden"]


@pytest.mark.parametrize("line", _LINES)
def test_a_pattern_tried_by_halves_matches_as_its_documented_regex(line: str) -> None:
    """``match_line`` tries a translated pattern's English and translated halves each behind its
    own hint; the result is the first documented pattern (``KEY_ERROR_PATTERNS``) that matches,
    and the hint scan lets every pattern that matches run."""
    documented = next((name for name, pattern in log_patterns.KEY_ERROR_PATTERNS if pattern.search(line)),
                      None)
    assert log_patterns.match_line(line, -1, True) == documented
    hints = log_patterns.candidate_lines(line.lower()).get(0, 0)
    assert log_patterns.match_line(line, hints, True) == documented
    assert log_patterns.is_warning(line, hints) == bool(log_patterns.WARNING.search(line))
