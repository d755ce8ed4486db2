"""wavern.training.corpus."""
