"""Panel logic of the MedOpenClaw and MedCopilot Slicer modules, kept free of Slicer so it is testable headless.

The pure-Python models (audit table, trace tools, dependency check) never import Qt; the panel classes import
Qt only through :mod:`.qt_compat`, which is PythonQt's ``qt`` inside Slicer and PySide6 elsewhere.
"""
