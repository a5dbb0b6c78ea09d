"""Key-error and warning words of tools that speak the user's language, for the log diagnosis.

Why: under ``LANG=zh_CN.UTF-8`` gcc prints ``错误：`` for ``error:``, ``警告：`` for ``warning:``;
git ``致命错误：`` for ``fatal:``; coreutils ``没有那个文件或目录``; bash ``未找到命令``. The key-error
patterns knew English only: a long failing build's log named the closing ``make: *** … 错误 1``
line its first error and cut the compiler's error away; in German, Japanese or French the
``path:line:col:`` fallback named gcc's *warning* line.

The words are as the tools' catalogues (gcc, git, glibc, bash) print them, case and all, so each
pattern here is case-sensitive and a line it matches holds its lower-cased hint word: the patterns
run, as the English ones, only on the lines the hint scan found (:mod:`.log_patterns`), each
behind a hint bit of its own, so an English log pays nothing for them. A CJK word has no ``\\b``:
it must open the line or follow a space or a colon (``src/a.c:42:12: 错误：…``; ``没有错误：``, "no
errors:", is none).
"""

from __future__ import annotations

import re

__all__ = ["ERROR", "FATAL", "HINTS", "NOT_ERROR_WORDS", "NOT_FOUND", "WARNING"]

_CJK_WORD = r"(?<![^\s:\uff1a])"

FATAL = re.compile(_CJK_WORD + r"(?:致命错误|致命錯誤|致命的エラー|치명적 오류)[:\uff1a]"
                   r"|\b(?:schwerwiegender Fehler|erreur fatale|errore fatale|error fatal|erro fatal"
                   r"|фатальная ошибка) ?:")
"""gcc's ``fatal error:`` and git's ``fatal:`` (zh_CN, zh_TW, ja, ko, de, fr, it, es, pt, ru)."""
ERROR = re.compile(_CJK_WORD + r"(?:错误|錯誤|エラー|오류)[:\uff1a]"
                   r"|\b(?:Fehler|erreur|errore|erro|[Оо]шибка) ?:")
"""gcc's ``error:`` (the same languages; Spanish says ``error:``). French puts a space before the
colon."""
_NOT_FOUND_WORDS = (
    "没有那个文件或目录", "未找到命令",                                        # zh_CN
    "そのようなファイルやディレクトリはありません", "コマンドが見つかりません",  # ja
    "그런 파일이나 디렉터리가 없습니다", "명령어를 찾을 수 없음",                # ko
    "Datei oder Verzeichnis nicht gefunden", "Befehl nicht gefunden",          # de
    "Aucun fichier ou dossier de ce type", "commande introuvable",             # fr
    "No existe el fichero o el directorio", "No existe el archivo o el directorio",
    "orden no encontrada",                                                     # es
    "File o directory non esistente", "comando non trovato",                   # it
    "Нет такого файла или каталога", "команда не найдена",                     # ru
)
NOT_FOUND = re.compile("|".join(map(re.escape, _NOT_FOUND_WORDS)))
"""glibc's ``No such file or directory`` and bash's ``command not found``."""
WARNING = re.compile(_CJK_WORD + r"(?:警告|경고)[:\uff1a]"
                     r"|\b(?:Warnung|attention|avertissement|aviso|advertencia|attenzione|предупреждение) ?:")
"""gcc's ``warning:``."""
NOT_ERROR_WORDS = (r"(?i:warning|warnung|attention|avertissement|aviso|advertencia|attenzione|waarschuwing"
                   r"|предупреждение|note|anmerkung|remarque|nota|примечание)|警告|경고|참고|附注|备注|備考|提示")
"""A compiler line's message words that say it is no error: a warning or a note, in English and
in the languages gcc speaks (case-insensitive: what follows ``path:line:col:``)."""

HINTS: dict[re.Pattern[str], tuple[str, ...]] = {
    FATAL: ("致命", "치명적 오류", "schwerwiegender fehler", "erreur fatale", "errore fatale", "error fatal",
            "erro fatal", "фатальная ошибка"),
    ERROR: ("错误", "錯誤", "エラー", "오류", "fehler", "erreur", "errore:", "errore :", "erro:", "erro :",
            "ошибка"),
    NOT_FOUND: tuple(w.lower() for w in _NOT_FOUND_WORDS),
    WARNING: ("警告", "경고", "warnung", "attention", "avertissement", "aviso", "advertencia", "attenzione",
              "предупреждение"),
}
"""Per pattern, lower-cased words one of which a line holds whenever the pattern matches it (the
patterns are case-sensitive, and lower-casing these keeps their length). Not ``erro``: every
``error`` holds it, and English lines would run the translations for nothing."""
