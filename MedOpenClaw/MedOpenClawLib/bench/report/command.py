"""What ``bench report`` and ``bench compare`` do once their flags are parsed (:mod:`..commands` registers the
flags); imported only when one of them runs (:func:`...cli.deferred`): the report stack (scipy, Pillow, matplotlib,
jinja2) takes seconds to import."""

from __future__ import annotations

import sys

from ..cases import CaseFormatError
from ..commands import print_json, refuse
from . import write_report
from .compare import compare


def run_report(args) -> int:
    try:
        written = write_report(args.runs, args.out, evidence=not args.no_evidence, command=getattr(args, "argv", None),
                               figures=not args.no_figures)
    except ModuleNotFoundError as error:
        if error.name not in ("jinja2", "matplotlib"):
            raise
        return refuse(f"bench report needs {error.name}: pip install 'medopenclaw[report]'")
    except (CaseFormatError, OSError, ValueError) as error:
        return refuse(str(error))
    for warning in written["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print_json(written)
    return 0


def run_compare(args) -> int:
    try:
        text, body = compare(args.run_a, args.run_b)
    except (CaseFormatError, OSError) as error:
        return refuse(str(error))
    if args.json:
        print_json(body)
    else:
        print(text, end="")
    return 0
