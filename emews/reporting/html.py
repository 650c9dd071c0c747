"""One self-contained HTML page: the header, every plot as an embedded PNG, and the tables.

No script, no stylesheet or font from elsewhere, no request of any kind: the file opens
offline, from a login node's scratch directory or an e-mail attachment.
"""

from __future__ import annotations

import base64
from html import escape

import pandas as pd

from emews.output.numbers import number
from emews.reporting.figures import HEIGHT_PX, WIDTH_PX, Plot

STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; max-width: 1160px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } table.header th { width: 11em; }
img { max-width: 100%; height: auto; } p.caption { color: #555; font-size: 0.9em; }
nav a { margin-right: 1em; }
"""


def table(frame: pd.DataFrame, css_class: str = "") -> str:
    head = "".join(f"<th>{escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(_cell(v))}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False, name=None)
    )
    return f'<table class="{css_class}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _cell(value: object) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return number(value)


def section(plot: Plot, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    extra = table(plot.table.head(50), "causes") if plot.table is not None and not plot.table.empty else ""
    return (
        f'<section id="plot-{plot.name}" class="plot"><h2>{escape(plot.title)}</h2>'
        f'<img id="img-{plot.name}" alt="{escape(plot.title)}" width="{WIDTH_PX}" height="{HEIGHT_PX}" '
        f'src="data:image/png;base64,{data}">'
        f'<p class="caption">{escape(plot.caption)}</p>{extra}</section>'
    )


def page(
    title: str,
    header: list[tuple[str, str]],
    plots: list[tuple[Plot, bytes]],
    top: pd.DataFrame,
    notes: list[str],
    table_section: tuple[str, str] = ("top-k", "Top evaluations"),
) -> str:
    """The whole page: the header, a section per plot, then ``top`` under ``table_section`` (its id and title)."""
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in header)
    nav = "".join(f'<a href="#plot-{p.name}">{escape(p.title)}</a>' for p, _ in plots)
    top_id, top_title = table_section
    top_html = table(top, top_id) if not top.empty else "<p>No successful evaluation yet.</p>"
    note_html = "".join(f'<p class="caption">{escape(n)}</p>' for n in notes)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<link rel="icon" href="data:,"><style>{STYLE}</style></head><body>'
        f'<h1>{escape(title)}</h1><section id="header"><table class="header">{rows}</table></section>'
        f'<nav>{nav}<a href="#{top_id}">{escape(top_title)}</a></nav>'
        + "".join(section(p, png) for p, png in plots)
        + f'<section id="{top_id}"><h2>{escape(top_title)}</h2>{top_html}</section>{note_html}</body></html>\n'
    )
