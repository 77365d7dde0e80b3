"""The ``medopenclaw`` command. Each subsystem contributes its sub-commands through ``add_commands``.

Sub-command modules are imported lazily so ``medopenclaw --help`` stays fast and a missing optional
dependency of one subsystem never breaks the others. A user's mistake (a missing file, a bad value) ends as
one ``error:`` line and exit status 2, never a traceback; ``MEDOPENCLAW_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import math
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from .core import settings
from .core.provenance import version_text
from .core.sinks import terminal_text

# module path -> the sub-commands its add_commands(subparsers) registers. A command line naming one of them builds
# only that module's parsers: `medopenclaw mcp` must answer its client's initialize at once, without first importing
# the benchmark and the trace audit (numpy) that other commands need
COMMAND_MODULES = {
    "MedOpenClawLib.bench.commands": ("bench",),
    "MedOpenClawLib.server.commands": ("serve", "tools", "replay", "trace"),
    "MedOpenClawLib.server.mcp_commands": ("mcp",),
}
EXIT_USAGE, EXIT_INTERRUPTED = 2, 130


def user_path(text: str) -> Path:
    """argparse type of every path a user gives (options and positionals): made absolute against the working
    directory once, here, so everything further on joins and compares absolute paths only (a relative ``--out``
    once failed where a resolved trace path was compared with the path as typed). ``~`` is expanded too: the shell
    leaves it alone in ``--out=~/runs``."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path")
    return Path(text).expanduser().resolve()


def existing_directory(text: str) -> str:
    """argparse type of ``--data-root`` and friends: a directory that exists (checked before anything starts), as
    an absolute path (:func:`user_path`)."""
    path = user_path(text)
    if not path.is_dir():
        problem = "is not a directory" if path.exists() else "does not exist"
        raise argparse.ArgumentTypeError(f"{text} {problem}")
    return str(path)


def executable(text: str) -> str:
    """argparse type of a program to start (``--slicer``): a name found on PATH or a path, as an absolute path."""
    found = shutil.which(str(Path(text).expanduser()))
    if found is None:
        raise argparse.ArgumentTypeError(f"{text} is not an executable file (nor a program on PATH)")
    return str(Path(found).resolve())


class Number:
    """argparse type of every numeric option: a finite ``kind`` within its bounds, refused at parse time (NaN, inf
    or a negative timeout would otherwise surface late, as an error of whatever first uses the value)."""

    def __init__(self, kind: type = float, minimum: float | None = None, above: float | None = None,
                 maximum: float | None = None):
        self.kind, self.minimum, self.above, self.maximum = kind, minimum, above, maximum
        self.__name__ = "integer" if kind is int else "number"  # argparse names the type in its own errors

    def __call__(self, text: str) -> int | float:
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {self.describe()}") from None
        if not math.isfinite(value) or not self.within(value):
            raise argparse.ArgumentTypeError(f"{text} is not {self.describe()}")
        return value

    def within(self, value: float) -> bool:
        return ((self.minimum is None or value >= self.minimum) and (self.above is None or value > self.above)
                and (self.maximum is None or value <= self.maximum))

    def describe(self) -> str:
        kind = "an integer" if self.kind is int else "a finite number"
        if self.minimum is not None and self.maximum is not None:
            return f"{kind} from {self.minimum:g} to {self.maximum:g}"
        bounds = [f"of at least {self.minimum:g}" if self.minimum is not None else "",
                  f"above {self.above:g}" if self.above is not None else "",
                  f"of at most {self.maximum:g}" if self.maximum is not None else ""]
        return " ".join([kind, *filter(None, bounds)])


SECONDS = Number(float, above=0)  # timeouts and deadlines
COUNT = Number(int, minimum=1)  # how many of something
NON_NEGATIVE = Number(int, minimum=0)  # seeds, retries
PORT = Number(int, minimum=0, maximum=65535)  # 0: any free one


def deferred(target: str) -> Callable[[argparse.Namespace], int]:
    """A sub-command's ``func`` named as ``"module:function"``, imported when the command runs: registering the
    flags (``--help``, ``mcp``'s fast start) loads nothing of the command's work (the runner's numpy, scipy and
    Pillow, the report's matplotlib), and the command's module imports what it needs at its top."""
    module, name = target.split(":")

    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), name)(args)

    run.__name__ = run.__qualname__ = name
    return run


class OneLineErrors(argparse.ArgumentParser):
    """Usage mistakes as one line naming the command and pointing at ``--help`` (sub-parsers inherit the class)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class VersionAction(argparse.Action):
    """``--version``: the package version, git commit and viewer stack, computed only when asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit(0)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """Every sub-command's parser, or only those of the module registering ``argv``'s sub-command."""
    parser = OneLineErrors(
        prog="medopenclaw",
        description="Bounded, audited viewer actions for agents, and the MedFlow-Bench benchmark.",
    )
    parser.add_argument("--version", action=VersionAction,
                        help="print the version, git commit (from a checkout), Python and viewer stack, and exit")
    subparsers = parser.add_subparsers(dest="command", required=True)
    named = [module for module, commands in COMMAND_MODULES.items() if argv and argv[0] in commands]
    for module_name in named or COMMAND_MODULES:
        importlib.import_module(module_name).add_commands(subparsers)
    name_sub_commands(parser)
    return parser


def name_sub_commands(parser: argparse.ArgumentParser) -> None:
    """Every sub-command group shows its choices where argparse would print its internal ``dest`` (e.g.
    'the following arguments are required: bench_command')."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            if action.metavar is None:
                action.metavar = "{" + ",".join(action.choices) + "}"
            for sub in action.choices.values():
                name_sub_commands(sub)


def describe(error: BaseException) -> str:
    """One line for a failure a user can act on."""
    if isinstance(error, OSError) and error.strerror:
        return f"{error.strerror}: {error.filename}" if error.filename else error.strerror
    return str(error) or type(error).__name__


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    args.argv = argv  # so a command can print itself (e.g. how to resume a run)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as error:
        if settings.is_set("MEDOPENCLAW_DEBUG"):
            raise
        print(f"error: {terminal_text(describe(error))}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
