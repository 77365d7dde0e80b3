"""``slicer.ScriptedLoadableModule`` for tests outside the Slicer application (any Python: it needs no slicer-core).

The base classes of a scripted module as Slicer 5.10 defines them (Base/Python/slicer/ScriptedLoadableModule.py),
reduced to what a module file and its test class use; ``slicer`` is whatever module ``import slicer`` gives the
caller (the application double, or a stand-in for an older release's application).
"""

from __future__ import annotations

import sys


def scripted_module_double():
    """``slicer.ScriptedLoadableModule`` (Base/Python/slicer/ScriptedLoadableModule.py, Slicer 5.10): the module
    base sets the module's name and registers its ``runTest`` in ``slicer.selfTests``; the logic takes its
    module's name from its class; the test is a ``unittest.TestCase`` whose ``delayDisplay`` hands the message to
    ``slicer.util.delayDisplay`` (slicer-core's real one: below 400 ms it only processes the application's events).
    The widget base is left out: it needs ctk and the module panel, which the module tests never create."""
    import importlib
    import types
    import unittest

    module = types.ModuleType("slicer.ScriptedLoadableModule")

    class ScriptedLoadableModule:
        def __init__(self, parent):
            self.parent = parent
            self.moduleName = self.__class__.__name__  # noqa: N815 - Slicer's name
            parent.title, parent.categories, parent.dependencies = "", [], []
            slicer = sys.modules["slicer"]
            if not hasattr(slicer, "selfTests"):
                slicer.selfTests = {}
            slicer.selfTests[self.moduleName] = self.runTest

        def runTest(self, msec=100, **kwargs):  # noqa: N802 - Slicer's name
            try:
                case = getattr(importlib.import_module(self.__module__), self.moduleName + "Test")
            except AttributeError as missing:
                raise AssertionError(f"Test case class not found: {self.__module__}.{self.moduleName}Test ") \
                    from missing
            test = case()
            test.messageDelay = msec
            test.runTest(**kwargs)

    class ScriptedLoadableModuleWidget:
        def __init__(self, parent=None):
            raise NotImplementedError("the application double has no module panels (ctk, qSlicerModulePanel)")

    class ScriptedLoadableModuleLogic:
        def __init__(self, parent=None):
            self.moduleName = self.__class__.__name__.removesuffix("Logic")  # noqa: N815 - Slicer's name
            self.isSingletonParameterNode = True  # noqa: N815 - Slicer's name

    class ScriptedLoadableModuleTest(unittest.TestCase):
        def __init__(self, *args, **kwargs):
            self.moduleTestNames = []  # noqa: N815 - Slicer's name
            super().__init__(*args, **kwargs)
            self.enableScreenshots = False  # noqa: N815 - Slicer's name
            self.moduleTestNames = [name for name in dir(self) if "test" in name and callable(getattr(self, name))]

        def delayDisplay(self, message, requestedDelay=None, msec=None):  # noqa: N802,N803 - Slicer's names
            msec = getattr(self, "messageDelay", None) or msec or requestedDelay or 100
            sys.modules["slicer"].util.delayDisplay(message, msec)

    for cls in (ScriptedLoadableModule, ScriptedLoadableModuleWidget, ScriptedLoadableModuleLogic,
                ScriptedLoadableModuleTest):
        cls.__module__ = module.__name__
        setattr(module, cls.__name__, cls)
    return module
