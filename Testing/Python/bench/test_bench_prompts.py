"""Prompts follow App. H per module and leave the scene inventory to the episode loop; CLI cohort/prepare."""

from __future__ import annotations

import argparse
import json

import pytest

from MedOpenClawLib.bench.cases import Case, load_cases
from MedOpenClawLib.bench.commands import add_commands
from MedOpenClawLib.bench.modules import get
from MedOpenClawLib.bench.prompts import SCENE_INVENTORY_PLACEHOLDER, build_prompt, fill_scene_inventory


def _case(module: str, **brief) -> Case:
    return Case(module, "X-1", "data/X-1", ["data/X-1"], questions=list(get(module).questions), brief=brief)


def test_ucsf_prompt_has_options_evidence_block_and_budget():
    case = _case("ucsf-pdgm", csv_id="UCSF-PDGM-001", loaded_files=["a", "b"])
    system, task = build_prompt(get("ucsf-pdgm"), case, 7)
    assert "At most 7 tool-calling rounds" in system and "ANSWER: <A|B|C|D|E|F>" in system
    assert "  B) Oligodendroglioma / Astrocytoma" in task and "KEY_SLICE_CORONAL_MM: <float>" in task
    assert "- CSV ID: UCSF-PDGM-001" in task and "Loaded core NIfTI files: a, b" in task
    assert task.endswith(SCENE_INVENTORY_PLACEHOLDER)
    filled = fill_scene_inventory(task, "Volumes: X-1_T1c (active)")
    assert filled.endswith("Volumes: X-1_T1c (active)")
    with pytest.raises(ValueError):
        fill_scene_inventory(filled, "again")


def test_nsclc_and_pathology_prompts():
    case = _case(
        "nsclc",
        default_alias="diagnostic_ct",
        source_volume_name="CT_CHEST",
        source_modality="CT",
        series={"CT_CHEST": "CT", "PET_WB": "PT"},
    )
    system, task = build_prompt(get("nsclc"), case, 20, scene_inventory="inventory")
    assert "1A Right upper lobe; 1B Right middle lobe" in task and "5E Other Type II" in task
    assert "evidence source series is CT_CHEST (CT)" in task and "CT_CHEST (CT), PET_WB (PT)" in task
    assert "1C2D3B4A5B" in system
    system, task = build_prompt(get("bracs"), _case("bracs", case_alias="BRACS_1"), 20)
    assert "Use at most 20 tool-calling rounds." in system
    assert "A. N\nB. PB" in task and '"wsi_label": "N|PB|UDH|FEA|ADH|DCIS|IC"' in task
    _, task = build_prompt(get("camelyon17"), _case("camelyon17"), 20)
    assert "2) Largest metastasis category for this slide?\nA. negative" in task
    with pytest.raises(ValueError):
        build_prompt(get("bracs"), _case("camelyon17"), 20)
    with pytest.raises(ValueError):
        build_prompt(get("bracs"), _case("bracs"), 0)


def test_cli_cohort_then_prepare(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        [
            "bench",
            "cohort",
            "--out",
            str(tmp_path / "raw"),
            "--modules",
            "camelyon17",
            "--cases",
            "2",
            "--slide-size",  # nuclei are drawn per mm² of glass at any size: 2048 x 1536 px stamps them in four
            "2048",  # blocks a slide, 1.2 s less CPU than 1024 x 768 px in one (millions of nuclei at once)
            "1536",
            "--workers",  # the two slides one after the other: a pool of two costs 1.7 s more CPU, same files
            "1",
        ]
    )
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["modules"]["camelyon17"] == ["patient_000_node_0", "patient_000_node_1"]
    args = parser.parse_args(
        [
            "bench",
            "prepare",
            "--module",
            "camelyon17",
            "--source",
            str(tmp_path / "raw" / "CAMELYON17"),
            "--out",
            str(tmp_path / "cases"),
        ]
    )
    assert args.func(args) == 0
    printed = capsys.readouterr()
    assert json.loads(printed.out)["cases"] == 2
    # the cohort-filter count table, with the paper's count beside it, goes to stderr
    assert "camelyon17 cohort filters:" in printed.err and "paper (Table 4)" in printed.err and "550" in printed.err
    assert [case.case_id for case in load_cases(tmp_path / "cases")] == ["patient_000_node_0", "patient_000_node_1"]
    missing = parser.parse_args(
        ["bench", "prepare", "--module", "bracs", "--source", str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")]
    )
    assert missing.func(missing) == 2


@pytest.mark.parametrize("module", ["ucsf-pdgm", "lumiere", "nsclc"])
def test_track_c_prompt_offers_no_tools_and_counts_no_tool_rounds(module):
    brief = {"csv_id": "1", "loaded_files": ["a"], "patient": "P", "old_study": "w1", "current_study": "w2",
             "default_alias": "diagnostic_ct", "source_volume_name": "CT", "source_modality": "CT", "series": {}}
    with_tools = "\n".join(build_prompt(get(module), _case(module, **brief), 20))
    without = "\n".join(build_prompt(get(module), _case(module, **brief), tools=False))
    assert "At most 20 tool-calling rounds" in with_tools and "image_coords_to_ras" in with_tools
    assert "[tools]" not in with_tools and "[/tools]" not in with_tools
    for tool_text in ("tool-calling rounds", "image_coords_to_ras", "open_case", "select_volume",
                      "tools exposed in this run", "window_preset", "[tools]"):
        assert tool_text not in without, tool_text
    assert "No tools are available in this run" in without
    assert "ANSWER" in without or "1C2D3B4A5B" in without


def test_loading_notes_reach_the_scene_inventory_the_agent_reads(tmp_path):
    from MedOpenClawLib.bench.preload import preload_radiology

    class Viewer:  # answers like the registry: open_case reports how a series was split
        def call(self, name, arguments, actor="agent"):
            split = {"code": "loading", "message": "CT2: slices are unevenly spaced: split into 2 volumes"}
            data = {"open_case": {"warnings": [split]},
                    "get_viewer_state": {"volumes": [], "active_volume": None, "views": {}}}.get(name, {})
            return {"ok": True, "data": data, "images": []}

    case = _case("ucsf-pdgm")
    case.cases_dir = tmp_path
    attachments = preload_radiology(Viewer(), case)
    note = "CT2: slices are unevenly spaced: split into 2 volumes"
    assert attachments.inventory_text.endswith(f"Loading notes:\n- {note}")
