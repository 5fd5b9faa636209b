"""The tool's version, a leaf every layer may import (the package root names the whole API and sits above all)."""

__version__ = "0.1.0"
