"""The benchmark scripts' options and tables (bench/megatron_baseline.py and
bench/planner_accuracy.py), without a GPU: they run on the GPU machine, and what they
print and record must say what was run, when, at which commit, against which target."""

import importlib.util
import json
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")


def load(name):
    sys.path.insert(0, BENCH)
    try:
        spec = importlib.util.spec_from_file_location(name, os.path.join(BENCH, name + ".py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(BENCH)
    return module


@pytest.fixture(scope="module")
def baseline():
    return load("megatron_baseline")


@pytest.fixture(scope="module")
def accuracy():
    return load("planner_accuracy")


def test_baseline_offload_compute_reaches_parse(baseline):
    assert baseline.parse_args([]).offload_compute == "auto"
    for text, value in (("host", "host"), ("gpu", "gpu"), ("0.25", 0.25), ("1", 1.0)):
        assert baseline.parse_args(["--offload-compute", text]).offload_compute == value
    for bad in ("cpu", "1.5", "-0.1", ""):
        with pytest.raises(SystemExit):
            baseline.parse_args(["--offload-compute", bad])
    with pytest.raises(SystemExit):
        baseline.parse_args(["--formats", "f32/f32"])
    with pytest.raises(SystemExit):
        baseline.parse_args(["--fractions", "2"])


def baseline_result(baseline, rows):
    result = {"command": "python3 bench/megatron_baseline.py", "commit": "abc1234",
              "date": "2026-11-24T00:00Z", "machine_kind": "test", "offload_compute": "auto",
              "results": rows}
    result["checks"] = baseline.checks(rows)
    return result


def test_baseline_table_states_the_target_per_model(baseline):
    rows = [dict(model="llama3-8b", fraction=0.5, formats="bf16+ecc8/q8/q8", tandem_ms=300.0,
                 baseline_ms=1800.0, speedup=6.0, compute_share=1.0),
            dict(model="llama3-8b", fraction=0.5, formats="f32/f32/f32", tandem_ms=900.0,
                 baseline_ms=1800.0, speedup=2.0, compute_share=0.5),
            dict(model="llama3-1b", fraction=0.5, formats="bf16+ecc8/q8/q8", tandem_ms=100.0,
                 baseline_ms=200.0, speedup=2.0, compute_share=None),
            dict(model="llama3-1b", fraction=1.0, formats="bf16+ecc8/q8/q8", tandem_ms=10.0,
                 baseline_ms=200.0, speedup=20.0, compute_share=None)]
    result = baseline_result(baseline, rows)
    # Only q8 state at fraction 0.5 is held to the target.
    assert [(c["check"].split()[0], c["met"]) for c in result["checks"]] == [
        ("llama3-8b", True), ("llama3-1b", False)]
    lines = baseline.table(result)
    assert "abc1234" in lines[0] and "2026-11-24T00:00Z" in lines[0]
    text = "\n".join(lines)
    assert ">= 5x faster than the baseline measured in the same run" in text
    assert lines[-2].split()[0] == "llama3-8b" and lines[-2].endswith("met)")
    assert lines[-1].split()[0] == "llama3-1b" and lines[-1].endswith("missed)")
    assert "6.00x" in text and "-" in lines[5].split()  # an unknown share prints as -


def test_baseline_table_without_a_target_point_says_so(baseline):
    rows = [dict(model="llama3-1b", fraction=0.25, formats="bf16+ecc8/q8/q8", tandem_ms=1.0,
                 baseline_ms=2.0, speedup=2.0, compute_share=0.0)]
    assert "no point at fraction 0.5" in baseline.table(baseline_result(baseline, rows))[-1]


def test_baseline_dry_run_touches_no_gpu(baseline, capsys):
    assert baseline.main(["--dry-run", "--models", "llama3-8b", "--offload-compute", "gpu"]) == 0
    out = capsys.readouterr().out
    assert "--dry-run" not in out.splitlines()[0]
    assert "offload_compute gpu" in out and "llama3-8b f=0.5" in out


def test_baseline_git_commit_is_short_or_unknown(baseline):
    commit = baseline.git_commit()
    assert commit == "unknown" or 4 <= len(commit) <= 40


def test_accuracy_defaults_are_the_issue_target(accuracy):
    a = accuracy.parse_args([])
    assert a.models == ["llama3-1b", "llama3-8b"]
    assert a.fractions == [0.25, 0.5, 1.0]
    assert a.offload_compute == "auto" and a.optimizer_rates == "profile"
    assert accuracy.parse_args(["--offload-compute", "0.5"]).offload_compute == 0.5
    for bad in (["--fractions", "0.3"], ["--offload-compute", "both"], ["--models", "gpt2"]):
        with pytest.raises(SystemExit):
            accuracy.parse_args(bad)


def point(fraction, step, share):
    breakdown = {"total": 100, "weights": 10, "gradients": 20, "activations": 30}
    return {"fraction": fraction, "step_ms": {"step": step}, "bottleneck": "d2h",
            "compute_split": {"share": share}, "gpu_bytes": dict(breakdown),
            "host_bytes_per_rank": dict(breakdown, total=50)}


def test_accuracy_rows_and_table_judge_each_point_against_ten_percent(accuracy):
    mem = {"device": {"total": 40}, "host": {"total": -10}}
    rows = [accuracy.row("llama3-8b", "bf16+ecc8/q8/q8", point(0.5, 105.0, 1.0),
                         (100.0, 1.0, mem)),
            accuracy.row("llama3-8b", "bf16+ecc8/q8/q8", point(1.0, 80.0, 1.0),
                         (100.0, 0.75, mem)),
            accuracy.row("llama3-1b", "bf16+ecc8/q8/q8", point(0.25, 10.0, 0.0))]
    assert rows[0]["ratio"] == pytest.approx(1.05) and rows[0]["met"]
    assert rows[1]["ratio"] == pytest.approx(0.8) and not rows[1]["met"]
    assert rows[2]["measured_ms"] is None and rows[2]["met"] is None
    assert rows[0]["predicted_device_bytes"] == 40 and rows[0]["engine_device_bytes"] == 40
    result = {"command": "python3 bench/planner_accuracy.py", "commit": "abc1234",
              "date": "2026-11-24T00:00Z", "profile": "p.json", "offload_compute": "auto",
              "optimizer_rates": "profile", "results": rows}
    lines = accuracy.table(result)
    assert "abc1234" in lines[0]
    assert lines[-3].endswith("(limit 10%: met)") and "ratio 1.050" in lines[-3]
    assert lines[-2].endswith("(limit 10%: missed)") and "-20.0%" in lines[-2]
    assert lines[-1].strip() == "1 of 2 points within 10%"


def test_accuracy_plan_only_writes_command_commit_and_date(accuracy, tmp_path, capsys):
    tandem = pytest.importorskip("tandem")
    if not hasattr(tandem, "plan"):
        pytest.skip("tandem.plan is not built")
    out = tmp_path / "plan.json"
    profile = os.path.join(BENCH, "results", "calibrate_h200.json")
    assert accuracy.main(["--plan-only", "--models", "llama3-1b", "--fractions", "0.5",
                          "--profile", profile, "--offload-compute", "host",
                          "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["command"].startswith("python3 bench/planner_accuracy.py --plan-only")
    assert data["commit"] and data["date"] and data["offload_compute"] == "host"
    [r] = data["results"]
    assert r["fraction"] == 0.5 and r["plan_share"] == 0.0 and r["predicted_ms"] > 0
    assert "nothing measured" in capsys.readouterr().out


def test_baseline_json_has_command_commit_date_and_checks(baseline, tmp_path, monkeypatch,
                                                           capsys):
    seen = []
    monkeypatch.setattr(baseline, "measure_baseline", lambda shapes, f, threads, steps: 600.0)

    def tandem(shapes, f, formats, offload_compute, threads, steps):
        seen.append((f, formats, offload_compute))
        return (100.0 if formats.endswith("q8") else 400.0), 1.0
    monkeypatch.setattr(baseline, "measure_tandem", tandem)
    out = tmp_path / "b.json"
    assert baseline.main(["--models", "llama3-1b", "--offload-compute", "0.5",
                          "--json", str(out)]) == 0
    assert seen == [(0.5, "bf16+ecc8/q8/q8", 0.5), (0.5, "f32/f32/f32", 0.5)]
    data = json.loads(out.read_text())
    assert data["command"] == ("python3 bench/megatron_baseline.py --models llama3-1b "
                               "--offload-compute 0.5 --json " + str(out))
    assert data["commit"] and data["date"] and data["offload_compute"] == 0.5
    assert [r["speedup"] for r in data["results"]] == [6.0, 1.5]
    assert data["checks"] == [{"check": "llama3-1b f=0.5 bf16+ecc8/q8/q8: baseline / tandem",
                               "value": 6.0, "target": ">= 5", "met": True}]
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1].endswith("(target >= 5: met)")
    assert baseline.main(["--table", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == printed[-1]


def test_accuracy_measures_each_point_with_the_same_offload_compute(accuracy, tmp_path,
                                                                   monkeypatch, capsys):
    tandem = pytest.importorskip("tandem")
    if not hasattr(tandem, "plan"):
        pytest.skip("tandem.plan is not built")
    seen = []

    def measure(shapes, f, formats, a):
        seen.append((sum(n for _, n in shapes), f, formats, a.offload_compute))
        return 100.0, 0.0, {"device": {"total": 0}, "host": {"total": 0}}
    monkeypatch.setattr(accuracy, "measure", measure)
    out = tmp_path / "m.json"
    profile = os.path.join(BENCH, "results", "calibrate_h200.json")
    assert accuracy.main(["--models", "llama3-1b", "--fractions", "0.25", "1",
                          "--profile", profile, "--offload-compute", "host",
                          "--json", str(out)]) == 0
    assert [s[1:] for s in seen] == [(0.25, "bf16+ecc8/q8/q8", "host"),
                                     (1.0, "bf16+ecc8/q8/q8", "host")]
    assert seen[0][0] == 1235814400  # the planner's llama3-1b preset, parameter for parameter
    data = json.loads(out.read_text())
    assert [r["fraction"] for r in data["results"]] == [0.25, 1.0]
    assert all(r["ratio"] == pytest.approx(r["predicted_ms"] / 100.0) for r in data["results"])
    assert capsys.readouterr().out.splitlines()[-1].strip().endswith("points within 10%")


def test_each_result_is_a_json_with_command_commit_date_and_a_table_in_the_index():
    results = os.path.join(BENCH, "results")
    with open(os.path.join(BENCH, "..", "docs", "benchmarks.md")) as f:
        index = f.read()
    names = sorted(os.listdir(results))
    stems = {os.path.splitext(n)[0] for n in names}
    for n in names:
        assert os.path.splitext(n)[1] in (".json", ".txt", ".md"), n
    for stem in stems:
        with open(os.path.join(results, stem + ".json")) as f:
            data = json.load(f)
        for key in ("command", "commit", "date"):
            assert data.get(key), "%s.json has no %s" % (stem, key)
        tables = [stem + ext for ext in (".txt", ".md") if stem + ext in names]
        assert len(tables) == 1, "%s: one table beside the JSON, found %s" % (stem, tables)
        assert "../bench/results/%s)" % tables[0] in index, "%s is not in the index" % stem


def test_accuracy_table_reads_files_of_the_earlier_form(accuracy):
    # Rows of the 2026-11-21 file: measured and predicted, no ratio, no shares.
    rows = [dict(model="llama3-8b", formats="bf16+ecc8/q8/q8", fraction=0.5,
                 measured_ms=556.04, predicted_ms=580.13, bottleneck="host"),
            dict(model="llama3-1b", formats="bf16+ecc8/q8/q8", fraction=0.25,
                 measured_ms=67.31, predicted_ms=45.10, bottleneck="host")]
    result = {"command": "python3 bench/planner_accuracy.py", "commit": "ada0e38",
              "date": "2026-11-21T05:58Z", "results": rows}
    lines = accuracy.table(result)
    assert "ratio 1.043" in lines[-3] and lines[-3].endswith("met)")
    assert "ratio 0.670" in lines[-2] and lines[-2].endswith("missed)")
    assert "ratio" not in rows[0]  # the caller's rows are left as they were


def test_stream_early_start_table_compares_with_the_plain_mode_of_the_run():
    early = load("stream_early_start")
    a = early.parse_args([])
    assert a.budgets[0] == 0.0 and a.fraction == 1.0
    with pytest.raises(SystemExit):
        early.parse_args(["--budgets", "-1"])
    row = dict(iteration_ms=100.0, forward_backward_ms=60.0, step_ms=40.0,
               speculated_stream_chunks=0, stream_chunks=60)
    result = dict(layers=16, params=1.24e9, seq=2048, batch=1, fraction=1.0, warmup=2,
                  iters=5, bit_identical=True,
                  results=[dict(row, budget_gib=0.0),
                           dict(row, budget_gib=2.0, iteration_ms=80.0,
                                speculated_stream_chunks=30)])
    text = early.table(result)
    assert "plain" in text and "2 GiB" in text
    assert "0.800x" in text
    assert "bit-identical across modes: yes" in text
    result["bit_identical"] = False
    assert "bit-identical across modes: NO" in early.table(result)


def test_accuracy_plan_only_shows_the_fixed_cost_and_leaves_the_profile(accuracy, tmp_path,
                                                                       capsys):
    tandem = pytest.importorskip("tandem")
    if not hasattr(tandem, "calibrate_binding"):
        pytest.skip("tandem.calibrate_binding is not built")
    src = os.path.join(BENCH, "results", "calibrate_h200.json")
    profile = tmp_path / "p.json"
    old = json.load(open(src))
    old.pop("step_overhead", None)  # a profile written before the fixed step cost
    profile.write_text(json.dumps(old))
    out = tmp_path / "plan.json"
    assert accuracy.main(["--plan-only", "--models", "llama3-1b", "--fractions", "0.25",
                          "--profile", str(profile), "--json", str(out)]) == 0
    assert profile.read_text() == json.dumps(old)  # --plan-only never writes it
    data = json.loads(out.read_text())
    assert data["binding_overhead"] is None
    [r] = data["results"]
    assert r["predicted_fixed_ms"] == 0.0 and r["predicted_prepass_ms"] > 0
    assert "binding part): not in the profile: counted as 0" in capsys.readouterr().out
    # With both parts in the profile, the prediction carries them.
    p = json.loads(profile.read_text())
    p["step_overhead"] = {"engine": {"per_step_ms": 1.0, "per_tensor_us": 0.0},
                          "binding": {"per_step_ms": 0.5, "per_tensor_us": 0.0}}
    profile.write_text(json.dumps(p))
    assert accuracy.main(["--plan-only", "--models", "llama3-1b", "--fractions", "0.25",
                          "--profile", str(profile), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["results"][0]["predicted_fixed_ms"] == pytest.approx(1.5)
    assert data["results"][0]["predicted_ms"] == pytest.approx(r["predicted_ms"] + 1.5)
    assert data["binding_overhead"] == {"per_step_ms": 0.5, "per_tensor_us": 0.0}


def test_accuracy_rows_keep_where_the_measured_step_went(accuracy):
    mem = {"device": {"total": 40}, "host": {"total": -10}}
    stages = {"step_returns_ms": 3.5, "engine_step_ms": 3.0, "prepass_ms": 1.4,
              "stream_ms": 20.5, "gpu_update_ms": 0.0}
    pt = point(0.25, 21.0, 1.0)
    pt["step_ms"].update(prepass=1.3, fill=1.4, engine_overhead=0.25, binding_overhead=0.5)
    r = accuracy.row("llama3-1b", "bf16+ecc8/q8/q8", pt, (24.0, 1.0, mem, stages))
    assert r["measured_stages"] == stages and r["ratio"] == pytest.approx(21.0 / 24.0)
    assert r["predicted_fixed_ms"] == pytest.approx(0.75)
    assert r["predicted_prepass_ms"] == 1.3 and r["predicted_fill_ms"] == 1.4
    lines = accuracy.table({"command": "c", "commit": "abc", "date": "d", "results": [r],
                            "binding_overhead": {"per_step_ms": 0.5, "per_tensor_us": 0.0}})
    at = [i for i, line in enumerate(lines) if line.startswith("where the measured step")]
    assert at and "   3.50 /    3.00 /   1.40 (  1.30) /   20.50" in lines[at[0] + 1]
    assert "fixed step cost (binding part): 0.500 ms + 0.00 us x tensors" in lines
    assert lines[-1].strip() == "0 of 1 points within 10%"
    # A measurement without stages (the monkeypatched one of the test above) has none.
    assert "measured_stages" not in accuracy.row("llama3-1b", "f", point(0.25, 21.0, 1.0),
                                                 (24.0, 1.0, mem))


def test_hook_timer_times_the_hooks_and_keeps_no_dropped_optimizer_alive():
    import gc
    import weakref
    args = load("bench_args")

    class Opt:
        def __init__(self):
            self.calls = []

        def _on_grad_arriving(self, k):
            self.calls.append(("arriving", k))

        def _on_grad_accumulated(self, k):
            self.calls.append(("accumulated", k))

    opt = Opt()
    timer = args.HookTimer(opt)
    opt._on_grad_arriving(3)
    opt._on_grad_accumulated(4)
    assert opt.calls == [("arriving", 3), ("accumulated", 4)]
    assert timer.take() > 0 and timer.take() == 0
    gone = weakref.ref(opt)
    gc.disable()  # freed by its reference count alone, as `del opt` in a benchmark
    try:
        del opt
        assert gone() is None
    finally:
        gc.enable()


def synthetic_trace(path, backward_kernel_us, gap_us):
    """A Chrome trace of 5 forward kernels (thread 1) and 10 backward kernels (thread 2)
    on stream 7, gap_us apart, and 3 engine kernels on stream 20 beside them."""
    events, corr, t = [], [0], 0

    def kernel(name, stream, ts, dur, tid):
        corr[0] += 1
        events.append(dict(ph="X", cat="cuda_runtime", name="cudaLaunchKernel", ts=ts - 5,
                           dur=3, tid=tid, pid=1, args=dict(correlation=corr[0])))
        events.append(dict(ph="X", cat="kernel", name=name, ts=ts, dur=dur, tid=7, pid=0,
                           args=dict(stream=stream, correlation=corr[0])))
    for _ in range(5):
        kernel("fwd_gemm", 7, t, 100, 1)
        t += 110
    first = t
    for _ in range(10):
        kernel("bwd_gemm", 7, t, backward_kernel_us, 2)
        t += backward_kernel_us + gap_us
    for i in range(3):
        kernel("FusedStepKernel<adamw>", 20, first + 200 * i, 50, 2)
    events.append(dict(ph="X", cat="gpu_memcpy", name="Memcpy HtoD (Pinned -> Device)",
                       ts=first + 10, dur=200, tid=9, pid=0, args=dict(bytes=1e8, stream=21)))
    import gzip
    with gzip.open(path, "wt") as f:
        json.dump(dict(traceEvents=events), f)


def test_trace_summary_splits_backward_into_kernels_and_idle_time(tmp_path, capsys):
    summary = load("trace_summary")
    plain, spec = str(tmp_path / "plain.json.gz"), str(tmp_path / "spec.json.gz")
    synthetic_trace(plain, 100, 20)
    synthetic_trace(spec, 110, 200)
    lines, names = summary.summarise(summary.load(plain))
    text = "\n".join(lines)
    # 10 kernels of 100 us, 9 gaps of 20 us: span 1.18 ms, 1.00 ms busy, 0.18 idle.
    assert "backward: span 1.18 ms, kernels 1.00 ms, idle 0.18 ms" in text
    assert "launched by thread 2" in text
    assert names == {"bwd_gemm": [1000.0, 10]}
    assert "copies HtoD: 1, 0.10 GB, 1 of them inside backward's span" in text
    assert summary.main([plain, spec]) == 0
    out = capsys.readouterr().out
    assert "backward: span 2.90 ms, kernels 1.10 ms, idle 1.80 ms (9 gaps over 20 us" in out
    assert "all of backward's kernels: 1.00 ms against 1.10 ms (1.10x)" in out


def test_host_speculation_options():
    hs = load("host_speculation")
    a = hs.parse_args([])
    assert (a.layers, a.state, a.steps) == (6, "q8", 7)
    assert hs.parse_args(["--state", "f32"]).state == "f32"
    for bad in (["--state", "fp8"], ["--layers", "0"], ["--steps", "0"], ["--warmup", "-1"]):
        with pytest.raises(SystemExit):
            hs.parse_args(bad)


def test_host_speculation_runs_and_records_command_commit_and_date(tmp_path, capsys):
    pytest.importorskip("tandem")
    hs = load("host_speculation")
    out = str(tmp_path / "r.json")
    assert hs.main(["--layers", "2", "--dim", "64", "--steps", "2", "--warmup", "1",
                    "--json", out]) == 0
    r = json.load(open(out))
    assert r["command"].startswith("python3 bench/host_speculation.py --layers 2")
    assert r["commit"] and r["date"] and r["elements"] == 2 * 64 * 64
    assert r["kept_chunks"] > 0 and r["speculative_host_ms"] > 0
    assert "host speculation" in capsys.readouterr().out
