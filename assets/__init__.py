"""wavern.assets."""
