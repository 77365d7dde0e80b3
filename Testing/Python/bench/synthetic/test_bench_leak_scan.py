"""No ground-truth label in anything an agent can see: every agent-visible file of every prepared package -- its
path, NIfTI header text (descrip, aux_file, intent_name), DICOM text elements, TIFF ASCII tags and the slide
properties OpenSlide/tiffslide report -- holds none of its case's label words; and a hidden path is refused with
the same error whether it exists or not (no existence oracle)."""

from __future__ import annotations

import re
from pathlib import Path

import nibabel as nib
import pydicom
import pytest
import tifffile
import tiffslide

from MedOpenClawLib.bench import modules
from MedOpenClawLib.bench.cases import load_cases, load_ground_truth
from MedOpenClawLib.core.hygiene import preview
from MedOpenClawLib.core.policy import DataRootPolicy
from MedOpenClawLib.core.result import ActionError

TEXT_VRS = {"AE", "AS", "CS", "DA", "DS", "DT", "IS", "LO", "LT", "PN", "SH", "ST", "TM", "UC", "UI", "UR", "UT"}


def label_words(truth) -> set[str]:
    """The case's ground-truth labels (answers and readable labels), whole and word by word (4+ letters)."""
    values = [value for group in (truth.answers, truth.labels) for value in group.values() if isinstance(value, str)]
    words = {value.lower() for value in values if len(value) >= 3}
    words |= {word.lower() for value in values for word in re.findall(r"[A-Za-z]{4,}", value)}
    return words


def visible_texts(path: Path) -> list[str]:
    """Every text an agent-visible file carries beside its pixels."""
    name = path.name.lower()
    if name.endswith((".nii", ".nii.gz")):
        header = nib.load(path).header
        return [bytes(header[field]).decode("latin-1") for field in ("descrip", "aux_file", "intent_name")]
    if name.endswith(".dcm"):
        texts = []
        for element in pydicom.dcmread(path, stop_before_pixels=True).iterall():
            if element.VR in TEXT_VRS and element.value is not None:
                texts.append(str(element.value))
        return texts
    if name.endswith((".tif", ".tiff", ".svs")):
        with tifffile.TiffFile(path) as tiff:
            texts = [str(tag.value) for page in tiff.pages for tag in page.tags if isinstance(tag.value, str)]
        with tiffslide.TiffSlide(path) as slide:
            texts += [f"{key}={value}" for key, value in slide.properties.items()]
        return texts
    raise AssertionError(f"{path}: an agent-visible file of a type the leak scan does not read")


@pytest.mark.parametrize("module", list(modules.names()))
def test_no_agent_visible_file_holds_a_label_word(packages, module):
    cases = load_cases(packages / module)
    assert cases
    for case in cases:
        words = label_words(load_ground_truth(packages / module, case.case_id))
        files = sorted(path for path in case.data_root.rglob("*") if path.is_file())
        assert files
        for path in files:
            for text in [path.relative_to(packages / module).as_posix(), *visible_texts(path)]:
                found = [word for word in words if re.search(rf"(?<![a-z]){re.escape(word)}(?![a-z])", text.lower())]
                assert not found, f"{module} {case.case_id}: {path.name} shows {found} in {text[:120]!r}"


@pytest.mark.parametrize("allowed", ["data", "package"])
def test_a_hidden_path_gets_the_same_error_whether_it_exists_or_not(packages, allowed):
    package = packages / "ucsf-pdgm"
    case = load_cases(package)[0]
    policy = DataRootPolicy([package / "data" if allowed == "data" else package])
    answers = []
    for hidden in (package / "hidden" / case.case_id / "ground_truth.json",
                   package / "hidden" / case.case_id / "no_such_file.nii.gz",
                   package / "hidden" / "no-such-case" / "mask.nii.gz"):
        with pytest.raises(ActionError) as refused:
            policy.resolve(str(hidden))
        answers.append((refused.value.code, str(refused.value).replace(preview(str(hidden)), "<path>")))
    assert (package / "hidden" / case.case_id / "ground_truth.json").is_file()
    assert answers[0][0] == "path_not_allowed" and len(set(answers)) == 1, answers
