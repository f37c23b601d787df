"""The plug-in's suite imports its own test package (``tests_parts``) from this folder; only this suite
puts it on the path, so the engine's suite never sees the plug-in (``scripts/engine-alone.py``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
