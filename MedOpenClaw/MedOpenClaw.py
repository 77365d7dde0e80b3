"""MedOpenClaw scripted module: server controls and the live audit log of the session's action registry.

The panel logic lives in ``MedOpenClawLib.gui`` (tested headless with PySide6); this file is Slicer glue.
"""

import os

import qt
import slicer
from slicer.ScriptedLoadableModule import (
    ScriptedLoadableModule,
    ScriptedLoadableModuleLogic,
    ScriptedLoadableModuleTest,
    ScriptedLoadableModuleWidget,
)

SETTINGS_PREFIX = "MedOpenClaw/"


def refuseOlderSlicer(parent):
    """On a 3D Slicer older than MedOpenClaw supports, one error line naming the release needed and the module
    hidden (its panel, logic and test never run there); True when refused."""
    import logging

    from MedOpenClawLib.core.dependencies import slicer_release_problem

    problem = slicer_release_problem(slicer.app.majorVersion, slicer.app.minorVersion)
    if problem is None:
        return False
    logging.error(problem)
    parent.hidden = True
    parent.helpText = problem
    return True


class MedOpenClaw(ScriptedLoadableModule):
    def __init__(self, parent):
        ScriptedLoadableModule.__init__(self, parent)
        self.parent.title = "MedOpenClaw"
        self.parent.categories = ["Informatics"]
        self.parent.dependencies = []
        self.parent.contributors = ["MedOpenClaw team"]
        self.parent.helpText = """
Serves a bounded, audited set of named viewer actions to agents (REST on 127.0.0.1 with a bearer token) and
shows every action of the session - by agents, the copilot or you - in a live, hash-chained audit log.
No route or action executes code."""
        self.parent.acknowledgementText = "MedOpenClaw and MedFlow-Bench."
        refuseOlderSlicer(self.parent)


class MedOpenClawWidget(ScriptedLoadableModuleWidget):
    def __init__(self, parent=None):
        ScriptedLoadableModuleWidget.__init__(self, parent)
        self.logic = None
        self.serverPanel = None
        self.auditPanel = None

    def setup(self):
        ScriptedLoadableModuleWidget.setup(self)
        self.logic = MedOpenClawLogic()
        if not self.logic.ensureDependencies(askUser=True):
            label = qt.QLabel("MedOpenClaw needs Python packages that are not installed. Reload the module to "
                              "install them.")
            label.wordWrap = True
            self.layout.addWidget(label)
            return
        import ctk

        from MedOpenClawLib.gui.app_session import on_session_changed
        from MedOpenClawLib.gui.audit_panel import AuditLogPanel
        from MedOpenClawLib.gui.server_panel import ServerControlsPanel

        serverBox = ctk.ctkCollapsibleButton()
        serverBox.text = "Server and session"
        serverLayout = qt.QVBoxLayout(serverBox)
        self.serverPanel = ServerControlsPanel(new_session=self.logic.newSession)
        serverLayout.addWidget(self.serverPanel.widget)
        self.layout.addWidget(serverBox)

        auditBox = ctk.ctkCollapsibleButton()
        auditBox.text = "Audit log"
        auditLayout = qt.QVBoxLayout(auditBox)
        self.auditPanel = AuditLogPanel()
        auditLayout.addWidget(self.auditPanel.widget)
        self.layout.addWidget(auditBox, 1)

        on_session_changed(self.onSessionChanged)
        self.onSessionChanged(self.logic.sharedSession())

    def onSessionChanged(self, session):
        self.serverPanel.attach(session)
        self.auditPanel.attach(session)

    def cleanup(self):
        if self.auditPanel is None:  # the packages were declined: setup() built no panel and added no listener
            return
        from MedOpenClawLib.gui.app_session import remove_session_listener

        remove_session_listener(self.onSessionChanged)
        self.auditPanel.detach()


class MedOpenClawLogic(ScriptedLoadableModuleLogic):
    """Owns the application-wide session; usable from scripts without the widget."""

    def missingDependencies(self, features=("core",)):
        from MedOpenClawLib.core.dependencies import missing_for

        return missing_for(features)

    def ensureDependencies(self, features=("core",), askUser=True):
        """Install the packages ``features`` lack, only after the user agrees (never silently); torch through
        SlicerPyTorch's PyTorchUtils when that extension is installed. Whether everything is there afterwards.

        Under ``--testing`` ``confirmOkCancelDisplay`` answers OK by itself, so nothing is installed from the
        dialog then (the test classes set their requirements up first, with ``askUser=False``, as
        SlicerTotalSegmentator's test does); a failed install (offline) is logged, not raised out of setup().
        """
        import logging

        from MedOpenClawLib.core.dependencies import FEATURE_NAMES, install

        names = ", ".join(FEATURE_NAMES[feature] for feature in features)

        def confirm(missing):
            if not askUser:
                return True
            if slicer.app.commandOptions().testingEnabled:  # the test mode PyTorchUtils checks the same way
                logging.warning(f"{names}: not installing {', '.join(missing)} without asking (--testing)")
                return False
            return slicer.util.confirmOkCancelDisplay(
                f"{names} needs these Python packages:\n\n" + "\n".join(missing) + "\n\nInstall them now?",
                "MedOpenClaw dependencies",
            )

        def pipInstall(requirements):
            with _waitCursor():
                slicer.util.pip_install(requirements)

        try:
            return not install(features, confirm, pipInstall)
        except Exception as error:  # slicer.util.pip_install raises CalledProcessError (offline, no wheel)
            logging.error(f"Installing the Python packages of {names} failed: {error}")
            return False

    def sessionsDirectory(self):
        default = os.path.join(slicer.app.defaultScenePath, "MedOpenClaw", "sessions")
        return qt.QSettings().value(SETTINGS_PREFIX + "SessionsDirectory", default)

    def sharedSession(self):
        """The session all panels and REST clients share; created over the application's scene on first use."""
        from MedOpenClawLib.gui.app_session import shared_session

        session = shared_session()
        if session is None:
            session = self.newSession("A", self.savedDataRoots(), None)
        return session

    def savedDataRoots(self):
        roots = qt.QSettings().value(SETTINGS_PREFIX + "DataRoots") or ""
        return [root for root in roots.split(os.pathsep) if root and os.path.isdir(root)]

    def newSession(self, track, dataRoots, maxRounds):
        """A new shared session; on Track B first offers the operators' packages (an operator whose packages were
        declined answers ``missing_dependency``)."""
        from MedOpenClawLib.gui.app_session import AppSession, set_shared_session
        from MedOpenClawLib.viewer.application import SlicerApplication

        if track == "B":
            self.ensureDependencies(("track_b", "dicom_seg"))
            self.ensureDependencies(("vista3d",))

        session = AppSession.create(self.sessionsDirectory(), dataRoots, track, maxRounds,
                                    app=SlicerApplication.running_app())
        qt.QSettings().setValue(SETTINGS_PREFIX + "DataRoots", os.pathsep.join(dataRoots))
        set_shared_session(session)
        return session


class _waitCursor:
    def __enter__(self):
        slicer.app.setOverrideCursor(qt.Qt.WaitCursor)

    def __exit__(self, *exc):
        slicer.app.restoreOverrideCursor()


class MedOpenClawTest(ScriptedLoadableModuleTest):
    """Runs inside the Slicer application (``slicer.testing.runUnitTest``) on the application's own scene."""

    @classmethod
    def setUpClass(cls):
        """Install the module's packages before anything imports them (the SlicerTotalSegmentator pattern), without
        asking: a fresh Slicer has none of them. ctest runs the ``test_*`` methods through
        ``slicer.testing.runUnitTest`` (unittest's loader), where ``setUpClass`` runs first and ``runTest`` never
        does; the panel's "Reload and Test" (the base class's ``runTest``) calls ``setUpClass`` as well."""
        if not MedOpenClawLogic().ensureDependencies(("core",), askUser=False):
            raise AssertionError("MedOpenClaw's Python packages could not be installed")

    def setUp(self):
        slicer.mrmlScene.Clear()

    def tearDown(self):
        """Run the cleanups now: the panel's "Reload and Test" (the base class's ``runTest``) calls ``tearDown`` but
        never ``doCleanups``; under unittest's ``run`` they would run next, and none is left to run twice."""
        self.doCleanups()

    @staticmethod
    def sessionWithVolume(testCase):
        """A new shared session whose data root holds one small volume (its path returned too); the folder is
        removed when ``testCase`` ends, whatever its outcome (each run left one in the temporary directory)."""
        import shutil
        import tempfile

        import numpy as np

        directory = tempfile.mkdtemp(prefix="MedOpenClawTest")
        testCase.addCleanup(shutil.rmtree, directory, True)
        array = np.random.default_rng(0).normal(100, 5, (16, 32, 32)).astype(np.int16)
        array[6:10, 10:16, 12:18] = 800
        node = slicer.util.addVolumeFromArray(array, name="Phantom")
        path = os.path.join(directory, "Phantom.nrrd")
        slicer.util.saveNode(node, path)
        slicer.mrmlScene.RemoveNode(node)
        session = MedOpenClawLogic().newSession("A", [directory], None)
        return session, path

    def test_ActionsOnTheAppSceneAreAudited(self):
        self.delayDisplay("Opening a case through the registry")
        session, path = self.sessionWithVolume(self)
        registry = session.registry
        self.assertTrue(registry.call("open_case", {"dicom_dir": path, "size": 128}, actor="human").ok)
        self.assertIsNotNone(slicer.mrmlScene.GetFirstNodeByName("Phantom"))
        red = slicer.app.layoutManager().sliceWidget("Red").sliceLogic()
        moved = registry.call("set_slice_offset", {"view": "axial", "offset": 2.0, "size": 64}, actor="agent")
        self.assertTrue(moved.ok)
        self.assertAlmostEqual(abs(red.GetSliceOffset()), 2.0, places=3)
        refused = registry.call("open_case", {"dicom_dir": "/etc"}, actor="agent")
        self.assertEqual(refused.error["code"], "path_not_allowed")
        record = registry.trace.records[-2]
        registry.call("set_slice_offset", {"view": "axial", "offset": -4.0, "size": 64}, actor="agent")

        from MedOpenClawLib.core.audit import verify_trace
        from MedOpenClawLib.gui.view_restore import restore_view

        self.assertTrue(restore_view(registry, record).ok)
        self.assertAlmostEqual(abs(red.GetSliceOffset()), 2.0, places=3)
        self.assertEqual([r["actor"] for r in registry.trace.actions()][:3], ["human", "agent", "agent"])
        self.assertTrue(verify_trace(registry.trace.path).ok)
        self.delayDisplay("Test passed")

    def test_RestServerNeedsTokenAndServesLoopbackOnly(self):
        import json
        import threading
        import urllib.error
        import urllib.request

        session, _ = self.sessionWithVolume(self)
        url = session.start_server(0)
        answers = {}

        def request(name, path, token):
            call = urllib.request.Request(url + path, headers={"Authorization": "Bearer " + token})
            try:
                with urllib.request.urlopen(call, timeout=5) as response:
                    answers[name] = (response.status, json.loads(response.read()))
            except urllib.error.HTTPError as error:
                answers[name] = (error.code, None)

        clients = [threading.Thread(target=request, args=("tools", "/v1/tools", session.token)),
                   threading.Thread(target=request, args=("denied", "/v1/state", "wrong"))]
        for client in clients:
            client.start()
        while any(client.is_alive() for client in clients):
            slicer.app.processEvents()  # requests are answered on this (the GUI) thread
        session.stop_server()
        self.assertEqual(answers["tools"][0], 200)
        self.assertIn("observe", [tool["name"] for tool in answers["tools"][1]])
        self.assertEqual(answers["denied"][0], 401)
        self.assertTrue(url.startswith("http://127.0.0.1:"))
        self.delayDisplay("Test passed")
