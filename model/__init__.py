"""Clover, the network (modeling.py, layers/, config.py, cache.py), with its decoder, loading, text
and training in subpackages of their own; weights/ holds the embedded model shipped in the package."""

from pathlib import Path

EMBEDDED_DIR = Path(__file__).resolve().parent / "weights"  # shipped inside the package
