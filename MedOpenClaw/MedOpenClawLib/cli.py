"""The ``medopenclaw`` command. Each subsystem contributes its sub-commands through ``add_commands``.

Sub-command modules are imported lazily so ``medopenclaw --help`` stays fast and a missing optional
dependency of one subsystem never breaks the others.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# module path -> it defines add_commands(subparsers) registering one or more sub-commands
COMMAND_MODULES = (
    "MedOpenClawLib.bench.commands",
    "MedOpenClawLib.server.commands",
    "MedOpenClawLib.server.mcp",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="medopenclaw",
        description="Bounded, audited viewer actions for agents, and the MedFlow-Bench benchmark.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).add_commands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
