"""wavern.training."""
