"""Golden tests of the response parsers: every quirk of real model output (markdown, fences, prose around the
answer, disagreeing letters and labels)."""

from __future__ import annotations

import io
import json

import pytest

from MedOpenClawLib.bench.modules import get

UCSF_FULL = """Rationale: ring-enhancing **mass** with necrosis.

EVIDENCE:
KEY_SLICE_AXIAL_MM: 12.5 mm
KEY_SLICE_SAGITTAL_MM: **-31**
KEY_SLICE_CORONAL_MM: `4.25mm`
RAS: (-31, 4.25, 1.25e1)
ANSWER: (B)
On reflection the enhancement pattern is typical.
ANSWER: **A. Glioblastoma**
"""


def test_ucsf_markdown_units_parentheses_last_answer_wins():
    parsed = get("ucsf-pdgm").read_answer(UCSF_FULL)
    assert parsed == {
        "answer": "A",
        "evidence": {
            "key_slice_axial_mm": 12.5,
            "key_slice_sagittal_mm": -31.0,
            "key_slice_coronal_mm": 4.25,
            "ras": [-31.0, 4.25, 12.5],
        },
        "errors": [],
    }


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("ANSWER: B", "B"),
        ("ANSWER: (B)", "B"),
        ("ANSWER: B)", "B"),
        ("ANSWER: B. Oligodendroglioma / Astrocytoma", "B"),
        ("ANSWER: B. Oligodendroglioma", "B"),
        ("answer: b", "B"),
        ("Final answer: **E**", "E"),
        ("ANSWER: Pilocytic Astrocytoma", "E"),
        ("ANSWER: [F]", "F"),
        ("ANSWER: C) No tumor", "C"),
        ("ANSWER: D - because of the cortical location", "D"),
    ],
)
def test_ucsf_answer_forms(line, expected):
    assert get("ucsf-pdgm").read_answer(f"text\n{line}\n")["answer"] == expected


@pytest.mark.parametrize("line", ["ANSWER: A) Pilocytic Astrocytoma", "ANSWER: G", "ANSWER: maybe", "no answer"])
def test_ucsf_disagreeing_or_invalid_answers_are_null_with_error(line):
    parsed = get("ucsf-pdgm").read_answer(line)
    assert parsed["answer"] is None
    assert any(error.startswith("answer") for error in parsed["errors"])


def test_ras_in_brackets_and_bad_values():
    parsed = get("ucsf-pdgm").read_answer("RAS: [1.5, -2, 3]\nKEY_SLICE_AXIAL_MM: n/a\nANSWER: A")
    assert parsed["evidence"]["ras"] == [1.5, -2.0, 3.0]
    assert parsed["evidence"]["key_slice_axial_mm"] is None
    assert any("key_slice_axial_mm: not a number" in error for error in parsed["errors"])
    assert get("ucsf-pdgm").read_answer("RAS: [1, 2]\nANSWER: A")["evidence"]["ras"] is None


def test_lumiere_yes_no_any_case_and_label_text():
    text = """```
NON_MEASURABLE_LESION: yes
T2_PROGRESSION: No.
CURRENT_TARGET_LESION: **YES**
NEW_TARGET_LESION: no
CURRENT_NON_TARGET_LESION: True
NEW_NON_TARGET_LESION: maybe
ANSWER: PD
```"""
    parsed = get("lumiere").read_answer(text)
    assert parsed["answer"] == "A"
    assert parsed["evidence"] == {
        "non_measurable_lesion": True,
        "t2_progression": False,
        "current_target_lesion": True,
        "new_target_lesion": False,
        "current_non_target_lesion": True,
        "new_non_target_lesion": None,
    }
    assert parsed["errors"] == ["new_non_target_lesion: expected YES or NO, got 'maybe'"]
    assert get("lumiere").read_answer("ANSWER: D) CR")["answer"] == "D"
    assert get("lumiere").read_answer("ANSWER: D) PR")["answer"] is None


def test_nsclc_compact_string_last_wins_and_ranges():
    text = (
        "Evidence...\nKEY_SLICE_AXIAL_MM: 40\nKEY_SLICE_SAGITTAL_MM: 89.5\nKEY_SLICE_CORONAL_MM: 11\n"
        "RAS: [89.5, 11, 40]\nDraft 1A2A3A4A5A\n**1C 2D 3B 4A 5B**\nThanks."
    )
    parsed = get("nsclc").read_answer(text)
    assert parsed["answers"] == {"q1": "C", "q2": "D", "q3": "B", "q4": "A", "q5": "B"}
    assert parsed["evidence"]["ras"] == [89.5, 11.0, 40.0]
    assert parsed["errors"] == []
    out_of_range = get("nsclc").read_answer("1G2G3F4E5F")
    assert out_of_range["answers"] == {"q1": "G", "q2": None, "q3": None, "q4": "E", "q5": "F"}
    assert "q2: G is not an option (valid ABCDEF)" in out_of_range["errors"]
    per_line = get("nsclc").read_answer("Q1: A\nQ2: T2\nQ3: N0")
    assert per_line["answers"]["q1"] == "A" and per_line["answers"]["q2"] == "B" and per_line["answers"]["q3"] == "A"
    assert per_line["answers"]["q4"] is None


def test_bracs_json_in_fence_with_trailing_prose():
    text = (
        'Here you go:\n```json\n{"selected_option": "F", "wsi_label": "dcis", "confidence": 0.7, '
        '"localizations": [{"x": 1200.5, "y": 88}, [3, 4], "bad"]}\n```\nHope this helps {not json}.'
    )
    parsed = get("bracs").read_answer(text)
    assert parsed["answer"] == "DCIS"
    assert parsed["localizations"] == [[1200.5, 88.0], [3.0, 4.0]]
    assert parsed["errors"] == ['localizations[2]: not an x/y pair: "bad"']


def test_bracs_option_label_agreement():
    assert get("bracs").read_answer('{"selected_option": "A", "wsi_label": "IC"}')["answer"] is None
    assert get("bracs").read_answer('{"selected_option": "G"}')["answer"] == "IC"
    assert get("bracs").read_answer('{"wsi_label": "Invasive carcinoma", "localizations": []}')["answer"] == "IC"
    assert get("bracs").read_answer("I think it is DCIS.")["answer"] is None


def test_camelyon_fields_and_disagreement():
    good = get("camelyon17").read_answer('{"tumor_presence_option": "B", "tumor_presence": "tumor_present", '
        '"largest_metastasis_option": "D", "largest_metastasis": "MACRO", '
        '"localizations": [{"x": 5, "y": 6}]}',
    )
    assert good == {
        "tumor_presence": "tumor_present",
        "largest_metastasis": "macro",
        "localizations": [[5.0, 6.0]],
        "errors": [],
    }
    bad = get("camelyon17").read_answer(
        '{"tumor_presence_option": "A", "tumor_presence": "tumor_present", "largest_metastasis_option": "C"}')
    assert bad["tumor_presence"] is None and bad["largest_metastasis"] == "micro"


@pytest.mark.parametrize("module", ["ucsf-pdgm", "lumiere", "nsclc", "bracs", "camelyon17"])
@pytest.mark.parametrize("text", [None, "", "\x00\x01", "{" * 500, "ANSWER:" * 50, "```" * 9])
def test_never_raises(module, text):
    parsed = get(module).read_answer(text)
    assert parsed["errors"]


def test_cli_parse_reads_stdin(monkeypatch, capsys):
    import argparse

    from MedOpenClawLib.bench.commands import add_commands

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["bench", "parse", "--module", "lumiere"])
    monkeypatch.setattr("sys.stdin", io.StringIO("ANSWER: **C**\n"))
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out)["answer"] == "C"


def test_decimal_comma_is_an_error_not_a_truncated_number():
    parsed = get("ucsf-pdgm").read_answer("KEY_SLICE_AXIAL_MM: 12,5 mm\nKEY_SLICE_SAGITTAL_MM: 1,234.5\nANSWER: A")
    assert parsed["evidence"]["key_slice_axial_mm"] is None
    assert parsed["evidence"]["key_slice_sagittal_mm"] is None
    assert any("ambiguous number" in error for error in parsed["errors"])
    assert get("ucsf-pdgm").read_answer("RAS: [1,2,3]\nANSWER: A")["evidence"]["ras"] == [1.0, 2.0, 3.0]


def test_non_finite_localizations_are_dropped():
    text = '{"wsi_label": "N", "localizations": [{"x": NaN, "y": 1}, [Infinity, 2]]}'
    parsed = get("bracs").read_answer(text)
    assert parsed["answer"] == "N" and parsed["localizations"] == []  # N slide: the list stays empty
    assert len(parsed["errors"]) == 2


HOSTILE_RUN = 128 * 1024  # quadratic field or triple patterns took 1.8 s on 4 KB of such a run; this size, hours


@pytest.mark.parametrize("module", ["ucsf-pdgm", "lumiere", "nsclc", "bracs", "camelyon17"])
@pytest.mark.parametrize("shape", [
    "\n" * HOSTILE_RUN + "x",  # every line start tried a field pattern that ran across all the blank lines
    "ANSWER: a" + " " * HOSTILE_RUN + "b",
    "ANSWER:" + "\n" * HOSTILE_RUN + "x",
    "RAS: (1" + " " * HOSTILE_RUN + "x",  # the bracketed triple split the run every way
    "RAS: R" + " " * HOSTILE_RUN + "x",
    "- \n" * (HOSTILE_RUN // 3),
    "{" * HOSTILE_RUN,  # each failed JSON candidate counted the lines of the whole reply before it
    '{"a":[' * (HOSTILE_RUN // 6),  # each candidate nested down to the recursion limit
])
def test_hostile_replies_are_parsed_in_linear_time(module, shape):
    parsed = get(module).read_answer(shape)
    assert parsed["errors"] and not any(error.startswith("parser failure") for error in parsed["errors"])


def test_an_empty_field_line_takes_the_next_line_and_json_answers_survive_junk_after_them():
    assert get("ucsf-pdgm").read_answer("ANSWER:\n\n  (C)\n")["answer"] == "C"
    assert get("ucsf-pdgm").read_answer("answer: (B)\n> Final Answer = (D)  \n")["answer"] == "D"
    answer = '{"wsi_label": "Normal", "localizations": [' + ", ".join(['{"x": 1, "y": 2}'] * 300) + "]}"
    junk = " and then " + "{" * 5000 + '{"a":[' * 200  # nested deeper than the interpreter's recursion limit
    parsed = get("bracs").read_answer("Here it is: " + answer + junk)
    assert parsed["answer"] == "N" and len(parsed["localizations"]) == 300
    assert get("bracs").read_answer(answer + '{"a":[' * 300)["answer"] is None  # the search gives up after 256


def test_a_reply_that_writes_none_of_the_keys_has_none_of_its_json_decoded(monkeypatch):
    """Such a reply holds no answer object (a key is written ``"key"``, or escaped with a backslash): its candidates
    are not decoded, one by one, down a hostile nesting; an escaped key is still found."""
    from MedOpenClawLib.bench.kit import parsing

    decode_at, decoded = parsing._decode_at, []
    monkeypatch.setattr(parsing, "_decode_at", lambda text, start: decoded.append(start) or decode_at(text, start))
    assert parsing.find_json_object('{"a":' * 1500 + "1" + "}" * 1500, ("wsi_label",)) is None and decoded == []
    assert parsing.find_json_object('x {"\\u0077si_label": "Normal"} {"a": 1}', ("wsi_label",)) == {
        "wsi_label": "Normal"}
    assert parsing.find_json_object('{"wsi_label": "IC", "b": {"c": 1}} then', ("wsi_label",)) == {
        "wsi_label": "IC", "b": {"c": 1}}
    assert len(decoded) == 4  # the two objects of each reply that start like one


def test_the_search_reads_at_most_a_bounded_multiple_of_the_reply(monkeypatch):
    """Objects nested 1500 deep that write a key but hold none at their level: each candidate decodes everything
    inside it, quadratic in the reply, until the characters read reach the cap; an answer at the end is still found
    first."""
    import json

    from MedOpenClawLib.bench.kit import parsing

    sliced: list[int] = []  # the length of every slice a candidate was decoded from

    class Counting(json.JSONDecoder):
        def raw_decode(self, doc, *arguments):
            sliced.append(len(doc))
            return super().raw_decode(doc, *arguments)

    monkeypatch.setattr(parsing, "_DECODER", Counting())
    hostile = '{"a": {"note": "wsi_label", "b":' * 1500 + "1" + "}}" * 1500
    assert parsing.find_json_object(hostile, ("wsi_label",)) is None
    # a slice grows 4x at a time while the value runs past it: at most 16/3 x what a candidate read
    assert sum(sliced) <= 6 * (parsing.MAX_JSON_READ_FACTOR + 1) * len(hostile)
    answer = '{"wsi_label": "IC", "localizations": [' + ", ".join(['{"x": 1, "y": 2}'] * 300) + "]}"
    assert parsing.find_json_object(hostile + answer, ("wsi_label",))["wsi_label"] == "IC"
