"""Whole-slide pathology: slide access, the headless viewer engine, QuPath bridge client and pathology actions."""
