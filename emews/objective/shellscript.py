"""The string a shell runs in a command objective: ``[sh, -c, "python3 model.py --lr {lr}"]``.

:func:`find_script` finds it in an argv (a shell program, then options up to the first word,
``c`` among them: ``-c``, ``-lc``, ``-e -o pipefail -c``); :func:`quoter` quotes a value for its
place in it (bare, inside ``'...'`` or inside ``"..."``), so that a value is one literal word and
never code; :func:`rewrite_words` replaces its plain words (no quotes, escapes or expansions), as
the workflow does to make the files it names absolute.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from pathlib import PurePath

#: programs whose ``-c`` takes a command string
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash"})
#: shell options whose value is the next argument
OPTIONS_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
#: a word: what lies between blanks and the shell's operators
WORD = re.compile(r"[^\s;&|()<>]+")
#: characters a double-quoted string still expands or ends on
DOUBLE_QUOTED_SPECIAL = re.compile(r'([\\$`"])')
#: the context of a character that belongs to the quoting itself (a quote mark, an escape)
SYNTAX = "\\"


def find_script(argv: Sequence[str]) -> int | None:
    """Where the command string of ``shell [options] -c STRING [args]`` is in ``argv``; ``None``
    when ``argv`` is not that form."""
    if not argv or PurePath(argv[0]).name not in SHELLS:
        return None
    takes_string, i = False, 1
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg in OPTIONS_WITH_VALUE:
            i += 2
        elif arg.startswith("--"):
            i += 1
        elif len(arg) > 1 and arg[0] in "-+":
            takes_string |= arg[0] == "-" and "c" in arg
            i += 2 if ("o" in arg[1:] or "O" in arg[1:]) else 1
        else:
            break
    return i if takes_string and i < len(argv) else None


def contexts(script: str) -> list[str]:
    """Per character of ``script``: ``""`` (bare), ``"'"`` or ``'"'`` (inside those quotes), or
    :data:`SYNTAX` (a quote mark, or a backslash and the character it escapes)."""
    out: list[str] = []
    quote, escaped = "", False
    for ch in script:
        if escaped:
            out.append(SYNTAX)
            escaped = False
        elif quote == "'":
            quote = "" if ch == "'" else quote
            out.append(SYNTAX if ch == "'" else "'")
        elif ch == "\\":
            escaped = True
            out.append(SYNTAX)
        elif ch == '"' or (ch == "'" and not quote):
            quote = "" if quote else ch
            out.append(SYNTAX)
        else:
            out.append(quote)
    return out


def quote_for(text: str, context: str) -> str:
    """``text`` written so that the shell reads it back literally at a place of ``context``."""
    if context == "'":
        return text.replace("'", "'\\''")
    if context == '"':
        return DOUBLE_QUOTED_SPECIAL.sub(r"\\\1", text)
    return shlex.quote(text)


def quoter(script: str) -> Callable[[str, int], str]:
    """A function that quotes a value for the place ``at`` in ``script`` where it goes."""
    places = contexts(script)
    return lambda text, at: quote_for(text, places[at] if at < len(places) else "")


def rewrite_words(script: str, replace: Callable[[str], str]) -> str:
    """``script`` with each plain word replaced by ``replace(word)`` (quoted as a word)."""
    places = contexts(script)

    def one(match: re.Match[str]) -> str:
        word = match[0]
        if any(places[match.start() : match.end()]) or "$" in word or "`" in word:
            return word
        new = replace(word)
        return word if new == word else shlex.quote(new)

    return WORD.sub(one, script)
