"""What a newcomer reads while setting up: the install hints name the package that exists,
pip honours the same variables as the scripts, install-deps says one true thing about
CUDA, the demo labels its columns and the main job's summary says what each number is
against which yardstick."""

import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEMO = os.environ.get("TANDEM_DEMO", "")


def tracked_files():
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):  # a source tree without git
        out = [os.path.relpath(os.path.join(d, f), ROOT) for d, _, fs in os.walk(ROOT)
               for f in fs if "/build" not in d and "/." not in d]
    return [f for f in out if f.endswith((".py", ".md", ".cc", ".h", ".sh", ".toml", ".txt"))]


def test_every_install_hint_names_tandem_optim():
    # `tandem` on the package index is another project; this one is `tandem-optim`.
    wrong = re.compile(r"pip install\s+['\"]?tandem(\[|['\"\s]|$)")
    me = os.path.relpath(__file__, ROOT)
    bad = []
    for f in tracked_files():
        if f == me:
            continue
        try:
            text = open(os.path.join(ROOT, f), encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        bad += ["%s:%d: %s" % (f, text[:m.start()].count("\n") + 1, m.group(0))
                for m in wrong.finditer(text)]
        bad += ["%s: %s" % (f, "tandem[torch]") for _ in re.finditer(r"(?<![-\w])tandem\[torch\]", text)]
    assert not bad, "install hints naming the wrong package:\n" + "\n".join(bad)


def test_the_import_error_without_torch_names_tandem_optim():
    hint = open(os.path.join(ROOT, "python", "tandem", "torch", "__init__.py")).read()
    assert "tandem-optim" in hint and "pip install '.[torch]'" in hint


def test_pip_takes_tandem_cuda_and_the_architectures_from_the_environment():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        defines = tomllib.load(f)["tool"]["scikit-build"]["cmake"]["define"]
    assert defines["TANDEM_CUDA"] == {"env": "TANDEM_CUDA", "default": "AUTO"}
    # No default: unset, the build's own architecture list applies.
    assert defines["CMAKE_CUDA_ARCHITECTURES"] == {"env": "CMAKE_CUDA_ARCHITECTURES"}


def test_the_docs_spell_cmake_defines_as_debian_12s_pip_takes_them():
    # pip 23.0.1 (Debian 12) refuses -C; --config-settings works on every pip.
    for doc in ("docs/building.md", "docs/python.md", "README.md"):
        for line in open(os.path.join(ROOT, doc)):
            assert not ("pip install" in line and re.search(r"\s-C\s?\S", line)), (doc, line)
    building = open(os.path.join(ROOT, "docs", "building.md")).read()
    assert "--config-settings=cmake.define.TANDEM_CUDA=OFF" in building
    assert "TANDEM_CUDA=OFF pip install" in building and "pip install -v" in building


def fake_bin(tmp_path, nvcc):
    """A PATH whose dpkg says every package is installed, with or without an nvcc."""
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("dpkg",) + (("nvcc",) if nvcc else ()):
        (d / name).write_text("#!/bin/sh\nexit 0\n")
        (d / name).chmod(0o755)
    return str(d)


@pytest.mark.parametrize("mode", ["OFF", "AUTO", "ON", ""])
def test_install_deps_says_one_true_thing_about_cuda(tmp_path, mode):
    # TANDEM_CUDA=OFF scripts/setup.sh used to say "GPU support ON (CUDA compiler found)"
    # before CMake said OFF: whether GPU support is built is CMake's line alone.
    env = dict(os.environ, PATH=fake_bin(tmp_path, nvcc=True) + ":/usr/bin:/bin")
    env.pop("CUDACXX", None)
    if mode:
        env["TANDEM_CUDA"] = mode
    else:
        env.pop("TANDEM_CUDA", None)
    out = subprocess.run(["bash", os.path.join(ROOT, "scripts", "install-deps.sh")], env=env,
                         capture_output=True, text=True, check=True).stdout
    lines = [l for l in out.splitlines() if "CUDA" in l or "GPU" in l]
    assert len(lines) == 1, out
    assert "GPU support ON" not in out
    if mode == "OFF":
        assert "CUDA not used (TANDEM_CUDA=OFF)" in lines[0]
    else:
        assert "CUDA compiler" in lines[0] and "found" in lines[0]


@pytest.mark.skipif(not DEMO, reason="TANDEM_DEMO is set by ctest")
def test_the_demo_labels_its_columns():
    out = subprocess.run([DEMO], capture_output=True, text=True, check=True).stdout
    header = next(l for l in out.splitlines() if l.startswith("algo"))
    assert header.split() == ["algo", "formats", "state", "B/param", "least-squares", "loss",
                              "logistic", "loss"]
    assert "training loss" in out and "lower is better" in out


# ---- the main job's summary ----------------------------------------------------------------

def load_summary():
    spec = importlib.util.spec_from_file_location(
        "main_job_summary", os.path.join(ROOT, "scripts", "main_job_summary.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def figure(name, median, spread=0.02, limit=None, limit_gbps=None, bytes_per_param=None):
    f = {"name": name, "unit": "GB/s", "median": median, "min": median, "max": median,
         "spread": spread}
    if limit:
        f.update(limit=limit, limit_gbps=limit_gbps, bytes_per_param=bytes_per_param,
                 unit="Gparam/s", fraction_of_limit=median * bytes_per_param / limit_gbps)
    return f


def write_outputs(d, copy=10.0, gpu=""):
    """A host-only run where the q8 kernel moves its bytes 2.38x as fast as the copy."""
    cal = {"machine": {"cpu": "Test CPU", "host_threads": 2, "isa": "avx2", "gpu": gpu},
           "date": "2026-11-26T00:00:00Z", "version": "0.2.0", "repeats": 3, "max_spread": 0.1,
           "too_wide": [],
           "figures": [figure("host copy", copy),
                       figure("host adamw/f32/f32/f32/bf16", 0.3, limit="host copy",
                              limit_gbps=copy, bytes_per_param=28),
                       figure("host adamw/bf16+ecc8/q8/q8/bf16", 2.38 * copy / 12.25,
                              limit="host copy", limit_gbps=copy, bytes_per_param=12.25)]}
    (d / "calibrate.json").write_text(json.dumps(cal))
    verdict = ("FITS: recommended offload fraction 0.7485: 36.00 GiB of 36.00 GiB usable GPU, "
               "22.23 GiB of 512.00 GiB host per node; step %s ms (bottleneck: %s). Runnable.\n")
    (d / "plan-reference.txt").write_text("Model x\n" + verdict % ("352.38", "host"))
    (d / "plan-measured.txt").write_text("Model x\n" + verdict % ("404.81", "d2h"))


def test_the_summary_never_puts_a_figure_above_100_percent_of_a_maximum(tmp_path):
    write_outputs(tmp_path)
    text = "\n".join(load_summary().summary(str(tmp_path)))
    # The old summary called the copy "the most this host's DRAM can move" and then put a
    # kernel at "238% of this host's DRAM bandwidth".
    assert "the most" not in text.replace("not the most the memory can move", "")
    for m in re.finditer(r"([0-9.]+)%", text):
        assert float(m.group(1)) <= 100, text
        before = text[max(0, m.start() - 12):m.start()]
        assert "spread" in before, "a percentage that is not a spread: ...%s" % \
            text[max(0, m.start() - 60):m.end() + 20]
    # What each number is and against which yardstick.
    assert "host copy: 10.0 GB/s" in text and "the yardstick, not a ceiling" in text
    assert "AdamW step, bf16+ecc8 master, q8/q8 moments: 1.94 Gparam/s" in text
    assert "that is 23.8 GB/s = 2.38x the copy" in text
    assert "above 1.00x a kernel moved its bytes faster than the plain copy" in text
    assert "0.84x the copy" in text  # 0.3 Gparam/s x 28 B = 8.4 GB/s


def test_the_summary_says_why_the_two_plans_agree_or_differ(tmp_path):
    write_outputs(tmp_path)
    lines = load_summary().summary(str(tmp_path))
    text = "\n".join(lines)
    assert "with the built-in H200 reference figures:  fits at offload fraction 0.7485; " \
           "predicted optimizer step 352.38 ms (bottleneck: host)" in text
    assert "keeps the\n  H200 reference figures for the GPU and PCIe" in text
    assert "change the predicted step from 352.38 to 404.81 ms" in text
    (tmp_path / "plan-measured.txt").write_text((tmp_path / "plan-reference.txt").read_text())
    text = "\n".join(load_summary().summary(str(tmp_path)))
    assert "Here both plans agree" in text
    assert "Hybrid step: not measured (it needs a CUDA build and a GPU)." in text


def test_the_summary_of_a_gpu_run_labels_the_hybrid_columns(tmp_path):
    write_outputs(tmp_path, gpu="NVIDIA H200")
    rows = [{"model": "llama3-1b", "formats": "bf16+ecc8/q8/q8", "fraction": f, "step_ms": ms,
             "overlap_efficiency": 0.9} for f, ms in ((0, 10.0), (0.5, 12.5))]
    (tmp_path / "hybrid.json").write_text(json.dumps({"results": rows}))
    text = "\n".join(load_summary().summary(str(tmp_path)))
    assert "keeps the" not in text  # the GPU was measured
    assert "fraction 0.5: 12.5 ms = 1.25x the all-GPU step of this run; overlap 0.90" in text
    assert "overlap = the slowest stage's busy time / the step" in text


# ---- scripts/setup.sh builds for the machine it runs on ------------------------------------

def gpu_build_args(tmp_path, smi=None, **env_vars):
    """gpu_build_args (scripts/env.sh) with a PATH of the tools it uses and, when given,
    an nvidia-smi that runs `smi` (shell); returns (arguments, what it said)."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in ("tr", "grep", "sort", "paste", "cat"):
        os.symlink(subprocess.run(["bash", "-c", "command -v " + tool], capture_output=True,
                                  text=True, check=True).stdout.strip(), d / tool)
    if smi is not None:
        (d / "nvidia-smi").write_text("#!/bin/bash\n" + smi + "\n")
        (d / "nvidia-smi").chmod(0o755)
    env = {"PATH": str(d), "HOME": str(tmp_path)}
    env.update(env_vars)
    p = subprocess.run(["/bin/bash", "-c", 'source scripts/env.sh; gpu_build_args'], cwd=ROOT,
                       env=env, capture_output=True, text=True, check=True)
    return p.stdout.split(), p.stderr


H200 = 'case "$1" in --query-gpu=compute_cap) printf "9.0\\n9.0\\n";; -L) echo "GPU 0: H200";; esac'


@pytest.mark.parametrize("smi, env, args, said", [
    # No GPU: host mode only, no CUDA code, saying how to ask for it.
    (None, {}, ["-DTANDEM_CUDA=OFF"], "no GPU found (nvidia-smi): host mode only"),
    ("exit 9", {}, ["-DTANDEM_CUDA=OFF"], "TANDEM_CUDA=ON scripts/setup.sh builds it too"),
    # A GPU: its own architecture only (two H200s: one architecture).
    (H200, {}, ["-DCMAKE_CUDA_ARCHITECTURES=90"], "built for architecture 90 only"),
    ('case "$1" in --query-gpu=compute_cap) printf "9.0\\n8.0\\n";; esac', {},
     ["-DCMAKE_CUDA_ARCHITECTURES=80;90"], "architecture 80;90 only"),
    # A driver without compute_cap: CMake asks the GPUs.
    ('case "$1" in -L) echo "GPU 0: A100 (UUID: x)";; *) exit 6;; esac', {},
     ["-DCMAKE_CUDA_ARCHITECTURES=native"], "architecture native only"),
    # Asked for: TANDEM_CUDA=ON without a GPU builds the default list (or CUDAARCHS);
    # OFF never builds CUDA; CUDAARCHS chooses where set.
    (None, {"TANDEM_CUDA": "ON"}, [], "TANDEM_CUDA=ON: the CUDA code is built for the default"),
    (H200, {"TANDEM_CUDA": "off"}, ["-DTANDEM_CUDA=OFF"], "TANDEM_CUDA=OFF: host mode only"),
    (H200, {"CUDAARCHS": "89"}, [], "CUDAARCHS=89 chooses"),
])
def test_setup_builds_cuda_only_for_the_gpu_present(tmp_path, smi, env, args, said):
    got, text = gpu_build_args(tmp_path, smi, **env)
    assert got == args, text
    assert said in text, text


def test_setup_uses_the_machines_choice_and_the_tests_keep_sm_90():
    setup = open(os.path.join(ROOT, "scripts", "setup.sh")).read()
    assert "gpu_build_args" in setup and '"${cuda_args[@]}"' in setup
    test = open(os.path.join(ROOT, "scripts", "test.sh")).read()
    assert "TANDEM_TEST_CUDA_ARCHITECTURES:-90" in test
    assert "TANDEM_CUDA=ON scripts/test.sh" in open(os.path.join(ROOT, ".ci", "run")).read()
    readme = open(os.path.join(ROOT, "README.md")).read()
    assert "TANDEM_CUDA=ON" in readme and "minutes" in readme
