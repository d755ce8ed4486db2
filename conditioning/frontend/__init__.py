"""wavern.conditioning.frontend."""
