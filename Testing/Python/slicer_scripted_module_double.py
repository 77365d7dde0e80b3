"""``slicer.ScriptedLoadableModule`` and ``slicer.testing`` for tests outside the Slicer application (any Python: it
needs no slicer-core).

The base classes of a scripted module as Slicer 5.10 and 5.12 define them (Base/Python/slicer/
ScriptedLoadableModule.py, identical there in what is used here), reduced to what a module file and its test class
use, and ``slicer.testing`` (Base/Python/slicer/testing.py), through which ctest runs a module's tests; ``slicer`` is
whatever module ``import slicer`` gives the caller (the application double, or a stand-in for an older release's
application)."""

from __future__ import annotations

import sys


def scripted_module_double():
    """``slicer.ScriptedLoadableModule`` (Base/Python/slicer/ScriptedLoadableModule.py, Slicer 5.10/5.12): the module
    base sets the module's name and registers its ``runTest`` in ``slicer.selfTests``; the logic takes its
    module's name from its class; the test is a ``unittest.TestCase`` whose ``delayDisplay`` hands the message to
    ``slicer.util.delayDisplay`` (slicer-core's real one: below 400 ms it only processes the application's events)
    and whose ``runTest`` (the panel's "Reload and Test") runs ``setUpClass``, then every ``moduleTestNames`` method
    between ``setUp`` and ``tearDown``, then ``tearDownClass``.
    The widget base is left out: it needs ctk and the module panel, which the module tests never create."""
    import importlib
    import logging
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

        def runTest(self):  # noqa: N802 - Slicer's name
            if not self.moduleTestNames:
                logging.warning("No test is defined in " + self.__class__.__name__)
                return
            self.setUpClass()
            for test_name in self.moduleTestNames:
                self.setUp()
                logging.info(f"Running {test_name}")
                getattr(self, test_name)()
                self.tearDown()
            self.tearDownClass()

    for cls in (ScriptedLoadableModule, ScriptedLoadableModuleWidget, ScriptedLoadableModuleLogic,
                ScriptedLoadableModuleTest):
        cls.__module__ = module.__name__
        setattr(module, cls.__name__, cls)
    return module


def testing_double():
    """``slicer.testing`` as Base/Python/slicer/testing.py has it (Slicer 5.10 and 5.12, same text): what
    ``slicer_add_python_unittest`` (CMake/SlicerMacroPythonTesting.cmake) runs under ctest, ``--python-code "import
    slicer.testing; slicer.testing.runUnitTest(['<binary dir>', '<source dir>'], '<module>')"``. The loader finds
    the module's ``unittest.TestCase`` classes and runs their ``test*`` methods (``setUpClass``, ``setUp``): a
    test class's ``runTest`` is never called there."""
    import types

    module = types.ModuleType("slicer.testing")

    def exitSuccess():  # noqa: N802 - Slicer's name
        pass

    def exitFailure(message=""):  # noqa: N802 - Slicer's name
        raise Exception(message)

    def runUnitTest(path, testname):  # noqa: N802 - Slicer's name
        import unittest

        if isinstance(path, str):
            sys.path.append(path)
        else:
            sys.path.extend(path)
        print("-------------------------------------------")
        print(f"path: {path}\ntestname: {testname}")
        print("-------------------------------------------")
        suite = unittest.TestLoader().loadTestsFromName(testname)
        result = unittest.TextTestRunner(verbosity=2).run(suite)
        if not result.wasSuccessful():
            exitFailure()

    for function in (exitSuccess, exitFailure, runUnitTest):
        function.__module__ = module.__name__
        setattr(module, function.__name__, function)
    return module
