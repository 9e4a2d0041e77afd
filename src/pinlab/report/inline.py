"""Plots inlined in a page: a figure's SVG text (pinlab's own, :mod:`pinlab.report.chart`, or
matplotlib's) made fit to stand beside other plots in one HTML document (:func:`inline_svg`),
and :class:`Plot`, the figure the pages' ``plot`` macro renders (run and suite reports, sweep
results, validation)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from markupsafe import Markup

__all__ = ["Plot", "inline_svg"]

# -- inline SVG ----------------------------------------------------------------------------------

_ID = re.compile(r'\bid="([^"]+)"')
_ID_OR_REF = re.compile(r'(\bid="|href="#|url\(#)([^")]+)(?=[")])')
_PROLOGUE = re.compile(r"\A.*?(?=<svg\b)", re.S)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)
_GLOBAL_STYLE = re.compile(r'\s*<style type="text/css">\*\{[^<]*\}</style>', re.S)
_EMPTY_DEFS = re.compile(r"\s*<defs>\s*</defs>", re.S)
_SVG_OPEN = re.compile(r"<svg\b([^>]*)>")


def inline_svg(svg: str, prefix: str, label: str = "") -> Markup:
    """A figure's SVG text (:func:`pinlab.report.chart.chart_svg` or matplotlib's) made fit to
    inline in HTML next to other plots.

    Drops the XML declaration, DOCTYPE and ``<metadata>`` (they hold the only external URLs
    besides namespace names) and matplotlib's document-wide ``*{...}`` style rule; prefixes
    every ``id`` -- and every reference to one (``#id``, ``url(#id)``) -- with ``prefix``,
    so ids stay unique across the page; marks the root ``<svg class="plot" role="img">``
    with ``label`` as its accessible name. Both SVG writers escape their text, so the result
    is safe markup.
    """
    body = _PROLOGUE.sub("", svg, count=1)
    body = _METADATA.sub("", body, count=1)
    body = _GLOBAL_STYLE.sub("", body, count=1)
    body = _EMPTY_DEFS.sub("", body)
    ids = set(_ID.findall(body))

    def rename(m: re.Match[str]) -> str:
        name = m.group(2)
        return f"{m.group(1)}{prefix}{name}" if name in ids else m.group(0)

    body = _ID_OR_REF.sub(rename, body)
    aria = f' aria-label="{Markup.escape(label)}"' if label else ""
    body = _SVG_OPEN.sub(
        lambda m: f'<svg class="plot" role="img"{aria}{m.group(1)}>', body, count=1
    )
    return Markup(body.strip())


@dataclass(frozen=True, slots=True)
class Plot:
    """A figure on a page (the ``plot`` macro): its element id, caption, inline SVG and the
    files it links to."""

    id: str
    caption: str
    svg: Markup
    files: tuple[str, ...] = ()

    @classmethod
    def inline(
        cls, id: str, caption: str, svg: str, prefix: str, files: Iterable[str] = ()
    ) -> Plot:
        """The plot of a figure's ``svg``, inlined with ids under ``prefix`` (:func:`inline_svg`)
        and labelled with its caption."""
        return cls(id, caption, inline_svg(svg, prefix, caption), tuple(files))
