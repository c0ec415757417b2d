"""Finding the CUDA toolkit's binary tools, shared by scripts/sm120-report and tests/cpu/check_binary.py."""
import os
import shutil
import sys


def find_cuobjdump(explicit=None):
    """The first executable cuobjdump of: `explicit`, $CUOBJDUMP, PATH, /usr/local/cuda/bin, and the pip wheels
    (nvidia-cuda-cuobjdump: nvidia/cu13 or cu12 under a sys.path entry); None when there is none."""
    cands = [explicit, os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"]
    cands += [os.path.join(p, "nvidia", sub, "bin", "cuobjdump") for p in sys.path if p for sub in ("cu13", "cu12")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None
