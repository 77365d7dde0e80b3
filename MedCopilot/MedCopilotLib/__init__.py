"""MedCopilot: a clinician-supervised chat over MedOpenClaw's action registry, without Slicer or Qt.

The model proposes registry actions; the clinician approves or rejects each one (or switches on auto mode);
approved actions run through the same registry and audit trace as every other caller. There is no code
execution path: a proposal is an action name plus JSON arguments, nothing else.
"""
