"""How worker processes end: the worker watches its runner, and the runner ends the worker's whole process tree.

Standard library only: ``scripts/run_bench.py`` starts the watch before it imports anything that could fail.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

# Windows has no process groups of the POSIX kind: a new console process group keeps Ctrl-C at the runner's
# terminal away from the worker, and ``taskkill /T`` ends the tree
NEW_GROUP = {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP} if os.name == "nt" else {"start_new_session": True}
# the same, in the caller's session (POSIX): Linux schedules each session as a group of its own (autogroup), so a
# viewer that only ever runs while its server waits for it shares the server's turn instead of waiting, at every
# wake-up, for a turn of its own among the machine's busy sessions
GROUP_IN_SESSION = NEW_GROUP if os.name == "nt" else {"process_group": 0}


def exit_with_parent(parent_pid: int, poll_s: float = 1.0) -> None:
    """End this process once ``parent_pid`` is gone (POSIX).

    A runner killed with SIGKILL cannot shut its workers down, and a worker blocked in ``accept`` would live on
    forever holding a Slicer application; polling the runner's pid (not ``getppid``: the real Slicer runs
    under its launcher) frees it within ``poll_s``.
    """
    if os.name != "posix":  # os.kill(pid, 0) would terminate the process on Windows
        return

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            try:
                os.kill(parent_pid, 0)
            except ProcessLookupError:
                os._exit(3)
            except PermissionError:  # the pid exists (owned by someone else): keep waiting
                pass

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def stop_tree(process: subprocess.Popen, wait_s: float = 30.0) -> None:
    """Kill ``process`` (started with :data:`NEW_GROUP` or :data:`GROUP_IN_SESSION`) and every process it started,
    then reap it.

    The real 3D Slicer is a launcher: ctkAppLauncher starts ``SlicerApp-real`` as a QProcess child, waits for it
    and passes no signal on (commontk/AppLauncher Base/ctkAppLauncher.cpp, ``ctkAppLauncherInternal::runProcess``
    and ``terminateProcess``), so killing the launcher alone leaves the application running without a window. On
    POSIX the worker leads its own process group, which is that tree; it is killed even after the leader exited,
    since its children may not have.
    """
    if os.name == "posix":
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # the group is empty: the whole tree has already ended
            pass
    elif process.poll() is None:
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(process.pid)], capture_output=True, check=False)
    if process.poll() is None:
        process.kill()
    process.wait(timeout=wait_s)
