"""ticklock: a job scheduler with per-second precision and one run per fire across replicas."""

__version__ = "0.1.0"
