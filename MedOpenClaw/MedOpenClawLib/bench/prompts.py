"""Prompts of App. H.1 (3D Slicer radiology) and H.2 (QuPath pathology), instantiated per case.

Templates live in ``MedOpenClawLib/resources/prompts/`` (each module spec names its system and task templates,
e.g. ``<module>.system.txt`` and ``<module>.task.txt``; ``pathology.round.txt``) and use ``string.Template``
``$names``. Text about tools is marked ``[tools]...[/tools]``: kept (markers removed) when the episode offers
tools, dropped for a run without tools (Track C), whose budget block says that no tools are available instead of
counting tool rounds. The scene inventory (radiology) or the current viewer state (pathology) is known only once
the episode has opened the case: pass it as ``scene_inventory``, or leave it None and the task text keeps
:data:`SCENE_INVENTORY_PLACEHOLDER`, which :func:`fill_scene_inventory` replaces later. Baseline views are
images; the episode loop attaches them.
"""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from .cases import Case
from .modules import PATHOLOGY, ModuleSpec

PROMPT_DIR = Path(__file__).resolve().parent.parent / "resources" / "prompts"  # the templates modules share
SCENE_INVENTORY_PLACEHOLDER = "<<SCENE_INVENTORY>>"
TOOL_TEXT = re.compile(r"\[tools\](.*?)\[/tools\]", re.DOTALL)
NO_TOOLS_BLOCK = (
    "No tools are available in this run: answer in this single turn from the attached images and the scene "
    "inventory, in exactly the required format."
)


def _template(path: Path, tools: bool = True) -> Template:
    text = path.read_text(encoding="utf-8").rstrip("\n")
    return Template(TOOL_TEXT.sub(r"\1" if tools else "", text))


def lettered_options(case: Case) -> str:
    """The radiology layout of one question's options: ``  A) PD``."""
    return "\n".join(f"  {letter}) {label}" for letter, label in case.questions[0].options)


def dotted_options(case: Case) -> str:
    """One question's options as ``A. label`` lines."""
    return "\n".join(f"{letter}. {label}" for letter, label in case.questions[0].options)


def compact_numbered_options(case: Case) -> str:
    """Several questions, compact: ``Q1. <question>`` then ``1A <option>; 1B ...`` per question."""
    blocks = []
    for number, question in enumerate(case.questions, 1):
        choices = "; ".join(f"{number}{letter} {label}" for letter, label in question.options)
        blocks.append(f"Q{number}. {question.text}\n{choices}")
    return "\n\n".join(blocks)


def numbered_questions(case: Case) -> str:
    """Numbered sub-questions, each with ``A. label`` options."""
    return "\n".join(
        f"{number}) {question.text}\n" + "\n".join(f"{letter}. {label}" for letter, label in question.options)
        for number, question in enumerate(case.questions, 1)
    )


def build_prompt(spec: ModuleSpec, case: Case, budget: int = 20, scene_inventory: str | None = None,
                 tools: bool = True) -> tuple[str, str]:
    """(system_text, task_text) of one episode; ``budget`` is the tool-round budget (MedFlow-Bench uses 20).
    ``tools=False`` (Track C): no tool instructions and no tool budget, for radiology modules."""
    if spec.name != case.module:
        raise ValueError(f"case {case.case_id} belongs to {case.module}, not {spec.name}")
    if not tools and spec.application == PATHOLOGY:
        raise ValueError("pathology episodes always use the QuPath tools")
    if tools and budget < 1:
        raise ValueError("the tool budget must be at least one round")
    fields = {
        key: (", ".join(map(str, value)) if isinstance(value, list) else value) for key, value in case.brief.items()
    }
    if isinstance(case.brief.get("series"), dict):
        fields["series"] = ", ".join(f"{name} ({modality})" for name, modality in case.brief["series"].items())
    open_paths = [str(case.path(path)) if case.cases_dir else path for path in case.open_paths]
    fields.update(
        case_id=case.case_id,
        budget=budget,
        options=spec.format_options(case),
        open_paths=", ".join(open_paths),
        scene_inventory=SCENE_INVENTORY_PLACEHOLDER if scene_inventory is None else scene_inventory,
    )
    fields.setdefault("case_alias", case.case_id)
    if spec.application == PATHOLOGY:
        system = _template(spec.system_prompt).substitute(fields)
    else:
        common = _template(PROMPT_DIR / "radiology_common.txt")
        fields["budget_block"] = common.substitute(fields) if tools else NO_TOOLS_BLOCK
        system = _template(spec.system_prompt, tools).substitute(fields)
    task = _template(spec.task_prompt, tools).substitute(fields)
    return system, task


def fill_scene_inventory(task_text: str, scene_inventory: str) -> str:
    """Insert the scene inventory the episode obtained after opening the case."""
    if SCENE_INVENTORY_PLACEHOLDER not in task_text:
        raise ValueError("task text has no scene-inventory placeholder (already filled?)")
    return task_text.replace(SCENE_INVENTORY_PLACEHOLDER, scene_inventory)


def pathology_round_text(task_text: str, case_summary: str, direct_state: str, gui_state: str) -> str:
    """The per-round QuPath observation message of App. H.2 (the screenshot is attached by the caller)."""
    return _template(PROMPT_DIR / "pathology.round.txt").substitute(
        task=task_text, case_summary=case_summary, direct_state=direct_state, gui_state=gui_state
    )
