"""scripts/gpu_report.py, the one command for everything that needs a GPU, on a machine without one."""

import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_gpu_report_without_cuda_stops_at_once_saying_why(tmp_path):
    """No CUDA device visible: status 1 within seconds (it starts no step), one error line naming the
    missing GPU, nothing written."""
    start = time.time()
    done = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "gpu_report.py"), "--out-dir", tmp_path / "out",
                           "--work-dir", tmp_path / "work"], capture_output=True, text=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("gpu_report.py: error: no CUDA GPU: torch ")
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert time.time() - start < 30
    assert not (tmp_path / "out").exists() and not (tmp_path / "work").exists()
