"""The suite page marked stale after a partial rerun.

``pinlab run SCENARIO --out DIR`` into a directory that holds a suite page (``DIR/report.html``,
written by a run of several scenarios) rewrites that scenario's run directories but not the
page, which would go on showing the old verdicts and numbers. Rebuilding the page needs every
scenario's verdict, which only a run of all of them has, so instead the page gets a banner
naming the scenarios rerun since it was written (accumulated over reruns) and the command
that rebuilds it; a full run writes a new page without one.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable
from pathlib import Path

from pinlab import fsutil
from pinlab.report.html import REPORT_FILE, anchor_slug

__all__ = ["PLACEHOLDER", "mark_stale", "stale_scenarios"]

PLACEHOLDER = "<!-- pinlab:stale -->"
"""Where the suite template leaves room for the banner."""

_BANNER = re.compile(r'<div class="stale" id="stale" data-scenarios="([^"]*)">.*?</div>', re.S)
_SUITE_KICKER = '<div class="kicker">pinlab suite report</div>'


def stale_scenarios(page: str) -> list[str]:
    """The scenarios ``page``'s stale banner names (none: the page is current)."""
    found = _BANNER.search(page)
    if found is None:
        return []
    names = json.loads(html.unescape(found.group(1)))
    return [str(name) for name in names]


def _banner(scenarios: list[str], out: Path) -> str:
    names = html.escape(json.dumps(scenarios), quote=True)  # any name, spaces included
    items = ", ".join(
        f'<a href="#scenario-{html.escape(anchor_slug(s), quote=True)}">{html.escape(s)}</a>'
        for s in scenarios
    )
    rebuild = html.escape(f"pinlab run --out {out}")
    return (
        f'<div class="stale" id="stale" data-scenarios="{names}"><strong>Stale.</strong> '
        f"Rerun alone after this page was written: {items}. "
        + ("Its section below is" if len(scenarios) == 1 else "Their sections below are")
        + " out of date; the other scenarios are as they were. "
        f"<code>{rebuild}</code> rebuilds this page.</div>"
    )


def mark_stale(out: Path | str, scenarios: Iterable[str]) -> Path | None:
    """Mark the suite page ``out/report.html`` stale for ``scenarios`` (added to those it
    already names), atomically; the page's path, or None when ``out`` holds no suite page
    (nothing to mark: a run directory's own page is rewritten by its run)."""
    page_path = Path(out) / REPORT_FILE
    try:
        page = page_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    if _SUITE_KICKER not in page:
        return None
    names = list(dict.fromkeys([*stale_scenarios(page), *scenarios]))
    banner = _banner(names, Path(out))
    if _BANNER.search(page):
        page = _BANNER.sub(lambda _: banner, page, count=1)
    elif PLACEHOLDER in page:
        page = page.replace(PLACEHOLDER, banner, 1)
    else:  # a page without the placeholder: the banner goes first in <main>
        page = page.replace("<main>", "<main>\n" + banner, 1)
    fsutil.write_atomic(page_path, page)
    return page_path
