import sys
from pathlib import Path

# Tests import the checkout they live in, whatever else is installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
