"""The Qt binding keeps Python's reference counts: PySide6 6.12.0 on Python 3.11 lost a reference
to True on every Signal.emit() and to None on every void Qt call made from Python, so the window
aborted with ``Fatal Python error: bool_dealloc`` (or none_dealloc) after a few minutes of use
(soak review). pyproject pins the binding below 6.12; this checks the one installed."""

import sys

import pytest

pytest.importorskip("PySide6")


def test_signals_and_void_calls_leave_the_refcounts_of_true_and_none_alone(qapp):
    from PySide6.QtCore import QObject, Signal
    from PySide6.QtWidgets import QLabel

    class Emitter(QObject):
        fired = Signal(object)

    e = Emitter()
    got = []
    e.fired.connect(got.append)
    label = QLabel()
    e.fired.emit(0)
    label.setText("warm")
    true0, none0 = sys.getrefcount(True), sys.getrefcount(None)
    for i in range(200):
        e.fired.emit(i)
        label.setText("x")
    true1, none1 = sys.getrefcount(True), sys.getrefcount(None)
    assert len(got) == 201
    # a few references may come and go with other objects; the bug took one per call (200; no more, or True would run out and abort the process)
    assert true1 > true0 - 50 and none1 > none0 - 50, (true0, true1, none0, none1)


def test_doctor_reports_the_binding_and_passes_it():
    import PySide6

    from wavern.app import doctor

    assert doctor._qt() == doctor.Check("qt", True, f"PySide6 {PySide6.__version__}")
