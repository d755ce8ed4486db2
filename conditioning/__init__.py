"""wavern.conditioning."""
