"""Widgets of the desktop window: they paint what the worker prepared and never compute."""

from wavern.app.widgets.dashboard import LatencyDashboard
from wavern.app.widgets.editor import PreviewView, SpeechEditor
from wavern.app.widgets.palette import error_colour, is_dark, quiet_colour
from wavern.app.widgets.lexicon import LexiconDialog
from wavern.app.widgets.scope import ScopeHistory, SpectrogramView, WaveformView

__all__ = ["LatencyDashboard", "PreviewView", "SpeechEditor", "LexiconDialog", "ScopeHistory", "SpectrogramView",
           "WaveformView", "error_colour", "is_dark", "quiet_colour"]
