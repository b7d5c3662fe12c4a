"""Writing the report: every figure as PNG and SVG, and one self-contained HTML page."""
from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path

from ..._io import atomic_write

__all__ = ["figure_bytes", "render_html", "write_files"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
figure{margin:1em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.9em;color:#555}
table{border-collapse:collapse;font-size:.85em;margin:.6em 0 1.2em}
th,td{border:1px solid #ddd;padding:.25em .6em;text-align:right}th{background:#f4f4f4}
td:first-child,th:first-child,td.t{text-align:left}.note{background:#fff8e1;padding:.4em .8em;border-left:4px solid #E69F00}
nav ul{columns:2}.muted{color:#777;font-size:.85em}
"""


def figure_bytes(fig, fmt: str, dpi: int = 110) -> bytes:
    """The figure rendered to PNG or SVG bytes."""
    fig = getattr(fig, "figure", fig)  # an Axes -> its Figure
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi, metadata={"Date": None} if fmt == "svg" else None)
    return buf.getvalue()


def _cell(value) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "-inf" if value < 0 else "inf"
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.4e}"
    return str(value)


def _td(value) -> str:
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool) or hasattr(value, "dtype")
    return f"<td>{html.escape(_cell(value))}</td>" if numeric else f"<td class='t'>{html.escape(_cell(value))}</td>"


def _table(caption: str, df) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(_td(v) for v in row) + "</tr>" for row in df.itertuples(index=False))
    return (f"<table><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def render_html(sections, settings: dict, pngs: dict, title: str = "seqprob report") -> str:
    """The whole page; ``pngs`` maps figure name -> PNG bytes (embedded as data URIs)."""
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>",
             "<p>A language model is a probability distribution over sequences; every figure below "
             "compares models on the same tokens. Figures are also saved beside this file as PNG and SVG.</p>",
             "<nav><ul>" + "".join(f"<li><a href='#{s.key}'>{html.escape(s.title)}</a></li>" for s in sections)
             + "<li><a href='#settings'>Settings</a></li></ul></nav>"]
    for s in sections:
        parts.append(f"<section id='{s.key}'><h2>{html.escape(s.title)}</h2>")
        if s.intro:
            parts.append(f"<p>{html.escape(s.intro)}</p>")
        for note in s.notes:
            parts.append(f"<p class='note'>{html.escape(note)}</p>")
        for name, _, caption in s.figures:
            data = base64.b64encode(pngs[name]).decode("ascii")
            parts.append(f"<figure id='fig-{name}'><img alt='{html.escape(name)}' "
                         f"src='data:image/png;base64,{data}'><figcaption>{html.escape(caption)} "
                         f"<span class='muted'>({name}.png, {name}.svg)</span></figcaption></figure>")
        parts.extend(_table(caption, df) for caption, df in s.tables)
        parts.append(f"<p class='muted'>section time: {s.seconds:.1f} s</p></section>")
    rows = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(_cell(v))}</td></tr>"
                   for k, v in settings.items())
    parts.append(f"<section id='settings'><h2>Settings</h2><table><tbody>{rows}</tbody></table></section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_files(out_dir: Path, sections, settings: dict, formats=("png", "svg"),
                name: str = "report.html") -> Path:
    """Write every figure (each format, atomically) and then the HTML page; return its path."""
    pngs = {}
    for s in sections:
        for fig_name, fig, _ in s.figures:
            for fmt in formats:
                data = figure_bytes(fig, fmt)
                with atomic_write(out_dir / f"{fig_name}.{fmt}", "wb") as fh:
                    fh.write(data)
                if fmt == "png":
                    pngs[fig_name] = data
            if fig_name not in pngs:
                pngs[fig_name] = figure_bytes(fig, "png")
    path = out_dir / name
    with atomic_write(path, "w") as fh:
        fh.write(render_html(sections, settings, pngs))
    return path
