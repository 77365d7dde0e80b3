"""The session a front-end (``serve``, ``mcp``) exposes: its command-line options and the registry they build.

Both front-ends are handed whatever :func:`session_registry` returns -- by default a
:class:`~.supervisor.SupervisedRegistry` whose viewer runs in a child process, so a native crash answers
``viewer_crashed`` instead of ending the server; ``--in-process`` keeps the scene in the server's own process
(for debugging with a native debugger).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from ..audit import AuditTrace


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    from ..cli import existing_directory

    parser.add_argument("--data-root", action="append", required=True, type=existing_directory,
                        help="directory open_case may read (repeat)")
    parser.add_argument("--track", choices=("A", "B"), default="A")
    parser.add_argument("--max-rounds", type=int, default=None, help="tool-call budget of the session")
    parser.add_argument("--trace", type=Path, default=None, help="audit trace JSONL (default: none on disk)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the viewer in this process (no crash containment; for debugging)")
    parser.add_argument("--no-spare-viewer", dest="spare_viewer", action="store_false",
                        help="do not keep a second viewer process ready for restarts (saves ~110 MB; a restart then "
                             "waits for a viewer to start)")
    parser.add_argument("--call-timeout", type=float, default=300.0,
                        help="seconds before a call that has not returned counts as a hung viewer")


# records a long-running front-end keeps in memory; the trace file keeps them all
TRACE_WINDOW = 1000


def session_registry(args: argparse.Namespace, header: dict, save_images: bool, window: int | None = TRACE_WINDOW):
    """The radiology registry the front-end (``serve``, ``mcp``) serves, supervised unless ``--in-process`` was
    given; ``window`` bounds the trace records kept in memory."""
    if args.in_process:
        from ..session import build_slicer_registry

        trace = AuditTrace(args.trace, header=header, save_images=save_images, window=window)
        return build_slicer_registry(args.data_root, track=args.track, trace=trace, max_rounds=args.max_rounds)
    from .supervisor import SupervisedRegistry

    if args.trace is None:  # the supervisor restores sessions from their trace file: keep a private one
        workdir = Path(tempfile.mkdtemp(prefix="medopenclaw-viewer-"))
        trace = AuditTrace(workdir / "trace.jsonl", header=header, window=window)
    else:
        workdir = args.trace.with_name(args.trace.stem + "_viewer")
        trace = AuditTrace(args.trace, header=header, save_images=save_images, window=window)
    return SupervisedRegistry("radiology", args.data_root, track=args.track, max_rounds=args.max_rounds,
                              trace=trace, workdir=workdir, remove_workdir=args.trace is None,
                              call_timeout_s=args.call_timeout, spare=args.spare_viewer)


def close_session(registry) -> None:
    """Stop a supervised viewer's child process (an in-process registry holds nothing to stop)."""
    close = getattr(registry, "close", None)
    if close is not None:
        close()
