"""What the Python benchmarks share: their argument types and the metadata every result
JSON carries (command, commit, date)."""

import argparse
import datetime
import os
import shlex
import subprocess
import time
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))


def offload_compute_arg(text):
    """--offload-compute: "auto", "host", "gpu" or a share in [0, 1] of the
    host-resident elements computed on the GPU (tandem.torch's offload_compute)."""
    if text in ("auto", "host", "gpu"):
        return text
    try:
        share = float(text)
    except ValueError:
        share = None
    if share is None or not 0.0 <= share <= 1.0:
        raise argparse.ArgumentTypeError(
            'expected "auto", "host", "gpu" or a share in [0, 1], got %r' % (text,))
    return share


def formats_arg(text):
    """--formats entry: master/momentum/variance, e.g. bf16+ecc8/q8/q8."""
    parts = text.split("/")
    if len(parts) != 3 or not all(parts):
        raise argparse.ArgumentTypeError(
            "expected master/momentum/variance (bf16+ecc8/q8/q8), got %r" % (text,))
    return text


def git_commit():
    """TANDEM_COMMIT when set (a copied tree whose git metadata is not its own), else the
    checkout's short commit, or "unknown" (no git, not a checkout)."""
    if os.environ.get("TANDEM_COMMIT"):
        return os.environ["TANDEM_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=False, cwd=HERE)
    except OSError:
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


def command_line(script, argv):
    """The command that reproduces a run: python3 bench/<script> <argv>."""
    return " ".join(["python3", "bench/" + script] + [shlex.quote(a) for a in argv])


class HookTimer:
    """The host time a tandem.torch optimizer's gradient hooks take (the Python side and
    the engine's hand-over under it), summed since the last ``take()``: they run on the
    thread that launches backward's kernels, so this is what they take from backward.
    Wraps the two methods the hooks call, looked up on the optimizer at each call
    (TandemOptimizer._bound in tandem/torch/_optimizer.py). The wrappers hold
    the optimizer weakly: a bound method would make a cycle (optimizer -> wrapper ->
    optimizer) that keeps a dropped optimizer, its pinned memory and device memory alive
    until a garbage collection frees them, at some later point of the run (cudaFreeHost
    of gigabytes stalls the device for hundreds of milliseconds)."""

    def __init__(self, opt):
        self._seconds = 0.0
        ref = weakref.ref(opt)

        def timed(fn):
            def call(k):
                t0 = time.perf_counter()
                try:
                    return fn(ref(), k)
                finally:
                    self._seconds += time.perf_counter() - t0
            return call

        for name in ("_on_grad_arriving", "_on_grad_accumulated"):
            setattr(opt, name, timed(getattr(type(opt), name)))

    def take(self):
        """Milliseconds since the last take()."""
        ms, self._seconds = self._seconds * 1e3, 0.0
        return ms
