"""Models for the tests of MedCopilot's model worker (copilot/test_copilot_logic.py). The worker's child process
imports the module of each model it unpickles: this one needs only os, threading and time, where the test module
would have every child import pytest, MedCopilotLib and the HTTP stack first (0.4 s of CPU per child)."""

from __future__ import annotations

import os
import threading
import time


class CountingModel:
    """A model the worker's child process runs: answers its pid and how many calls it has answered (its state
    lives on in the child), waits ``delay_s`` first, fails on a message "fail", dies on "die"."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s, self.calls = delay_s, 0

    def complete(self, messages, tools):
        time.sleep(self.delay_s)
        if messages == ["fail"]:
            return 1 / 0
        if messages == ["die"]:
            os._exit(3)
        self.calls += 1
        return os.getpid(), self.calls, threading.current_thread().name


class MarkedModel(CountingModel):
    """A CountingModel that appends a line to ``mark`` each time a process unpickles it."""

    def __init__(self, mark):
        super().__init__()
        self.mark = str(mark)

    def __setstate__(self, state):
        self.__dict__.update(state)
        with open(self.mark, "a") as marks:
            marks.write("unpickled\n")
