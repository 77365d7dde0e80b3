"""What both ends of the worker protocol share: the token variable, the supervised record keys, the errors."""

TOKEN_ENV = "MEDOPENCLAW_WORKER_TOKEN"
# what a supervisor copies of the child's audit record into its own trace
SUPERVISED_RECORD_KEYS = ("action", "actor", "arguments", "state", "round", "extra")


class WorkerError(Exception):
    """A request the worker refused (bad op, no episode started); the worker itself is healthy."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class WorkerFault(Exception):
    """The worker process crashed, hung or broke the protocol: discard it and retry on a fresh one."""


class WorkerHung(WorkerFault):
    """The worker did not answer within the call's timeout (it was killed)."""
