"""The small synthetic cohort the cohort, loader and leak-scan tests prepare (fast: 4 mm brains, 96² CT)."""

from MedOpenClawLib.bench.synthetic.cohort import CohortConfig

SMALL = CohortConfig(seed=7, cases=2, mri_spacing_mm=4, slide_size=(1024, 768), ct_size=96, workers=1)
