"""wavern.engine."""
