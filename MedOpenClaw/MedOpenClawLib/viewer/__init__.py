"""Radiology viewer engine: a real MRML scene with Red/Yellow/Green slice logics, headless or inside 3D Slicer."""
