"""MedCopilot scripted module: a chat panel whose model may only propose MedOpenClaw registry actions, each
approved or rejected by the clinician (or auto-approved when they switch that on), all in one audit trace.

Behaviour lives in ``MedCopilotLib`` (tested headless with PySide6); this file is Slicer glue.
"""

import qt
import slicer
from slicer.ScriptedLoadableModule import (
    ScriptedLoadableModule,
    ScriptedLoadableModuleLogic,
    ScriptedLoadableModuleTest,
    ScriptedLoadableModuleWidget,
)


class MedCopilot(ScriptedLoadableModule):
    def __init__(self, parent):
        from MedOpenClaw import refuseOlderSlicer

        ScriptedLoadableModule.__init__(self, parent)
        self.parent.title = "MedCopilot"
        self.parent.categories = ["Informatics"]
        self.parent.dependencies = ["MedOpenClaw"]
        self.parent.contributors = ["MedOpenClaw team"]
        self.parent.helpText = """
Chat with a vision-language model about the loaded study. The model can only propose MedOpenClaw's named
actions; each proposal is shown as a card you approve or reject. Evidence it captures is listed and the final
answer links every claim to its evidence. There is no code execution and no Python console access."""
        self.parent.acknowledgementText = "MedOpenClaw and MedFlow-Bench."
        refuseOlderSlicer(self.parent)


class QSettingsStore:
    """MedCopilotLib's settings store over Slicer's QSettings."""

    def value(self, key):
        value = qt.QSettings().value(key)
        return None if value in (None, "") else str(value)

    def set_value(self, key, value):
        qt.QSettings().setValue(key, value)

    def remove(self, key):
        qt.QSettings().remove(key)


class MedCopilotWidget(ScriptedLoadableModuleWidget):
    def __init__(self, parent=None):
        ScriptedLoadableModuleWidget.__init__(self, parent)
        self.panel = None

    def setup(self):
        ScriptedLoadableModuleWidget.setup(self)
        from MedOpenClaw import MedOpenClawLogic

        openClaw = MedOpenClawLogic()
        if not openClaw.ensureDependencies(askUser=True):
            self.layout.addWidget(qt.QLabel("MedCopilot needs MedOpenClaw's Python packages; reload to install."))
            return
        from MedCopilotLib.panel import CopilotPanel
        from MedOpenClawLib.gui.app_session import on_session_changed

        self.panel = CopilotPanel(QSettingsStore())
        self.layout.addWidget(self.panel.widget, 1)
        on_session_changed(self.onSessionChanged)
        self.onSessionChanged(openClaw.sharedSession())

    def onSessionChanged(self, session):
        self.panel.attach(session.registry)

    def cleanup(self):
        if self.panel is None:  # the packages were declined: setup() built no panel and added no listener
            return
        from MedOpenClawLib.gui.app_session import remove_session_listener

        remove_session_listener(self.onSessionChanged)
        self.panel.close()


class MedCopilotLogic(ScriptedLoadableModuleLogic):
    """Copilot sessions without the widget (scripts, tests): same registry, same audit trace."""

    def createSession(self, settings, registry=None):
        from MedCopilotLib.session import CopilotSession
        from MedOpenClaw import MedOpenClawLogic
        from MedOpenClawLib.gui.view_restore import restore_view
        from MedOpenClawLib.providers import make_provider

        problems = settings.validate()
        if problems:
            raise ValueError("; ".join(problems))
        registry = registry or MedOpenClawLogic().sharedSession().registry
        return CopilotSession(registry, make_provider(settings.provider_config()),
                              restore_view=lambda seq: restore_view(registry, registry.trace.records[seq]),
                              secrets=[settings.api_key])


class MedCopilotTest(ScriptedLoadableModuleTest):
    """Runs inside Slicer against a scripted OpenAI-compatible server on 127.0.0.1."""

    @classmethod
    def setUpClass(cls):
        """MedOpenClaw's packages first (see ``MedOpenClawTest.setUpClass``: ctest never calls ``runTest``)."""
        from MedOpenClaw import MedOpenClawTest

        MedOpenClawTest.setUpClass()

    def setUp(self):
        slicer.mrmlScene.Clear()

    def tearDown(self):
        """Run the cleanups now: the panel's "Reload and Test" (the base class's ``runTest``) calls ``tearDown`` but
        never ``doCleanups``; under unittest's ``run`` they would run next, and none is left to run twice."""
        self.doCleanups()

    def test_ApprovedProposalRunsOnTheAppScene(self):
        import json
        import threading
        import time
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from MedCopilotLib.settings import CopilotSettings
        from MedOpenClaw import MedOpenClawLogic, MedOpenClawTest

        replies = [
            {"role": "assistant", "content": "Bookmarking the axial view.", "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "bookmark_view", "arguments": '{"view": "axial", "label": "test"}'}}]},
            {"role": "assistant", "content": "Bookmarked [ev1]."},
        ]

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server naming)
                self.rfile.read(int(self.headers["Content-Length"]))
                body = json.dumps({"choices": [{"index": 0, "message": replies.pop(0),
                                                "finish_reason": "stop"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        copilot = None
        try:
            session, path = MedOpenClawTest.sessionWithVolume(self)
            self.assertTrue(session.registry.call("open_case", {"dicom_dir": path}, actor="human").ok)
            settings = CopilotSettings(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", model="fake")
            copilot = MedCopilotLogic().createSession(settings, session.registry)
            copilot.send("bookmark this")
            deadline = time.time() + 60  # the first call starts the model process (PythonSlicer, imports)

            def settle():
                while copilot.state == "thinking" and time.time() < deadline:
                    slicer.app.processEvents()
                    copilot.poll()
                    time.sleep(0.02)  # the panel's timer polls every 50 ms: no need to spin a core

            settle()
            card = copilot.queue.current()[0]
            copilot.approve(card.id)
            settle()
            self.assertEqual(copilot.conversation.entries[-1].kind, "answer")
            self.assertEqual([item.ref for item in copilot.evidence.items], ["ev1"])
            actors = [r["actor"] for r in session.registry.trace.actions()]
            self.assertEqual(actors, ["human", "agent"])
            self.assertIs(MedOpenClawLogic().sharedSession(), session)
        finally:
            if copilot is not None:
                copilot.close()  # ends its model process
            server.shutdown()
            server.server_close()
        self.delayDisplay("Test passed")
