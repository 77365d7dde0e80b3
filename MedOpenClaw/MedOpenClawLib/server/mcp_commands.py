"""``medopenclaw mcp``: the viewer actions as MCP tools over stdio or Streamable HTTP (:mod:`.mcp`); its options are
the sessions' (:func:`~.sessions.add_session_arguments`) and the transport's."""

from __future__ import annotations

import argparse
import threading

from .. import apps
from ..cli import PORT
from ..core import settings
from .rest import SceneThreadExecutor, new_token
from .sessions import add_session_arguments, client_trace_path, prepare_session_arguments, session_registry


def _run(args: argparse.Namespace) -> int:
    # over HTTP every client has a transport session of its own even when they share one in-process scene; checked
    # first, so a refused option is told before the SDK loads
    prepare_session_arguments(args, own_sessions=args.transport == "http")
    from . import http_guard, mcp, mcp_transport  # the MCP SDK, uvicorn, Starlette: ~1 s of CPU, only when serving

    writer = mcp_transport.protocol_stdout() if args.transport == "stdio" else None
    listing = apps.specs(args.app, args.track)
    front_end = f"mcp-{args.transport}"
    scene = SceneThreadExecutor()
    if args.transport == "http":  # over stdio the server ends when its client closes stdin (MCP clients do so first)
        scene.stop_on_terminate()
    if args.transport == "stdio" or args.in_process:
        # one registry, built on the scene's thread once the SDK is loaded and the protocol answers (a supervised
        # viewer boots behind it: started earlier, its boot would compete with the SDK's import for the CPU); over
        # HTTP with --in-process every client shares it and is named in each record
        header = {"front_end": front_end, "data_roots": args.data_root, "app": args.app}
        registry = scene.submit(lambda: session_registry(args, header=header, save_images=False, background=True))
        sessions = mcp.SharedSession(registry, scene.submit, listing, name_clients=args.transport == "http")
    else:
        def client_session(number: int, client: dict):
            header = {"front_end": front_end, "data_roots": args.data_root, "app": args.app, "client": client,
                      "session": number}
            return session_registry(args, header=header, save_images=False, background=True,
                                    trace_path=client_trace_path(args.trace, number))

        sessions = mcp.ClientSessions(client_session, listing, args.max_sessions, args.session_idle)
    server = mcp.build_server(sessions, args.app)
    if args.transport == "stdio":
        target, stop = (lambda: mcp_transport.serve_stdio(server, writer)), None
    else:
        token = settings.value("MEDOPENCLAW_TOKEN") or new_token()
        listener = http_guard.loopback_socket(args.port)
        app = mcp_transport.http_app(server, token, args.max_sessions, args.session_idle, sessions.end)
        http = mcp_transport.http_server(app)
        target, stop = (lambda: http.run(sockets=[listener])), http
        print(f"MedOpenClaw MCP (Streamable HTTP) on http://127.0.0.1:{listener.getsockname()[1]}"
              f"{mcp_transport.HTTP_PATH}", flush=True)
        if not settings.is_set("MEDOPENCLAW_TOKEN"):
            print(f"bearer token: {token}", flush=True)

    def protocol() -> None:
        try:
            target()
        finally:
            scene.stop()

    thread = threading.Thread(target=protocol, name="mcp-protocol", daemon=True)
    thread.start()
    try:
        scene.run()  # the scene's thread: in-process tool calls execute here, one at a time
    except KeyboardInterrupt:
        pass
    finally:
        if stop is not None:
            stop.should_exit = True
        thread.join(timeout=5)
        sessions.close()
    return 0


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("mcp", help="serve the viewer actions as MCP tools (stdio or Streamable HTTP)")
    add_session_arguments(parser)
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                        help="stdio (default), or Streamable HTTP on 127.0.0.1 with the REST bearer token "
                             "(MEDOPENCLAW_TOKEN, generated and printed when unset)")
    parser.add_argument("--port", type=PORT, default=8766, help="--transport http: the port (0: any free one)")
    parser.set_defaults(func=_run)
