"""The threaded machinery."""
