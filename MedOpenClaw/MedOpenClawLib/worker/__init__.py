"""Viewer worker processes: one viewer (headless slicer-core, or the real 3D Slicer running
``scripts/run_bench.py`` of this package) serving one action registry to a client in another process.

Both the benchmark runner (one episode per registry) and the crash supervisor of ``serve``/``mcp``
(:mod:`..server.supervisor`) drive viewers through this package, which depends on neither of them.

Keeping the viewer in its own process is what makes a batch robust: a crash or hang inside VTK/Slicer kills
one worker, not the run, and the client retries on a fresh one. Protocol: newline-delimited JSON over a
loopback TCP socket. The client first sends ``{"op": "hello", "token": T}`` (the token comes from the
``MEDOPENCLAW_WORKER_TOKEN`` environment variable, never argv), then requests ``{"id", "op", ...}`` answered
by ``{"id", "ok": true, "result"}`` or ``{"id", "ok": false, "error": {"code", "message"}}``; an answer whose line
lists ``attachments`` (byte sizes) is followed by those bytes, raw (the PNGs of a supervised call's views). It may
be preceded by parts ``{"id", "part": n, "pixels": [h, w(, c)]}``, each followed by one attachment, the n-th of the
answer's, sent ahead: a view's raw uint8 pixels, which the receiver encodes.
Ops: ping, start (build a fresh registry for an episode), tools, call, observation, event, end, shutdown, and for
the crash supervisor: call with ``with_record`` (the audit record's arguments, state and duration come back too,
and the images as attachments; with ``stream_views`` each view's pixels go ahead as a part as soon as it is
rendered) and restore (replay earlier action records onto the new registry).

Modules: :mod:`.protocol` (names and errors both sides share), :mod:`.service` (the worker side, and the headless
entry point ``python -m MedOpenClawLib.worker``), :mod:`.client` (launching and talking to a worker),
:mod:`.environment` (a registry seen as an episode environment in this process).
"""
