"""What names a failure: the one line of an error text that says why an evaluation failed.

A Python objective's error is its traceback, which the exception's line ends; a failed command's
error starts with the line of its stderr that names the problem (argparse's ``prog: error: ...``,
see :func:`meaningful_line`); any other error says it in its first line. Failures of one cause
differ at most in the values they quote (a point's numbers, a task's name): :func:`cause_key`
masks those, so that they count as one cause (fail fast, the end-of-run summary).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

#: longest cause shown where space is short (a table cell, a plot label)
MAX_CAUSE_CHARS = 120
#: how many lines of a failed process's stderr (or stdout) its error quotes
TAIL_LINES = 20
#: a line that names an error: ``prog: error: ...``, ``ValueError: ...``, ``Fatal ...``, ``Exception ...``
_NAMES_ERROR = re.compile(
    r"error|exception|fatal|abort|denied|not found|no such|cannot|can't|"
    r"^[A-Za-z_][\w.]*(Interrupt|Exit|Iteration)\b",
    re.IGNORECASE,
)
#: a traceback's frame line: ``File "PATH", line N, in NAME`` (a SyntaxError's location: no ``in NAME``)
FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<name>.+))?$')
#: a traceback's lines that do not name the error: its header and carets (and its frames: :data:`FRAME`)
_NOISE = re.compile(
    r"^(Traceback \(most recent call last\):|During handling of the above|"
    r"The above exception was|[~^]+$)"
)
#: a line Python's ``warnings`` module writes (``path:12: RuntimeWarning: message``): never a cause
_WARNING = re.compile(r"^\S.*:\d+: [A-Za-z_]\w*Warning: ")
#: an informational or warning line of Abseil's / glog's log (TensorFlow's, JAX's, XLA's): ``I0000
#: 00:00:1795937890.790904   20052 port.cc:153] oneDNN custom operations are on. ... round-off errors
#: ...``: never a cause (its words may say "error"); their E (error) and F (fatal) lines may be
_LOG_INFO = re.compile(
    r"^(?:[IW]\d{4} \d\d:\d\d:\d+(?:\.\d+)?\s+\d+ \S+:\d+\] "
    # the E lines of its CUDA sources on a node without a usable GPU (``E0000 ... cuda_platform.cc:52]
    # failed call to cuInit: ...``, ``cuda_fft.cc:477] Unable to register cuFFT factory``): printed at
    # every start of TensorFlow on a CPU node, which then runs on the CPU: not why a task failed
    r"|E\d{4} \d\d:\d\d:\d+(?:\.\d+)?\s+\d+ (?:\S*/)?cuda\w*\.cc:\d+\] )"
)
#: quoted values and numbers (signed, decimal, exponent): what differs between failures of one cause
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
#: characters a terminal acts on rather than shows (ESC starts a colour, CR goes back over the line,
#: NUL, DEL, the C1 controls), tab aside: each as its Python escape
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x09}
_CONTROLS.update({0x0D: "\\r", 0x0A: "\\n"})


def visible(line: str) -> str:
    """``line`` with the control characters a terminal would act on written as their escapes
    (``\\x1b[31m``, ``\\r``, ``\\x00``): an error line printed or drawn shows what it holds."""
    return line if line.isprintable() else line.translate(_CONTROLS)


def _lines(text: str) -> list[str]:
    """``text``'s lines, broken at newlines only: a carriage return or other control stays in its line."""
    return text.replace("\r\n", "\n").split("\n")


def meaningful_line(text: str) -> str | None:
    """The line of a program's output that says what went wrong: the last line that names an error
    (argparse's ``prog: error: ...``, a Python exception line), else the last non-blank line that is
    not part of a traceback; ``None`` for blank output."""
    lines = _told(text)
    return error_line(text) or (lines[-1] if lines else None)


def with_output(message: str, stream: str, tail: str, *, errors_only: bool = False) -> str:
    """A process's end (``message``: its exit status or signal) with the last lines of its output
    ``stream``, the line of ``tail`` that names the problem first, as :func:`cause` reads it
    (``errors_only``: only a line that names an error, else ``message`` is the cause: after a signal,
    or a program that exited 0 without its result, whose last line is "Epoch 6/6 done")."""
    named = error_line(tail) if errors_only else meaningful_line(tail)
    return (f"{named}\n" if named else "") + f"{message}; last lines of {stream}:\n{tail}"


def error_line(text: str) -> str | None:
    """The last line of ``text`` that names an error (``None``: none does)."""
    return next((line for line in reversed(_told(text)) if _NAMES_ERROR.search(line)), None)


def _told(text: str) -> list[str]:
    """The non-blank lines of ``text`` without a traceback's header, frames and source lines, and
    without Python's warnings (``path:12: RuntimeWarning: ...`` and the source line under it: CANDLE
    warns about every key its benchmark does not define, and a warning is not why a program failed)
    and Abseil's informational and warning log lines (:data:`_LOG_INFO`: TensorFlow's)."""
    lines, frame, warning = [], False, False
    for raw in text.splitlines():
        line = raw.strip()
        # a frame's or a warning's source line
        source = (frame and raw.startswith("    ")) or (warning and raw.startswith("  "))
        frame, warning = FRAME.match(line) is not None, bool(_WARNING.match(raw))
        if line and not source and not frame and not warning and not _NOISE.match(line) and not _LOG_INFO.match(line):
            lines.append(line)
    return lines


#: a failed command's record that starts with its exit, not with the line that names the problem
#: (as stores written before the record led with that line hold it): the program's output follows
_COMMAND_EXIT = re.compile(
    r"^command .+ (?:exited with status -?\d+|(?P<signal>died of signal \S+)); last lines of (?:stderr|stdout):$"
)


#: how a failed command ended, as its record says it: ``command sh exited with status 3``, ``... died of signal SIGKILL``
_COMMAND_ENDED = re.compile(r"^command .+? (?:exited with status -?\d+|died of signal \S+?)(?=;| and wrote nothing|$)")
#: the heading over the output a failed command's record quotes: ``...; last lines of stderr:``
_QUOTED_OUTPUT = re.compile(r"; last lines of (?:stderr|stdout):$")


def command_ending(error: object) -> str | None:
    """How a failed command ended, from its record: ``command sh exited with status 3`` or
    ``command sh died of signal SIGKILL``; ``None`` for another error."""
    for line in _lines(str(error or "")):
        found = _COMMAND_ENDED.match(line.strip())
        if found is not None:
            return found[0]
    return None


def quoted_output(error: object) -> list[str]:
    """The output lines a failed command's record quotes under its ``; last lines of stderr:`` heading
    (none for another error)."""
    lines = _lines(str(error or ""))
    heading = next((i for i, line in enumerate(lines) if _QUOTED_OUTPUT.search(line)), None)
    return [] if heading is None else [line for line in lines[heading + 1 :] if line.strip()]


def cause(error: object) -> str:
    """The line that names a recorded error: the exception line ending a traceback (after the heading
    the traceback follows, as in ``objective setup failed:``), else its first line;
    a command's record that starts with its exit status (stores written before the record led with the
    meaningful line) is named by the line of its output that says what went wrong (argparse's
    ``prog: error: ...``; after a signal, the signal unless the output names an error).
    Its control characters are written as escapes (:func:`visible`): every place that prints or draws
    a failure (the run's summary, fail fast, status, check --try, the report) shows it so."""
    return visible(_named_by(str(error or "")))


def _named_by(error: str) -> str:
    """The line of :func:`cause`, as the error holds it."""
    lines = [line.strip() for line in _lines(error) if line.strip()]
    if not lines:
        return "(no message)"
    if lines[0].startswith("Traceback (most recent call last)"):
        return exception_line(error)
    if lines[0].endswith(":") and any(line.startswith("Traceback (most recent call last)") for line in lines[1:]):
        # a heading over a traceback: "objective setup failed: RuntimeError: ..."
        return f"{lines[0]} {exception_line(error)}"
    heading, header, rest = lines[0].partition(" Traceback (most recent call last):")
    if header and not rest and heading.endswith(":"):
        # a heading on the traceback's first line: "team rank 1 of 2 (rank 3 on node7) failed: ValueError: ..."
        return f"{heading} {exception_line(error)}"
    exit_ = _COMMAND_EXIT.match(lines[0])
    if exit_ is None:
        return lines[0]
    output = str(error).lstrip().partition("\n")[2]  # as written: indents mark source lines
    return (error_line(output) if exit_["signal"] else meaningful_line(output)) or lines[0]


def exception_line(traceback: str) -> str:
    """The line of a Python traceback that names its (last) exception: the first unindented line
    after its last frame, not the last line, which may end a message of several lines or a note."""
    raw = [line for line in _lines(traceback) if line.strip()]
    frames = [i for i, line in enumerate(raw) if line.startswith(" ") and FRAME.match(line)]
    after = raw[frames[-1] + 1 :] if frames else []
    return next((line.strip() for line in after if not line.startswith(" ")), raw[-1].strip())


def cause_key(line: str) -> str:
    """``line`` with its quoted values and numbers masked: two failures of one cause share it
    (``invalid int value: '500 100'`` and ``... '100 50'``, ``x=0.3`` and ``x=-1.5``)."""
    return _NUMBER.sub("#", _QUOTED.sub("'…'", line))


def clip(line: str, width: int = MAX_CAUSE_CHARS) -> str:
    """``line`` cut to ``width`` characters (``...`` marks a cut)."""
    return line if len(line) <= width else line[: width - 3] + "..."


@dataclass(frozen=True)
class CommonCause:
    """The most frequent cause among failures: the first error's line of it, and how many share it."""

    line: str
    count: int

    def __str__(self) -> str:
        return f"{self.count}x {self.line}"


def most_frequent(errors: Iterable[object]) -> CommonCause | None:
    """The cause most of ``errors`` share (ties: the one seen first); ``None`` without errors."""
    counts: Counter[str] = Counter()
    first: dict[str, str] = {}
    for error in errors:
        line = cause(error)
        key = cause_key(line)
        counts[key] += 1
        first.setdefault(key, line)
    if not counts:
        return None
    key, count = max(counts.items(), key=lambda item: item[1])  # max keeps the first of equal counts
    return CommonCause(first[key], count)
