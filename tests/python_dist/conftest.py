"""pytest configuration for the tests that need a current PyTorch (ctest
`python_current_torch`): FSDP2, DTensor, distributed checkpoints, Hugging Face
transformers and accelerate.

They run with the Python of `scripts/make-torch-venv.sh` (CMake cache variable
TANDEM_TORCH_PYTHON; docs/building.md) and the built extension on PYTHONPATH
(<build>/python). When the interpreter has no torch >= 2.6 with
torch.distributed.fsdp.fully_shard (Debian's python3-torch is 1.13), the session exits
with code 77 before collecting anything, which ctest reports as one skipped test
(SKIP_RETURN_CODE), as tests/python/conftest.py does.
"""

import sys
import tempfile

import pytest

_MIN_TORCH = (2, 6)


def _missing():
    """Why this interpreter cannot run the suite, or None."""
    try:
        import torch
    except ImportError as e:  # depends on the machine
        return "torch is not importable (%s)" % e
    version = torch.__version__.split("+")[0]
    try:
        numbers = tuple(int(x) for x in version.split(".")[:2])
    except ValueError:  # a version string we cannot read: let the import decide
        numbers = _MIN_TORCH
    if numbers < _MIN_TORCH:
        return "torch %s is older than %d.%d" % ((torch.__version__,) + _MIN_TORCH)
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError as e:
        return "torch %s has no torch.distributed.fsdp.fully_shard (%s)" % (
            torch.__version__, e)
    return None


_MISSING = _missing()


def pytest_sessionstart(session):
    del session
    if _MISSING is not None:
        pytest.exit(
            "tests/python_dist skipped: %s: %s; they need torch >= %d.%d with FSDP2. Make "
            "the venv with scripts/make-torch-venv.sh (then configure again: scripts/test.sh "
            "does) or pass -DTANDEM_TORCH_PYTHON=<python with a current torch> to CMake"
            % ((sys.executable, _MISSING) + _MIN_TORCH), returncode=77)


@pytest.fixture(scope="module")
def one_rank_group():
    """A 1-rank gloo process group for the tests of one module that run in this process."""
    import torch.distributed as dist
    store = tempfile.NamedTemporaryFile(delete=False)
    dist.init_process_group("gloo", init_method="file://" + store.name, rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()
