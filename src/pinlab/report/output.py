"""Writing a run's directory, atomically (``design.md``, "Outputs").

One run -- one variant of one scenario under one profile -- writes one directory::

    <out>/<scenario>/<variant>/
        config.toml    the fully resolved configuration (RunResult.config)
        summary.json   every headline metric with its unit (RunResult.summary_json(), verbatim)
        series.csv     every time series, ``series,time_s,value,unit`` (RunResult.series_csv())
        trace.json     the timeline, Chrome trace-event JSON for ui.perfetto.dev
                       (pinlab.report.trace.trace_json)

A rerun under a second profile (``pinlab run --compare-profile P``) writes next to it, in
``<out>/<scenario>/<variant>@<P>/`` (:func:`run_dir_name`).

Atomicity: every file of the run is written into a fresh hidden directory in the same parent
(``.<variant>.tmp-<random>``), flushed and fsynced, and only then renamed into place with
:func:`os.replace`. A directory cannot be renamed over a non-empty one, so an existing target
is first renamed aside (``.<variant>.old-<random>``), the new one renamed in, and the old one
removed; if the second rename fails the old directory is put back. So a reader sees either the
complete previous run or the complete new one, never a mixture, and a failure at any point
leaves no temporary directory behind.

Nothing here adds a timestamp, a host name or an absolute path: ``summary.json`` holds exactly
the runner's bytes, so the same scenario and seed give byte-identical files.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import tomli_w

from pinlab import provenance
from pinlab.gcpolicy import frozen_heap
from pinlab.report.trace import DEFAULT_MAX_EVENTS, TRACE_FILE, trace_json
from pinlab.scenarios.result import RunResult

__all__ = [
    "CONFIG_FILE",
    "SERIES_FILE",
    "SUMMARY_FILE",
    "TRACE_FILE",
    "config_toml",
    "run_dir_name",
    "write_run",
    "write_run_dir",
]

CONFIG_FILE = "config.toml"
SUMMARY_FILE = "summary.json"
SERIES_FILE = "series.csv"


def run_dir_name(variant: str, profile: str | None = None) -> str:
    """The directory name of one run: the variant, or ``<variant>@<profile>`` for a run under
    a compared second profile."""
    return f"{variant}@{profile}" if profile else variant


def _drop_none(value: Any) -> Any:
    """``value`` without ``None`` entries (TOML has no null: an unset optional field is
    simply absent from the file)."""
    if isinstance(value, Mapping):
        return {str(k): _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_drop_none(v) for v in value if v is not None]
    return value


def config_toml(config: Mapping[str, Any]) -> str:
    """``config`` as TOML text (``None`` values omitted; key order kept as given), below
    comment lines naming the pinlab version and command that wrote it."""
    return provenance.header() + tomli_w.dumps(_drop_none(config))


def _write_file(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8, no newline translation), flushed to disk."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with open(path, "wb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())


def _fresh_dir(parent: Path, stem: str) -> Path:
    """Create and return a new, empty, uniquely named directory ``parent/.<stem>-<random>``.

    ``os.mkdir`` (rather than :func:`tempfile.mkdtemp`) so the directory gets the user's
    umask, not mode 0700: it becomes the run directory."""
    while True:
        path = parent / f".{stem}-{secrets.token_hex(6)}"
        try:
            os.mkdir(path)
        except FileExistsError:  # pragma: no cover - 48 random bits
            continue
        return path


def _fsync_dir(path: Path) -> None:
    """Persist a directory's entries (a rename) where the platform allows it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - e.g. Windows
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def write_run_dir(target: Path, files: Mapping[str, str | bytes]) -> Path:
    """Atomically make ``target`` a directory holding exactly ``files`` (name -> text or
    bytes).

    The files are written into a temporary sibling of ``target`` which then replaces
    ``target`` (module docstring). On any failure the temporary directory is removed, an
    existing ``target`` is left (or put back) as it was, and the exception propagates.
    """
    target = Path(target)
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    for stale in (*parent.glob(f".{target.name}.tmp-*"), *parent.glob(f".{target.name}.old-*")):
        shutil.rmtree(stale, ignore_errors=True)  # left by a writer that was killed
    tmp = _fresh_dir(parent, f"{target.name}.tmp")
    try:
        for name, text in files.items():
            _write_file(tmp / name, text)
        _fsync_dir(tmp)
        if not target.exists():
            os.replace(tmp, target)
        else:
            old = _fresh_dir(parent, f"{target.name}.old")
            os.replace(target, old)  # an empty directory: replaced by the rename
            try:
                os.replace(tmp, target)
            except BaseException:
                os.replace(old, target)  # put the previous run back
                raise
            shutil.rmtree(old, ignore_errors=True)
        _fsync_dir(parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


@frozen_heap()  # the results are long-lived: gcpolicy
def write_run(
    result: RunResult,
    out: Path | str,
    *,
    compare_profile: bool = False,
    trace: bool = True,
    trace_categories: frozenset[str] | None = None,
    trace_max_events: int = DEFAULT_MAX_EVENTS,
    extra: Callable[[list[str]], Mapping[str, str | bytes]] | None = None,
) -> Path:
    """Write ``result``'s directory under ``out`` and return its path.

    ``extra`` adds files computed from the names of the others (the report:
    :func:`pinlab.report.html.run_report_files`), so that the directory appears complete --
    plots and ``report.html`` included -- or not at all.

    The directory is ``<out>/<scenario>/<variant>/``, or with ``compare_profile``
    ``<out>/<scenario>/<variant>@<profile>/`` (a rerun under a second profile). It holds
    ``config.toml``, ``summary.json``, ``series.csv`` and (with ``trace``) ``trace.json``
    limited to ``trace_categories`` and capped at ``trace_max_events`` events
    (:func:`~pinlab.report.trace.trace_json`), and replaces a previous run's directory
    atomically (:func:`write_run_dir`). All texts are computed before the first byte is
    written.
    """
    files = {
        CONFIG_FILE: config_toml(result.config),
        SUMMARY_FILE: result.summary_json(),
        SERIES_FILE: result.series_csv(),
    }
    if trace:
        files[TRACE_FILE] = trace_json(
            result, categories=trace_categories, max_events=trace_max_events
        )
    everything: dict[str, str | bytes] = dict(files)
    if extra is not None:
        everything.update(extra(sorted(files)))
    name = run_dir_name(result.variant, result.profile if compare_profile else None)
    return write_run_dir(Path(out) / result.scenario / name, everything)
