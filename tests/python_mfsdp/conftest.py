"""pytest configuration of tandem.megatron_fsdp's tests (ctest
`python_megatron_fsdp_core` and `python_megatron_fsdp_standalone`): Megatron-FSDP on CPU
processes with gloo, each case started under torchrun from tests/megatron/
(mfsdp_gpt.py: a Megatron-Core GPT; mfsdp_standalone.py: the standalone megatron-fsdp
package), tandem in host mode.

They need what tests/python_dist needs (a current torch), and, per test file,
megatron-core or megatron-fsdp (scripts/make-torch-venv.sh installs both, pinned). When
one is missing the session exits with code 77 (a skip for ctest) and one line saying why.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "..", "megatron")

_spec = importlib.util.spec_from_file_location(
    "python_dist_conftest", os.path.join(HERE, "..", "python_dist", "conftest.py"))
_python_dist = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_python_dist)


# Each test file's package (the session's skip line names it).
REQUIRES = {"test_megatron_core.py": ("megatron.core", "tandem.megatron_fsdp's Megatron-Core "
                                      "tests"),
            "test_standalone.py": ("megatron_fsdp", "tandem.megatron_fsdp's standalone "
                                   "megatron-fsdp tests")}


def _importable(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def pytest_sessionstart(session):
    if _python_dist._MISSING is not None:
        pytest.exit("tests/python_mfsdp skipped: %s: %s (scripts/make-torch-venv.sh makes "
                    "the venv they need)" % (sys.executable, _python_dist._MISSING),
                    returncode=77)
    # At session start, not at collection: pytest.exit while collecting exits with 2.
    names = {os.path.basename(str(a).split("::")[0]) for a in session.config.args}
    wanted = [v for k, v in sorted(REQUIRES.items()) if k in names or not names & set(REQUIRES)]
    for module, what in wanted:
        if not _importable(module):
            pytest.exit("%s skipped: %s is not importable with %s (scripts/make-torch-venv.sh "
                        "installs it)" % (what, module, sys.executable), returncode=77)


def launch(worker, nproc, out, *args, timeout=900):
    """Runs tests/megatron/<worker> under torchrun on `nproc` CPU processes; returns its
    result.json and the directory holding its NAME.pt files. Fails the test with the
    worker's output when it exits non-zero."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
           str(nproc), os.path.join(WORKERS, worker), "--device", "cpu", "--out", out]
    cmd += [str(a) for a in args]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    result_path = os.path.join(out, "result.json")
    if proc.returncode != 0 or not os.path.exists(result_path):
        raise AssertionError("%s failed (%d):\n%s" % (" ".join(cmd), proc.returncode,
                                                      (proc.stdout + proc.stderr)[-6000:]))
    with open(result_path) as f:
        return json.load(f)


def tensors(out, name):
    import torch
    return torch.load(os.path.join(out, name + ".pt"))


def bit_equal(a, b):
    """Whether two {name: tensor} dicts hold the same names and the same bits."""
    import torch
    if a.keys() != b.keys():
        return False
    return all(torch.equal(a[k].reshape(-1).view(torch.uint8), b[k].reshape(-1).view(torch.uint8))
               for k in a)


def rel_diff(a, b):
    return max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
