"""wavern.app."""
