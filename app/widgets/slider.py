"""A labelled slider: a horizontal :class:`QSlider` over [lo, hi] in steps, its value shown beside it
and named for screen readers (:class:`Slider`); :func:`buddy_sliders` lets a form's Alt + letter
reach it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFormLayout, QHBoxLayout, QLabel, QSlider, QWidget

__all__ = ["Slider", "buddy_sliders"]


def buddy_sliders(form: QFormLayout) -> None:
    """A label's Alt + letter focuses its buddy only where the buddy takes focus itself: a
    :class:`Slider` row passes focus on to its slider but takes none, so its label names the slider."""
    for i in range(form.rowCount()):
        field = form.itemAt(i, QFormLayout.ItemRole.FieldRole)
        label = form.itemAt(i, QFormLayout.ItemRole.LabelRole)
        if field is not None and label is not None and isinstance(field.widget(), Slider):
            label.widget().setBuddy(field.widget().slider)


class Slider(QWidget):
    """A horizontal slider over [lo, hi] in ``step``s with its value shown beside it."""

    def __init__(self, lo: float, hi: float, step: float, value: float, fmt: str):
        super().__init__()
        self.step, self.fmt = step, fmt
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(round(lo / step), round(hi / step))
        self.label = QLabel()
        self.label.setMinimumWidth(48)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.slider)
        row.addWidget(self.label)
        self.setFocusProxy(self.slider)  # a form label's buddy, and focus given to the row, reach the slider
        self.name = ""
        self.slider.valueChanged.connect(lambda _: self._show())
        self.set_value(value)
        self._show()

    def _show(self) -> None:
        text = self.fmt.format(self.value())
        self.label.setText(text)
        # a screen reader reads QSlider's value as its step count (speed 1.00x was "20"): the name says it
        self.slider.setAccessibleName(f"{self.name} {text}".strip())
        self.slider.setAccessibleDescription(text)

    def set_name(self, name: str) -> None:
        """What a screen reader calls it: the name and the value as shown ("speed 1.00×")."""
        self.name = name
        self.setAccessibleName(name)
        self._show()

    def value(self) -> float:
        return self.slider.value() * self.step

    def set_value(self, x: float) -> None:
        self.slider.setValue(round(float(x) / self.step))


