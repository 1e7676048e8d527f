"""examples/drop_in_check.py, the traps and findings table, passes in host mode (CI) and,
on a machine with a GPU, in GPU mode."""
import os
import subprocess
import sys

import pytest
import torch

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "drop_in_check.py")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_row_passes(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    r = subprocess.run([sys.executable, SCRIPT, "--device", device], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert " 0 failed" in r.stdout
