"""xrisk: X-risk optimization from one backend-neutral core."""
__version__ = "0.1.0"
