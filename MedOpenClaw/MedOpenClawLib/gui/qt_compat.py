"""One ``qt`` namespace for the panels: PythonQt's ``qt`` module inside 3D Slicer, PySide6 everywhere else.

The panels are written against the subset of the API both bindings share: classes by their Qt names
(``qt.QPushButton``), enum values through their class (``qt.QHeaderView.Stretch``), new-style signals
(``button.clicked.connect(slot)``) and setters (``setText``). Getters differ — PythonQt turns Qt properties into
attributes (``edit.text``) while PySide6 keeps methods (``edit.text()``) — so panels read properties with
:func:`read`, which is ``QObject.property`` in both. That includes getters that look like plain methods but
are Qt properties (``QTableWidget.rowCount``, ``QListWidget.count``/``currentRow``, ``QScrollBar.maximum``).
"""

from __future__ import annotations

import importlib
import types
from typing import Any

PYSIDE_MODULES = ("QtCore", "QtGui", "QtWidgets", "QtNetwork")


def _pyside_namespace() -> types.ModuleType:
    """Flatten the PySide6 modules into one module the way PythonQt's ``qt`` presents them."""
    namespace = types.ModuleType("qt", "PySide6 classes under PythonQt's names")
    for module_name in PYSIDE_MODULES:
        module = importlib.import_module(f"PySide6.{module_name}")
        for name in dir(module):
            if name.startswith("Q") or name == "Qt":
                setattr(namespace, name, getattr(module, name))
    namespace.BINDING = "PySide6"
    return namespace


def load_qt() -> types.ModuleType:
    try:
        module = importlib.import_module("qt")  # PythonQt, present only inside the Slicer application
    except ImportError:
        return _pyside_namespace()
    if not hasattr(module, "BINDING"):
        module.BINDING = "PythonQt"
    return module


qt = load_qt()


def read(widget: Any, name: str) -> Any:
    """Read a Qt property (``text``, ``checked``, ``value``, ``currentText`` ...) in either binding."""
    return widget.property(name)


def application() -> Any:
    """The running QApplication; created here only outside Slicer (tests, screenshot scripts)."""
    instance = qt.QApplication.instance()
    if instance is None:
        instance = qt.QApplication([])
    return instance


def pixmap_from_png(data: bytes) -> Any:
    pixmap = qt.QPixmap()
    pixmap.loadFromData(qt.QByteArray(data), "PNG")
    return pixmap


def connect_activated(notifier: Any, slot: Any) -> None:
    """Connect a ``QSocketNotifier``'s ``activated`` signal to ``slot(socket)``.

    The signal is overloaded (``activated(int)`` and, since Qt 5.15, ``activated(QSocketDescriptor,
    QSocketNotifier::Type)``); PythonQt resolves ``notifier.activated.connect`` to an overload it cannot convert,
    so inside Slicer connect with the explicit signature, as Slicer's WebServer module does
    (Modules/Scripted/WebServer/WebServer.py, class SlicerHTTPServer: ``connect('activated(int)', ...)``).
    """
    if getattr(qt, "BINDING", None) == "PythonQt":
        notifier.connect("activated(int)", slot)
    else:
        notifier.activated.connect(slot)


def process_events() -> None:
    qt.QApplication.processEvents()
