"""MedOpenClaw runtime: a bounded, audited set of named actions over 3D Slicer and whole-slide viewers.

Importable both inside the 3D Slicer application and headless (``slicer-core``).
"""

__version__ = "0.1.0"
