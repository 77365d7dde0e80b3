"""CLI: ``serve`` (REST), ``tools`` (list the actions), ``replay`` and ``trace verify`` (audit checks)."""

from __future__ import annotations

import argparse
import json

from .. import apps
from ..apps import FORMATS
from ..bench.modules import known
from ..cli import NON_NEGATIVE, PORT, deferred, existing_directory, user_path
from ..core import settings
from ..core.applications import APPLICATIONS, TRACKS
from ..core.audit import verify_trace
from ..core.formats import markdown_table
from ..core.toolset import ActionSpec
from ..trace_audit.commands import add_audit_command
from .rest import RestService, SceneThreadExecutor, new_token
from .sessions import (
    SessionPool,
    add_session_arguments,
    client_trace_path,
    close_session,
    prepare_session_arguments,
    session_registry,
)

# the viewer (slicer, vtk) is imported by the commands that run it, so `--help` and `trace verify` stay light

def add_commands(subparsers) -> None:
    serve = subparsers.add_parser("serve", help="serve the action registry over REST on 127.0.0.1")
    add_session_arguments(serve)
    serve.add_argument("--port", type=PORT, default=8765, help="port on 127.0.0.1 (default 8765; 0: any free one)")
    serve.set_defaults(func=run_serve)

    tools = subparsers.add_parser("tools", help="list every action (radiology and pathology) from the catalog")
    tools.add_argument("--app", choices=("all", *APPLICATIONS), default="all", help="one application's actions")
    tools.add_argument("--track", choices=TRACKS, default=None, help="only the actions offered on this track")
    tools.add_argument("--format", choices=["markdown", *FORMATS], default="markdown",
                       help="markdown table, or the tool definitions in a format's own dialect (JSON)")
    tools.set_defaults(func=run_tools)

    replay = subparsers.add_parser("replay", help="re-execute a trace on a fresh scene and compare snapshots")
    replay.add_argument("trace", type=user_path, help="an audit trace (JSONL) to re-execute")
    replay.add_argument("--data-root", action="append", required=True, type=existing_directory,
                        help="directory the replayed session may read (repeat); never taken from the trace")
    # run where a trace replays: the pathology engine (numpy, Pillow) stays out of the other commands' start-up
    replay.set_defaults(func=deferred("MedOpenClawLib.replay:run_replay"))

    trace = subparsers.add_parser("trace", help="audit trace utilities")
    trace_commands = trace.add_subparsers(dest="trace_command", required=True)
    verify = trace_commands.add_parser(
        "verify", help="check the hash chain, artifact checksums and the anchor (default: the trace's sidecar)")
    verify.add_argument("trace", type=user_path, help="the audit trace (JSONL) to check")
    verify.add_argument("--expect-head", default=None, help="hash the final record must have")
    verify.add_argument("--expect-records", type=NON_NEGATIVE, default=None,
                        help="number of records the trace must hold")
    verify.add_argument("--anchor", type=user_path, default=None,
                        help="a JSON file with the anchor: a sidecar, or an episode result.json (its trace_anchor)")
    verify.set_defaults(func=run_verify)
    add_audit_command(trace_commands, known)


def run_serve(args: argparse.Namespace) -> int:
    prepare_session_arguments(args, own_sessions=not args.in_process)  # a refused option is told before the imports
    from .rest_app import RestHttpServer  # uvicorn and Starlette: only where the server runs

    token = settings.value("MEDOPENCLAW_TOKEN") or new_token()
    executor = SceneThreadExecutor()
    executor.stop_on_terminate()  # before the first viewer boots: from now on a SIGTERM ends in the clean-up below
    save_images = args.trace is not None
    registry = session_registry(args, header={"front_end": "rest", "app": args.app}, save_images=save_images,
                                background=True)

    def own_session(number: int, client: dict):
        """A REST session of its own (POST /v1/sessions): a viewer process, scene, trace and round budget."""
        return session_registry(args, header={"front_end": "rest", "app": args.app, "session": number},
                                save_images=save_images, background=True,
                                trace_path=client_trace_path(args.trace, number))

    # an in-process viewer is one scene: no session of one's own there
    sessions = None if args.in_process else SessionPool(own_session, args.max_sessions, args.session_idle)
    http = RestHttpServer(RestService(registry, token, args.app, sessions), executor, args.port)
    http.start()
    print(f"MedOpenClaw REST on http://127.0.0.1:{http.port} ({args.app}, track {args.track})", flush=True)
    if not settings.is_set("MEDOPENCLAW_TOKEN"):
        print(f"bearer token: {token}", flush=True)
    try:
        executor.run()  # the scene's thread: requests are executed here, one at a time
    except KeyboardInterrupt:
        pass
    finally:
        http.stop()
        if sessions is not None:
            sessions.close()
        close_session(registry)
    return 0


def run_tools(args: argparse.Namespace) -> int:
    entries = apps.entries(None if args.app == "all" else args.app, args.track)
    if args.format == "markdown":
        print(markdown_table(entries))
        return 0
    print(json.dumps([apps.serialize(args.format, ActionSpec.from_description(entry), entry["application"])
                      for entry in entries], indent=2))
    return 0


def expected_anchor(args: argparse.Namespace) -> dict | None:
    """The anchor the command line names; None falls back to the trace's sidecar."""
    anchor = None
    if args.anchor is not None:
        document = json.loads(args.anchor.read_text(encoding="utf-8"))
        anchor = dict(document.get("trace_anchor") or document) if isinstance(document, dict) else None
        if not anchor or not {"records", "head"} & set(anchor):
            raise SystemExit(f"{args.anchor} holds no trace anchor (records, head)")
    if args.expect_head is not None or args.expect_records is not None:
        anchor = {**(anchor or {}), **{key: value for key, value in (("head", args.expect_head),
                                                                       ("records", args.expect_records))
                                       if value is not None}}
    return anchor


def run_verify(args: argparse.Namespace) -> int:
    report = verify_trace(args.trace, anchor=expected_anchor(args))
    print(json.dumps(report.to_json()))
    return 0 if report.ok else 1
