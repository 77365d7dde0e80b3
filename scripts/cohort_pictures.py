"""Picture one case of each module of two raw cohorts side by side (e.g. the previous generator and this one).

Usage: python scripts/cohort_pictures.py --before OLD_RAW --after NEW_RAW --out docs/cohort_before_after.png
where each RAW is a ``medopenclaw bench cohort --out RAW`` directory (the datasets in their own layouts).
Brain: T1c and FLAIR through the lesion; thorax: CT through the tumour and a coronal PET maximum projection;
slides: the pyramid's low-resolution level. Everything is read from the written files.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "MedOpenClaw"))

from MedOpenClawLib.bench import modules  # noqa: E402

SIDE = 256


def _grey(image: np.ndarray, low: float, high: float) -> np.ndarray:
    return (np.clip((image - low) / max(high - low, 1e-6), 0, 1) * 255).astype(np.uint8)


def _fit(image: np.ndarray) -> np.ndarray:
    """``image`` as RGB, shrunk into a black SIDE x SIDE square (aspect kept)."""
    from PIL import Image

    picture = Image.fromarray(image).convert("RGB")
    picture.thumbnail((SIDE, SIDE))
    canvas = Image.new("RGB", (SIDE, SIDE), (0, 0, 0))
    canvas.paste(picture, ((SIDE - picture.width) // 2, (SIDE - picture.height) // 2))
    return np.asarray(canvas)


def _axial(path: Path, k: int | None = None) -> tuple[np.ndarray, int]:
    import nibabel as nib

    image = nib.as_closest_canonical(nib.load(path))
    data = np.asarray(image.dataobj, dtype=np.float32)
    k = data.shape[2] // 2 if k is None else k
    return data[:, :, k].T[::-1], k


def ucsf_series(root: Path) -> tuple[Path, Path, Path]:
    """(segmentation, T1c, FLAIR) of the first UCSF-PDGM case."""
    folder = sorted(root.glob("UCSF-PDGM-*_nifti"))[0]
    return tuple(next(folder.glob(f"*_{name}.nii.gz")) for name in ("tumor_segmentation", "T1c", "FLAIR"))


def lumiere_series(root: Path) -> tuple[Path, Path, Path]:
    """(segmentation, CT1, FLAIR) of the first LUMIERE patient's week-12 study."""
    study = sorted((root / "Imaging").glob("Patient-*/week-012"))[0]
    seg = study / "DeepBraTumIA-segmentation" / "atlas" / "segmentation" / "seg_mask.nii.gz"
    return seg, study / "CT1.nii.gz", study / "FLAIR.nii.gz"


def brain(series: tuple[Path, Path, Path]) -> list:
    """The contrast-enhanced T1 and the FLAIR through the lesion's centre."""
    import nibabel as nib

    seg, t1c, flair = series
    mask = np.asarray(nib.as_closest_canonical(nib.load(seg)).dataobj)
    centre = nib.as_closest_canonical(nib.load(seg)).affine @ [*np.argwhere(mask > 0).mean(axis=0), 1]
    pictures = []
    for path in (t1c, flair):
        image = nib.as_closest_canonical(nib.load(path))
        k = int(round((np.linalg.inv(image.affine) @ centre)[2]))
        data, _ = _axial(path, min(max(k, 0), image.shape[2] - 1))
        pictures.append(_fit(_grey(data, 0, np.percentile(data, 99.5))))
    return pictures


def thorax(root: Path) -> list:
    import pydicom

    case = sorted((root / "manifest-1622561851074" / "NSCLC Radiogenomics").glob("R01-*"))[0]
    series = {}
    for folder in case.rglob("*"):
        files = sorted(folder.glob("*.dcm")) if folder.is_dir() else []
        if files:
            first = pydicom.dcmread(files[0], stop_before_pixels=True)
            series[first.Modality] = files
    seg = pydicom.dcmread(series["SEG"][0])
    frames = np.asarray(seg.pixel_array).reshape(-1, seg.Rows, seg.Columns)
    k = int(np.argmax(frames.sum(axis=(1, 2))))
    ct = [pydicom.dcmread(path) for path in series["CT"]]
    ct.sort(key=lambda ds: float(ds.ImagePositionPatient[2]))
    uid = seg.PerFrameFunctionalGroupsSequence[k].DerivationImageSequence[0].SourceImageSequence[0]
    slice_ = next(ds for ds in ct if ds.SOPInstanceUID == uid.ReferencedSOPInstanceUID)
    hu = slice_.pixel_array * float(slice_.RescaleSlope) + float(slice_.RescaleIntercept)
    pet = [pydicom.dcmread(path) for path in series["PT"]]
    pet.sort(key=lambda ds: float(ds.ImagePositionPatient[2]))
    volume = np.stack([ds.pixel_array * float(ds.RescaleSlope) for ds in pet])
    mip = volume.max(axis=1)[::-1]
    aspect = float(pet[1].ImagePositionPatient[2]) - float(pet[0].ImagePositionPatient[2])
    mip = np.repeat(mip, max(int(round(aspect / float(pet[0].PixelSpacing[0]))), 1), axis=0)
    return [_fit(_grey(hu, -1000, 400)), _fit(255 - _grey(mip, 0, np.percentile(mip, 99.8)))]


def slide(root: Path, pattern: str) -> list:
    import tifffile

    path = sorted(root.rglob(pattern))[0]
    with tifffile.TiffFile(path) as tiff:
        level = tiff.pages[min(1, len(tiff.pages) - 1)].asarray()
        zoom = tiff.pages[0].asarray()
    height, width = zoom.shape[:2]
    crop = zoom[height // 2 - 256: height // 2 + 256, width // 2 - 256: width // 2 + 256]
    return [_fit(level), _fit(crop)]


# module -> (what its pictures show, the pictures from its dataset directory in a raw cohort), in row order
PICTURES = {
    "ucsf-pdgm": ("T1c, FLAIR", lambda root: brain(ucsf_series(root))),
    "lumiere": ("CT1, FLAIR", lambda root: brain(lumiere_series(root))),
    "nsclc": ("CT, PET MIP", thorax),
    "bracs": ("overview, centre", lambda root: slide(root, "BRACS_*.svs")),
    "camelyon17": ("overview, centre", lambda root: slide(root, "patient_*.tif")),
}


def module_pictures(root: Path) -> dict[str, tuple[list[str], list]]:
    """dataset name -> (what each picture shows, the pictures) for every module, in row order."""
    rows = {}
    for module, (what, pictures) in PICTURES.items():
        rows[modules.get(module).dataset_dir] = (what.split(", "), pictures(root / modules.get(module).dataset_dir))
    return rows


def draw_sheet(before: dict, after: dict, out: Path) -> None:
    """A row per dataset, the previous generator's two pictures beside the calibrated cohort's, each titled with
    what it shows, drawn with matplotlib (its bundled DejaVu Sans)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot

    figure, axes = pyplot.subplots(len(before), 4, figsize=(9.4, 2.55 * len(before) + 0.5), squeeze=False,
                                   gridspec_kw={"wspace": 0.06, "hspace": 0.22, "left": 0.035, "right": 0.995,
                                                "top": 1 - 0.55 / (2.55 * len(before) + 0.5), "bottom": 0.01})
    for row, dataset in enumerate(before):
        (names, old), (_, new) = before[dataset], after[dataset]
        for column, (name, picture) in enumerate(zip(names * 2, old + new)):
            axis = axes[row][column]
            axis.imshow(picture, interpolation="lanczos")
            axis.set_xticks([])
            axis.set_yticks([])
            axis.set_title(name, fontsize=9, pad=3)
        axes[row][0].text(-0.05, 0.5, dataset, transform=axes[row][0].transAxes, ha="right", va="center",
                          rotation=90, fontsize=10, fontweight="bold")
    for first, heading in ((0, "previous generator"), (2, "calibrated cohort")):
        left, right = axes[0][first].get_position(), axes[0][first + 1].get_position()
        figure.text((left.x0 + right.x1) / 2, left.y1 + 0.35 / figure.get_figheight(), heading, ha="center",
                    va="bottom", fontsize=12, fontweight="bold")
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    pyplot.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    draw_sheet(module_pictures(Path(args.before)), module_pictures(Path(args.after)), Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
