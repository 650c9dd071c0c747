"""``emews report``: every plot of an experiment, as one HTML page, PNGs, or one PDF.

Files are written under private temporary names and renamed into place only once every one of
them is written (:class:`Staged`), so a report that cannot be written (a full disk, ``ulimit -f``,
an unwritable folder) or is interrupted leaves the previous one (or nothing: not even an empty
plots folder), never half a report.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from matplotlib.figure import Figure

from emews.core.errors import ConfigError, write_failure
from emews.core.results import utf8_text
from emews.reporting import compare, curves, failures, gantt, html, load, parameters, slices, summary, trajectory
from emews.reporting.data import ExperimentData
from emews.reporting.figures import DPI, Plot, ReportPlot

Format = Literal["html", "png", "pdf"]
FORMATS: tuple[Format, ...] = ("html", "png", "pdf")
#: the plots of a report, in page order (each makes ``None`` when it has nothing to show)
PLOTS: tuple[ReportPlot, ...] = (
    trajectory.Trajectory(),
    load.Load(),
    gantt.Gantt(),
    parameters.Parallel(),
    parameters.Importance(),
    slices.Slices(),
    slices.Contour(),
    failures.Failures(),
    curves.Curves(),
)
#: in a folder of PNGs (``--format png``, an HTML report's plots): the plots the report wrote there
PNG_MANIFEST = ".emews-report.json"


@dataclass(frozen=True)
class Written:
    """What a report wrote: the main file (or folder) and the PNGs, by plot name."""

    path: Path
    pngs: dict[str, Path]
    skipped: list[str]


#: the file suffixes of the formats written to one file (``png`` writes a folder)
SUFFIXES: dict[str, tuple[str, ...]] = {"html": (".html", ".htm"), "pdf": (".pdf",)}


def chosen_format(out: Path | None, fmt: Format | None) -> Format:
    """``fmt``, else the format ``out``'s suffix names (``report.pdf``: pdf), else html; an ``out``
    whose suffix names another format than ``fmt`` is refused (``--out r.pdf`` wrote HTML into r.pdf)."""
    suffix = "" if out is None else out.suffix.lower()
    named = next((name for name, suffixes in SUFFIXES.items() if suffix in suffixes), None)
    if fmt is None:
        return named or "html"  # type: ignore[return-value]
    if named is not None and named != fmt:
        allowed = f"--format {named}, or an --out " + ("folder" if fmt == "png" else f"ending in {SUFFIXES[fmt][0]}")
        raise ConfigError(f"names a {suffix} file, not {fmt}", key="--out", file=str(out), allowed=allowed)
    return fmt


def default_output(exp_dir: Path, fmt: Format) -> Path:
    return exp_dir / {"html": "report.html", "png": "report-plots", "pdf": "report.pdf"}[fmt]


def png_folder(out: Path) -> Path:
    """Where the PNGs of an HTML report go: ``report-plots`` beside ``report.html``."""
    return out.with_name(f"{out.stem}-plots")


def plots(data: ExperimentData) -> tuple[list[Plot], list[str]]:
    """The plots that have something to show, and the names of those that had not."""
    made, skipped = [], []
    for kind in PLOTS:
        plot = kind.make(data)
        if plot is None:
            skipped.append(kind.name)
        else:
            made.append(plot)
    return made, skipped


def write(data: ExperimentData, out: Path, fmt: Format, top: int = 10, *, out_given: bool = True) -> Written:
    """Write the report of ``data`` to ``out`` as ``fmt``; ``out_given``: the user named ``out``
    (``--out``), so a failure to write it is laid at that key, else at the experiment's folder."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}", key="--format", allowed=", ".join(FORMATS))
    if top < 1:
        raise ConfigError(f"must be at least 1, not {top}", key="--top")
    out = _checked_out(out, fmt)
    made, skipped = plots(data)
    if fmt == "pdf":
        staged = Staged()
        try:
            staged.file(out, lambda tmp: _pdf(data, made, top, tmp))
            staged.commit()
        except OSError as exc:
            raise staged.failed(exc, out, out_given) from None
        return Written(out, {}, skipped)
    images = [(p, p.png()) for p in made]

    def page() -> str:
        none = failures.none_line(data)
        empty = [name for name in skipped if not (name == "failures" and none)]
        notes = ([none] if none else []) + ([f"Not shown (nothing to plot yet): {', '.join(empty)}."] if empty else [])
        title = f"emews report: {data.exp_dir.name}"
        return html.page(title, summary.header(data), images, summary.top_k(data, top), notes)

    return _write_images(out, fmt, images, page, skipped, out_given)


#: where ``emews report A B ...`` writes by default: in the current folder, as no experiment owns it
COMPARISON_FILE = "comparison.html"


def write_comparison(experiments: list[ExperimentData], out: Path, fmt: Format, *, out_given: bool = True) -> Written:
    """The comparison of ``experiments`` (:mod:`emews.reporting.compare`) as an HTML page with its plot
    beside it, or the plot as a PNG in a folder; staged as a report is (:class:`Staged`)."""
    if fmt == "pdf":
        raise ConfigError("a comparison is written as html or png", key="--format", allowed="html, png")
    compare.check_comparable(experiments)
    out = _checked_out(out, fmt)
    plot = compare.overlay(experiments)
    images = [(plot, plot.png())]

    def page() -> str:
        title = f"emews report: {', '.join(compare.labels(experiments))}"
        table, section = compare.table(experiments), ("experiments", "Experiments")
        return html.page(title, compare.header(experiments), images, table, [], table_section=section)

    return _write_images(out, fmt, images, page, [], out_given)


def _checked_out(out: Path, fmt: Format) -> Path:
    """``out`` made absolute, or a ConfigError naming ``--out``: its folder missing, a file where the PNGs'
    folder goes, a folder where the file goes."""
    out = out.absolute()
    if not out.parent.is_dir():
        raise ConfigError("its folder does not exist", key="--out", file=str(out))
    if fmt == "png" and out.exists() and not out.is_dir():
        raise ConfigError("is a file", key="--out", file=str(out), allowed="a folder for the PNGs (made if missing)")
    if fmt != "png" and out.is_dir():
        raise ConfigError("is a folder", key="--out", file=str(out), allowed=f"the {fmt.upper()} file to write")
    return out


def _write_images(
    out: Path,
    fmt: Format,
    images: list[tuple[Plot, bytes]],
    page: Callable[[], str],
    skipped: list[str],
    out_given: bool,
) -> Written:
    """The PNGs of ``images`` (in ``out`` as ``png``; beside the page as ``html``, with the page ``page()``
    at ``out``), staged and renamed into place together; then the older plots not drawn now removed."""
    staged = Staged()
    folder = out if fmt == "png" else png_folder(out)
    try:
        earlier, drawn = _stage_pngs(staged, folder, images)
        if fmt == "html":
            text = page()
            staged.file(out, lambda tmp: tmp.write_text(text, encoding="utf-8", errors="backslashreplace"))
        staged.commit()
    except OSError as exc:
        raise staged.failed(exc, out, out_given) from None
    _remove_older_plots(folder, earlier - set(drawn), out_given)
    return Written(out, {name: folder / f"{name}.png" for name in drawn}, skipped)


class Staged:
    """The files of one report, each written under a private name beside its own (:meth:`file`),
    renamed into place together (:meth:`commit`) or all removed, with the folders made for them
    (:meth:`abandon`)."""

    def __init__(self) -> None:
        self._files: list[tuple[Path, Path]] = []  # (private name, final name)
        self._made: list[Path] = []
        self.current: Path | None = None  # the file or folder being written (what a failure names)

    def folder(self, path: Path) -> None:
        self.current = path
        if not path.is_dir():
            path.mkdir()  # mode 0777 less the umask, like every file made here
            self._made.append(path)

    def file(self, path: Path, fill: Callable[[Path], object]) -> None:
        tmp = _private_name(path)
        self._files.append((tmp, path))
        self.current = path
        fill(tmp)

    def commit(self) -> None:
        for tmp, path in self._files:
            self.current = path
            os.replace(tmp, path)
        self._files, self.current = [], None

    def failed(self, error: OSError, out: Path, out_given: bool) -> ConfigError:
        """:meth:`abandon`, and the error to raise: the file being written, the cause, ``--out`` when given."""
        self.abandon()
        hint = "" if out_given else " (or write it elsewhere: --out)"
        return ConfigError(
            f"cannot write the report: {write_failure(error)}{hint}; nothing was written",
            file=str(self.current or out),
            key="--out" if out_given else None,
        )

    def abandon(self) -> None:
        for tmp, _ in self._files:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        for folder in reversed(self._made):
            with contextlib.suppress(OSError):
                folder.rmdir()


def _stage_pngs(staged: Staged, folder: Path, images: list[tuple[Plot, bytes]]) -> tuple[set[str], list[str]]:
    """Stage ``NAME.png`` for each plot in ``folder`` (made if missing) and its :data:`PNG_MANIFEST`;
    the plots an earlier report wrote there, and those drawn now."""
    staged.folder(folder)
    earlier = _manifest(folder)
    for plot, png in images:
        staged.file(folder / f"{plot.name}.png", functools.partial(Path.write_bytes, data=png))
    drawn = sorted(plot.name for plot, _ in images)
    if drawn or earlier:
        text = json.dumps({"plots": drawn}) + "\n"
        staged.file(folder / PNG_MANIFEST, functools.partial(Path.write_text, data=text, encoding="utf-8"))
    return earlier, drawn


def _remove_older_plots(folder: Path, names: set[str], out_given: bool) -> None:
    """Remove the PNGs an earlier report wrote in ``folder`` (listed in :data:`PNG_MANIFEST`) of the plots
    not drawn this time; nothing else in the folder is touched, as ``--out`` may name a folder of the
    user's (their own ``failures.png`` included)."""
    for name in sorted(names):
        path = folder / f"{name}.png"
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise ConfigError(
                f"cannot remove an older plot: {write_failure(exc)}", file=str(path), key="--out" if out_given else None
            ) from None


def _manifest(folder: Path) -> set[str]:
    """The plots an earlier report wrote into ``folder`` (none when it left no readable list)."""
    try:
        plots = json.loads((folder / PNG_MANIFEST).read_text(encoding="utf-8")).get("plots", [])
    except (OSError, ValueError, AttributeError):
        return set()
    known = {kind.name for kind in PLOTS}
    return {name for name in plots if isinstance(name, str) and name in known}


def _pdf(data: ExperimentData, made: list[Plot], top: int, path: Path) -> None:
    from matplotlib.backends.backend_pdf import PdfPages

    with PdfPages(path) as pdf:
        pdf.savefig(_text_page(data, top), dpi=DPI)
        for plot in made:
            pdf.savefig(plot.figure, dpi=DPI)


def _text_page(data: ExperimentData, top: int) -> Figure:
    """The header and the top-k table as a page of text (the PDF's first page)."""
    fig = Figure(figsize=(11, 8.5), dpi=DPI)
    lines = [f"emews report: {data.exp_dir.name}", ""] + [f"{k:>16}  {v}" for k, v in summary.header(data)]
    table = summary.top_k(data, top)
    lines += ["", "Top evaluations", ""] + (
        table.to_string(index=False).splitlines() if not table.empty else ["no successful evaluation yet"]
    )
    text = utf8_text("\n".join(line[:150] for line in lines))  # a non-UTF-8 file name's surrogates escaped
    fig.text(0.03, 0.97, text, family="monospace", fontsize=7, va="top")
    return fig


def _private_name(path: Path) -> Path:
    """A hidden name beside ``path`` that no other writer uses."""
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
