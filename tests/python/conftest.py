"""pytest configuration for the tandem.torch tests (run by ctest as `python_binding`).

The suite needs PyTorch (Debian: python3-torch) and the built extension on PYTHONPATH
(<build>/python). Without torch the session exits with code 77 before collecting
anything, which ctest reports as skipped (SKIP_RETURN_CODE).
"""

import pytest

try:
    import torch  # noqa: F401
    _NO_TORCH = None
except ImportError as e:  # depends on the machine
    _NO_TORCH = str(e)


def pytest_sessionstart(session):
    del session
    if _NO_TORCH is not None:
        pytest.exit("tandem python tests skipped: torch is not importable (%s); install "
                    "python3-torch or run them with a Python that has torch" % _NO_TORCH,
                    returncode=77)
