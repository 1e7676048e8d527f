"""The command-line tools check every argument before any work, refuse an output that is an
input, and write whole files: tandem-bench and tandem-plan run for real (ctest
tools_python passes their paths; tandem-ckpt's are in tests/checkpoint/tool_test.cc)."""

import json
import os
import resource
import shutil
import subprocess
import time

import pytest

BENCH = os.environ.get("TANDEM_BENCH", "")
PLAN = os.environ.get("TANDEM_PLAN", "")
HAS_CUDA = os.environ.get("TANDEM_HAS_CUDA", "0") == "1"

pytestmark = pytest.mark.skipif(not (BENCH and PLAN),
                                reason="TANDEM_BENCH and TANDEM_PLAN are set by ctest")


def run(*args, timeout=120, cwd=None):
    t0 = time.monotonic()
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                       cwd=cwd)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


# ---- tandem-bench ------------------------------------------------------------------------

def test_calibrate_with_too_many_threads_is_an_error_not_a_crash():
    # It used to build an arena of 100000 threads and die with SIGSEGV (status 139), and
    # for 17 to 65536 threads to fail only after the host copy had been measured.
    for threads in ("100000", "65537", "17000", "-1"):
        rc, out, _ = run(BENCH, "calibrate", "--host-only", "--threads", threads, "-o",
                         "/dev/null/x.json")
        assert rc == 2, out
        assert "--threads must be an integer in [0, " in out and "(0: all cores), got" in out, out
        assert "host copy" not in out, out  # nothing was measured


def test_calibrate_checks_every_option_before_measuring(tmp_path):
    cases = [
        (["--max-spread", "-1"], "--max-spread must be a finite number >= 0"),
        (["--host-elements", "0"], "--host-elements must be an integer >= 1"),
        (["--gpu-elements", "0"], "--gpu-elements must be an integer >= 1"),
        (["--host-elements", str(1 << 50)], "needs about"),
        (["-o", str(tmp_path / "missing" / "p.json")], "does not exist"),
        (["-o", str(tmp_path)], "is a directory"),
        (["-o", str(tmp_path / "p.json"), "--json", str(tmp_path / "p.json")],
         "is the same file as -o/--out"),
        (["--reps", "0"], "--reps"),
        (["--ranks", "0"], "--ranks must be an integer in [1, "),
        (["--ranks", "-3"], "--ranks must be an integer in [1, "),
        (["--ranks", "100000"], "(one CPU of this process per rank at least), got 100000"),
        (["--ranks", "two"], "--ranks"),
        (["--threads", "two"], "--threads"),
    ]
    for extra, needle in cases:
        args = ["calibrate", "--host-only"]
        if "--host-elements" not in extra:
            args += ["--host-elements", "4096"]
        if "-o" not in extra:
            args += ["-o", str(tmp_path / "p.json")]
        rc, out, seconds = run(BENCH, *args, *extra)
        assert rc == 2, (extra, out)
        assert needle in out, (extra, out)
        assert "host copy" not in out and seconds < 30, (extra, out)
    assert not os.listdir(tmp_path)  # nothing written


def test_calibrate_writes_whole_files(tmp_path):
    profile, report = tmp_path / "p.json", tmp_path / "r.json"
    profile.write_text("an old profile")
    rc, out, _ = run(BENCH, "calibrate", "--host-only", "--host-elements", "65536", "--reps",
                     "1", "--repeats", "1", "--threads", "1", "-o", profile, "--json", report,
                     timeout=300)
    assert rc == 0, out
    assert profile.read_text().lstrip().startswith("{") and report.read_text().startswith("{")
    assert sorted(os.listdir(tmp_path)) == ["p.json", "r.json"]  # no temporaries left


def installed_alone(tmp_path):
    """A copy of tandem-bench in a bin/ of its own, as pip install . leaves it."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    shutil.copy2(BENCH, bin_dir / "tandem-bench")
    return bin_dir / "tandem-bench"


def test_kernels_without_the_benchmark_programs_says_so_and_fails(tmp_path):
    # pip install . builds the tools without bench/: kernels used to print "skipped" and
    # exit 0, having measured nothing.
    bench = installed_alone(tmp_path)
    rc, out, _ = run(bench, "kernels", "--quick")
    assert rc == 2, out
    assert "tandem-bench-host" in out and "pip install ." in out and "build" in out, out


@pytest.mark.skipif(not HAS_CUDA, reason="hybrid needs a CUDA build")
def test_hybrid_without_its_program_says_so_and_fails(tmp_path):
    rc, out, _ = run(installed_alone(tmp_path), "hybrid", "--models", "llama3-1b")
    assert rc == 2 and "tandem-bench-hybrid" in out, out


def test_kernels_checks_its_output_directory_first(tmp_path):
    rc, out, seconds = run(BENCH, "kernels", "--quick", "--out-dir", tmp_path / "missing")
    assert rc == 2, out
    assert "--out-dir" in out and "does not exist" in out, out
    assert "==" not in out and seconds < 30, out  # no benchmark program was started


@pytest.mark.skipif(not HAS_CUDA, reason="pcie is a GPU command (status 2 without CUDA)")
def test_pcie_checks_its_json_first(tmp_path):
    rc, out, _ = run(BENCH, "pcie", "--json", tmp_path / "missing" / "p.json")
    assert rc == 2 and "does not exist" in out, out


# ---- tandem-plan -------------------------------------------------------------------------

BASE = ["--model", "llama3-1b", "--gpu-mem", "80GiB", "--host-mem", "64GiB"]


def test_plan_checks_the_numbers_with_the_bindings_words():
    for extra, needle in (
            (["--chunk-elements", "0"], "--chunk-elements must be a positive multiple of 32, got 0"),
            (["--chunk-elements", "100"], "--chunk-elements must be a positive multiple of 32"),
            (["--slots", "1"], "--slots must be an integer >= 2, got 1"),
            (["--stream-slots", "1"], "--stream-slots must be an integer >= 2, got 1"),
            (["--seq", "128", "--batch", "0"], "--batch must be an integer >= 1, got 0"),
            (["--algo", "sgd", "--momentum", "1.5"], "--momentum must be in [0, 1]")):
        rc, out, _ = run(PLAN, *BASE, *extra)
        assert rc == 2 and needle in out, (extra, out)


def test_plan_checks_the_iteration_options():
    for extra, needle in (
            (["--fraction", "1.5"], "--fraction must be in [0, 1], got 1.5"),
            (["--fraction", "nan"], "--fraction must be in [0, 1], got nan"),
            (["--seq", "128", "--train-tflops", "0"], "--train-tflops must be a finite number > 0"),
            (["--grad-release=sometimes"], "--grad-release 'sometimes': expected on, off or auto"),
            (["--largest"], "--largest searches the model: give no --model")):
        rc, out, _ = run(PLAN, *BASE, *extra)
        assert rc == 2 and needle in out, (extra, out)
    rc, out, _ = run(PLAN, "--largest", "--gpu-mem", "80GiB", "--host-mem", "1TiB", "--svg",
                     "/tmp/never-written-largest.svg")
    assert rc == 2 and "--svg draws one plan; not with --largest" in out, out
    assert not os.path.exists("/tmp/never-written-largest.svg")


def test_plan_refuses_the_sentinels_it_uses():
    # -1 stood for "not given": given, it was taken as that and the built-in figure used.
    for extra, needle in ((["--seq", "128", "--train-tflops", "-1"],
                           "--train-tflops must be a finite number > 0, got -1"),
                          (["--fraction", "-1"], "--fraction must be in [0, 1], got -1")):
        rc, out, _ = run(PLAN, *BASE, *extra)
        assert rc == 2 and needle in out, (extra, out)


# Note [Bounded inputs] (planner/bounds.cc): every count and size read is bounded before
# anything is allocated by it; refused with exit status 2, naming the field and the
# limit, in well under a second, never an abort.
CPU_LIMIT_S = 5.0 if os.environ.get("TANDEM_SANITIZE") == "ON" else 1.0


def _config(path, **fields):
    doc = dict(architectures=["LlamaForCausalLM"], hidden_size=4096, intermediate_size=14336,
               num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
               vocab_size=128256)
    doc.update(fields)
    path.write_text(json.dumps(doc))
    return path


def test_plan_inputs_are_bounded(tmp_path):
    big = ["--gpu-mem", "80GiB", "--host-mem", "512GiB"]
    tensors = tmp_path / "tensors.json"
    tensors.write_text(json.dumps([{"name": "t%d" % i, "shape": [4], "dtype": "bf16"}
                                   for i in range((1 << 17) + 1)]))
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps([{"name": "a", "shape": [1 << 40, 1 << 3], "dtype": "bf16"}]))
    for args, needle in (
            (["--config", _config(tmp_path / "deep.json", num_hidden_layers=100000)],
             "key 'num_hidden_layers' is 100000, more than the planner's limit of 16384"),
            (["--config", _config(tmp_path / "wide.json", hidden_size=1 << 40)],
             "key 'hidden_size' is 1099511627776, more than the planner's limit of 16777216"),
            (["--config", _config(tmp_path / "big.json", hidden_size=1 << 23,
                                     intermediate_size=1 << 23)],
             "more than 4398046511104 parameters (2^42), the planner's limit"),
            (["--config", "/dev/zero"],
             "/dev/zero: the model config is larger than 16777216 bytes"),
            (["--params", "1e15"], "--params: 1000000000000000 parameters is more than the "
                                   "planner's limit of 4398046511104"),
            (["--params-json", tensors], "more than 131072 tensors, the planner's limit"),
            (["--params-json", huge], "more than 4398046511104 parameters"),
            (["--model", "llama3-8b", "--seq", "100000000000"],
             "--seq 100000000000 is more than the planner's limit of 16777216 tokens"),
            (["--model", "llama3-8b", "--seq", "4096", "--batch", "100000"],
             "--batch 100000 is more than the planner's limit of 65536")):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        rc, out, _ = run(PLAN, *args, *big)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert rc == 2 and needle in out, (args, out)
        # CPU time (the wall time of a loaded CI machine says little): well under a second
        # (under AddressSanitizer, which runs the same code several times slower, 5).
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        assert cpu < CPU_LIMIT_S, (args, cpu)


def test_plan_refuses_headroom_past_the_gpu_and_notes_a_tiny_params():
    rc, out, _ = run(PLAN, "--model", "llama3-8b", "--gpu-mem", "80GiB", "--host-mem",
                     "512GiB", "--headroom", "90GiB")
    assert rc == 2 and "--headroom 90GiB is not less than --gpu-mem 80GiB" in out, out
    rc, out, _ = run(PLAN, "--params", "8", "--gpu-mem", "80GiB", "--host-mem", "512GiB")
    assert rc == 0 and "note: --params 8 plans a model of 8 parameters; --params takes the " \
                       "count itself (8e9 or 8B for 8 billion)" in out, out


def test_the_exposed_step_is_never_longer_than_the_step():
    # With release and no speculation the work handed during backward is the step's own:
    # what is left after backward cannot take longer than the step after it.
    rc, out, _ = run(PLAN, "--model", "llama3-8b", "--gpu-mem", "80GiB", "--host-mem",
                     "512GiB", "--seq", "4096", "--grad-release", "--fraction", "1", "--json")
    assert rc == 0, out
    plan = json.loads(out)
    point = plan["recommended"]
    assert point["iteration"]["exposed_ms"] <= point["step_ms"]["step"] + 1e-9, point


def test_plan_counts_are_whole_numbers():
    rc, out, _ = run(PLAN, "--params", "8.03e9", "--gpu-mem", "80GiB", "--host-mem", "1TiB")
    assert rc in (0, 1) and "8030000000 parameters" in out, out
    rc, out, _ = run(PLAN, "--params", "8.5", "--gpu-mem", "80GiB", "--host-mem", "1TiB")
    assert rc == 2 and "is not a whole number of parameters" in out, out


def test_plan_refuses_a_chart_over_its_input(tmp_path):
    config = tmp_path / "config.json"
    shutil.copy(os.path.join(os.path.dirname(__file__), "..", "planner", "configs", "qwen3-8b",
                             "config.json"), config)
    before = config.read_bytes()
    link = tmp_path / "link.svg"
    link.symlink_to(config)
    for svg in (config, link):
        rc, out, _ = run(PLAN, "--config", config, "--gpu-mem", "80GiB", "--host-mem", "1TiB",
                         "--svg", svg)
        assert rc == 2 and "is the same file as --config" in out, out
        assert config.read_bytes() == before
    # The model directory's config.json too.
    rc, out, _ = run(PLAN, "--config", tmp_path, "--gpu-mem", "80GiB", "--host-mem", "1TiB",
                     "--svg", config)
    assert rc == 2 and "is the same file as --config" in out, out
    assert config.read_bytes() == before


def test_plan_checks_the_chart_path_before_planning_and_writes_it_whole(tmp_path):
    rc, out, _ = run(PLAN, *BASE, "--svg", tmp_path / "no" / "plan.svg")
    assert rc == 2 and "--svg" in out and "does not exist" in out, out
    assert "Model" not in out  # no plan was printed
    rc, out, _ = run(PLAN, *BASE, "--svg", tmp_path / "plan.svg")
    assert rc == 0, out
    assert (tmp_path / "plan.svg").read_text().startswith("<svg")
    assert os.listdir(tmp_path) == ["plan.svg"]
