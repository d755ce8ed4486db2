"""wavern.vocoder."""
