import os
import sys

# tests import the package from this checkout unless it is installed
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
