"""tandem.plan: the planner from Python on a live module, a config, a preset and a count;
the same plan as tandem-plan's for the same tensors; errors as ValueError."""

import json
import re

import pytest
import torch

import tandem


def llama_like(layers=2, dim=256, hidden=688, vocab=1000):
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(dim, 3 * dim, bias=False), torch.nn.Linear(dim, dim, bias=False),
                   torch.nn.Linear(dim, 2 * hidden, bias=False),
                   torch.nn.Linear(hidden, dim, bias=False), torch.nn.LayerNorm(dim)]
    return torch.nn.Sequential(torch.nn.Embedding(vocab, dim), *blocks,
                               torch.nn.Linear(dim, vocab, bias=False))


def test_a_live_module():
    model = llama_like()
    p = tandem.plan(model, gpu_mem="2GiB", host_mem="8GiB")
    assert p.feasible and p.fraction == 0.0
    n = sum(t.numel() for t in model.parameters())
    assert p.data["model"]["params"] == n
    assert "Sequential.params.json" in p.text
    assert repr(p).startswith("<tandem.Plan fits")


def test_frozen_and_shared_parameters_are_left_out_once():
    model = llama_like()
    model[0].weight.requires_grad_(False)
    model[-1].weight = model[1].weight  # tied: counted once
    p = tandem.plan(model, gpu_mem="2GiB", host_mem="8GiB")
    trainable = {id(t): t.numel() for t in model.parameters() if t.requires_grad}
    assert p.data["model"]["params"] == sum(trainable.values())


def test_a_small_gpu_offloads_and_a_tiny_one_does_not_fit():
    model = llama_like(layers=8, dim=512, hidden=1376, vocab=32000)  # 58M fp32 params
    # Weights and gradients take 443 MiB; the state at fraction 0 another ~180 MiB; the
    # CUDA context 1600 MiB as measured (the runtime, counted beside them).
    p = tandem.plan(model, gpu_mem="2120MiB", host_mem="8GiB", headroom="0%")
    assert p.data["recommended"]["gpu_bytes"]["runtime"] >= 1600 << 20
    assert p.feasible and 0.0 < p.fraction <= 1.0
    tiny = tandem.plan(model, gpu_mem="1MiB", host_mem="8GiB")
    assert not tiny.feasible and tiny.fraction is None


def test_the_same_plan_as_the_command_line(tmp_path):
    p = tandem.plan("llama3-8b", gpu_mem="40GiB", host_mem="512GiB", seq=2048,
                    recompute="full")
    rc, out, _ = tandem._C.plan_cli(["--model", "llama3-8b", "--gpu-mem", "40GiB",
                                     "--host-mem", "512GiB", "--seq", "2048", "--recompute",
                                     "full", "--json"])
    assert rc in (0, 1) and json.loads(out) == p.data
    assert p.args[:2] == ["--model", "llama3-8b"]


def test_configs_counts_and_fsdp2():
    config = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376,
              "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
              "vocab_size": 32000, "tie_word_embeddings": False}
    p = tandem.plan(config, gpu_mem="2GiB", host_mem="8GiB")
    assert p.feasible
    assert tandem.plan(7_000_000, gpu_mem="2GiB", host_mem="8GiB").feasible
    sharded = tandem.plan("llama3-70b", gpu_mem="80GiB", host_mem="1TiB", fsdp2=True,
                          gpus_per_node=8, seq=4096, recompute="full")
    assert sharded.data["fsdp2"] is not None


def test_bad_input_is_a_value_error_with_the_planners_message():
    with pytest.raises(ValueError, match="no unit"):
        tandem.plan(7_000_000, gpu_mem="80", host_mem="8GiB")
    with pytest.raises(ValueError, match="gpu_mem must be positive"):
        tandem.plan(7_000_000, gpu_mem=0, host_mem="8GiB")
    with pytest.raises(ValueError, match="model must be"):
        tandem.plan(object(), gpu_mem="2GiB", host_mem="8GiB")
    with pytest.raises(ValueError, match="speculative|fsdp2|shard"):
        tandem.plan(7_000_000, gpu_mem="2GiB", host_mem="8GiB", shard_size=2)


def test_offload_compute_passes_through():
    host = tandem.plan("llama3-8b", gpu_mem="40GiB", host_mem="256GiB", offload_compute="host")
    assert host.data["optimizer"]["offload_compute"] == "host"
    assert host.compute_share == 0.0
    assert host.args[host.args.index("--offload-compute") + 1] == "host"
    gpu = tandem.plan("llama3-8b", gpu_mem="40GiB", host_mem="256GiB", offload_compute="gpu")
    assert gpu.compute_share == 1.0
    # Streamed state leaves out the master's part that is the bf16 parameter.
    assert gpu.data["recommended"]["host_bytes_per_rank"]["master"] == 0
    assert host.data["recommended"]["host_bytes_per_rank"]["master"] > 0
    half = tandem.plan("llama3-8b", gpu_mem="40GiB", host_mem="256GiB", offload_compute=0.5)
    assert half.data["optimizer"]["offload_compute"] == "0.5"
    assert abs(half.compute_share - 0.5) < 1e-6
    # The default is auto: on the reference profile the host is the slower side, so the
    # GPU takes the host-resident elements and the step is faster than the host's alone.
    auto = tandem.plan("llama3-8b", gpu_mem="40GiB", host_mem="256GiB")
    assert auto.data["optimizer"]["offload_compute"] == "auto"
    assert 0.0 < auto.compute_share <= 1.0
    step = lambda p: p.data["recommended"]["step_ms"]["step"]
    assert step(auto) < step(host)
    # The same plan as the command line's.
    rc, out, _ = tandem._C.plan_cli(["--model", "llama3-8b", "--gpu-mem", "40GiB",
                                     "--host-mem", "256GiB", "--offload-compute", "0.5",
                                     "--json"])
    assert rc in (0, 1) and json.loads(out) == half.data


def test_bad_offload_compute_is_a_value_error():
    for bad in (1.5, -0.1, True, None):
        with pytest.raises(ValueError, match="offload_compute"):
            tandem.plan(7_000_000, gpu_mem="2GiB", host_mem="8GiB", offload_compute=bad)
    with pytest.raises(ValueError, match="offload_compute must be"):
        tandem.plan(7_000_000, gpu_mem="2GiB", host_mem="8GiB", offload_compute="sometimes")


def test_machine_rates_from_a_profile(tmp_path):
    ref = tandem.machine_rates()
    assert ref["h2d_gbps"] == pytest.approx(101.7 / 2)
    assert ref["d2h_gbps"] == pytest.approx(101.7 / 2)
    assert ref["gpu_gparams"] == pytest.approx(4260 * 0.9 / 12.25)
    assert ref["host_gparams"] == pytest.approx(146 * 0.9 / 12.25 / (1 + 4 / 12.25))
    key = "adamw/bf16+ecc8/q8/q8/bf16"
    profile = {"schema": "tandem-profile/1", "machine": "box",
               "gpu": {"hbm_copy_gbps": 4000, "kernels": {key: {"gparams_per_s": 250}}},
               "host": {"triad_gbps": 100, "kernels": {key: {"gparams_per_s": 8}},
                        "kernels_under_dma": {key: {"gparams_per_s": 6}}},
               "pcie": {"h2d_gbps": 55, "d2h_gbps": 54, "bidir_gbps": 100,
                        "h2d_concurrent_gbps": 49, "d2h_concurrent_gbps": 48}}
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(profile))
    r = tandem.machine_rates(path)
    assert r == {"h2d_gbps": 49, "d2h_gbps": 48, "host_gparams": 6, "gpu_gparams": 250}
    # Other formats: no measured key, so rooflines; f32 master with f32 moments.
    wide = tandem.machine_rates(path, master="f32", m="f32", v="f32")
    assert wide["gpu_gparams"] != 250
    with pytest.raises(ValueError, match="profile.json"):
        del profile["pcie"]
        path.write_text(json.dumps(profile))
        tandem.machine_rates(path)
    with pytest.raises(ValueError):
        tandem.machine_rates(None, master="bf17")


def _profile(**extra):
    key = "adamw/bf16+ecc8/q8/q8/bf16"
    profile = {"schema": "tandem-profile/1", "machine": "box",
               "gpu": {"hbm_copy_gbps": 4000, "kernels": {key: {"gparams_per_s": 250}}},
               "host": {"triad_gbps": 100, "kernels": {key: {"gparams_per_s": 8}}},
               "pcie": {"h2d_gbps": 55, "d2h_gbps": 54, "bidir_gbps": 100}}
    profile.update(extra)
    return profile


def test_the_fixed_step_cost_is_in_the_plan_and_older_profiles_count_it_as_0(tmp_path):
    # Note [Fixed step cost]: per step + per tensor, the engine's and the binding's parts.
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_profile()))
    old = tandem.plan("llama3-1b", gpu_mem="141GB", host_mem="128GiB", profile=str(path),
                      offload_compute="gpu")
    tensors = old.data["model"]["tensors"]
    assert tensors == 146
    sweep = {pt["fraction"]: pt for pt in old.data["sweep"]}
    assert sweep[0.25]["step_ms"]["engine_overhead"] == 0
    assert sweep[0.25]["step_ms"]["binding_overhead"] == 0
    assert "counted as 0" in old.data["profile"]["step_overhead"]["engine"]["source"]
    assert "binding 0.00 ms (not in the profile: counted as 0" in old.text
    overhead = {"engine": {"per_step_ms": 0.5, "per_tensor_us": 2.0},
                "binding": {"per_step_ms": 0.25, "per_tensor_us": 4.0}}
    path = tmp_path / "new.json"
    path.write_text(json.dumps(_profile(step_overhead=overhead)))
    new = tandem.plan("llama3-1b", gpu_mem="141GB", host_mem="128GiB", profile=str(path),
                      offload_compute="gpu")
    fixed = 0.5 + 0.25 + (2.0 + 4.0) * 1e-3 * tensors
    for pt in new.data["sweep"]:
        before = {p["fraction"]: p for p in old.data["sweep"]}[pt["fraction"]]
        step = pt["step_ms"]
        assert step["engine_overhead"] == pytest.approx(0.5 + 2e-3 * tensors)
        assert step["binding_overhead"] == pytest.approx(0.25 + 4e-3 * tensors)
        assert step["step"] == pytest.approx(before["step_ms"]["step"] + fixed)
    assert "fixed (engine %.2f + binding %.2f)" % (0.5 + 2e-3 * tensors,
                                                   0.25 + 4e-3 * tensors) in new.text
    assert "measured: 0.250 ms + 4.00 us x tensors" in new.text


def test_the_prepass_rate_comes_from_the_profile(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_profile()))
    default = tandem.plan(1_000_000_000, gpu_mem="141GB", host_mem="128GiB",
                          profile=str(path))
    # Not measured: 4 bytes per element at the HBM copy rate.
    assert default.data["recommended"]["step_ms"]["prepass"] == pytest.approx(4e9 / 4000e6)
    assert "not in the profile" in default.data["profile"]["prepass_source"]
    profile = _profile()
    profile["gpu"]["prepass_gparams_per_s"] = 500
    path.write_text(json.dumps(profile))
    measured = tandem.plan(1_000_000_000, gpu_mem="141GB", host_mem="128GiB",
                           profile=str(path))
    assert measured.data["recommended"]["step_ms"]["prepass"] == pytest.approx(1e3 / 500)
    assert measured.data["profile"]["prepass_gparams_per_s"] == 500


def test_calibrate_binding_adds_the_binding_part_to_a_profile(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_profile(step_overhead={"engine": {"per_step_ms": 0.5,
                                                                  "per_tensor_us": 2.0}})))
    figures = tandem.calibrate_binding(path, device="cpu", tensors=(2, 8), steps=3)
    assert set(figures) == {"per_step_ms", "per_tensor_us"}
    assert figures["per_step_ms"] >= 0 and figures["per_tensor_us"] >= 0
    data = json.loads(path.read_text())
    assert data["step_overhead"]["binding"] == figures
    assert data["step_overhead"]["engine"] == {"per_step_ms": 0.5, "per_tensor_us": 2.0}
    assert data["gpu"]["kernels"] == _profile()["gpu"]["kernels"]  # the rest kept
    # The planner reads it.
    p = tandem.plan("llama3-1b", gpu_mem="141GB", host_mem="128GiB", profile=str(path))
    assert p.data["profile"]["step_overhead"]["binding"]["measured"]
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="bad.json"):
        tandem.calibrate_binding(bad, device="cpu", tensors=(2, 8), steps=1)
    assert bad.read_text() == "[1, 2]"
    with pytest.raises(ValueError, match="tensors"):
        tandem.measure_binding_overhead("cpu", tensors=(8, 2))


# ---- messages that name the real problem ---------------------------------------------------

def test_a_missing_config_is_named_as_a_missing_file():
    # It used to be read as a count: "count 'nope/config.json': expected a non-negative
    # number with a unit".
    with pytest.raises(FileNotFoundError, match="model 'nope/config.json': no such file or "
                                                "directory") as e:
        tandem.plan("nope/config.json", gpu_mem="80GiB", host_mem="512GiB")
    assert "count 'nope" not in str(e.value) and "llama3-8b" in str(e.value)
    with pytest.raises(ValueError, match="'mistral-7b' is not a preset .*llama3-70b.*count"):
        tandem.plan("mistral-7b", gpu_mem="80GiB", host_mem="512GiB")


def test_counts_may_be_whole_floats_and_strings():
    for count in (8.03e9, 8030000000, "8.03e9", "8.03B"):
        p = tandem.plan(count, gpu_mem="80GiB", host_mem="512GiB")
        assert p.data["model"]["params"] == 8030000000, count
    for bad, needle in ((8.5, "whole number"), (0, "positive"), (-3.0, "positive"),
                        (float("nan"), "whole number")):
        with pytest.raises(ValueError, match=needle):
            tandem.plan(bad, gpu_mem="80GiB", host_mem="512GiB")


def test_options_are_named_as_plan_takes_them():
    with pytest.raises(TypeError, match="unexpected keyword argument 'sequence'; its options "
                                        "are .*\\bseq\\b") as e:
        tandem.plan("llama3-8b", gpu_mem="80GiB", host_mem="512GiB", sequence=4096)
    assert "--help" not in str(e.value)
    # The model's own flags and the outputs are not options of plan().
    for own in ("params", "config", "model", "params_json", "json", "svg", "help"):
        with pytest.raises(TypeError, match=own):
            tandem.plan("llama3-8b", gpu_mem="80GiB", host_mem="512GiB", **{own: 1})
    # The planner's own checks, in plan()'s words: the binding's message for chunk_elements.
    with pytest.raises(ValueError) as e:
        tandem.plan("llama3-8b", gpu_mem="80GiB", host_mem="512GiB", chunk_elements=0)
    assert "chunk_elements must be a positive multiple of 32, got 0" in str(e.value)
    assert "--" not in str(e.value)
    with pytest.raises(ValueError) as e:
        tandem.plan("llama3-8b", gpu_mem="80GiB", host_mem="512GiB", seq="long")
    assert "seq" in str(e.value) and "--help" not in str(e.value) and "--seq" not in str(e.value)


# ---- docs/planner.md's Python examples run as shown ----------------------------------------

def test_the_planner_guides_python_examples_print_what_it_shows(tmp_path, monkeypatch):
    # Every ```python block of docs/planner.md is a doctest: its ">>>" lines run, in order,
    # in one namespace, and print what the guide shows ("..." matches anything).
    import doctest
    import os
    import re
    doc = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                       "planner.md")
    text = open(doc).read()
    blocks = re.findall(r"^```python\n(.*?)^```$", text, re.S | re.M)
    # The profile the guide's shell example writes before its Python example reads it.
    profile = re.search(r"<<'JSON'\n(.*?)\nJSON\n", text, re.S)
    assert blocks and profile, "the guide lost its examples"
    monkeypatch.chdir(tmp_path)
    (tmp_path / "slow-host.json").write_text(profile.group(1))
    test = doctest.DocTestParser().get_doctest("\n".join(blocks), {}, "docs/planner.md", doc, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    runner.run(test, out=report.append)
    assert len(test.examples) >= 20
    assert runner.failures == 0, "".join(report)


# ---- the node, gradient release, the iteration and the largest model ------------------------

def test_machine_rates_for_a_node_of_ranks(tmp_path, monkeypatch):
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    one = tandem.machine_rates()
    four = tandem.machine_rates(ranks=4)
    # Each direction capped at its share of the node's host DRAM under DMA (169 GB/s), the
    # host kernel divided among the ranks, the GPU each rank's own.
    assert four["h2d_gbps"] == pytest.approx(169 / 8)
    assert four["d2h_gbps"] == pytest.approx(169 / 8)
    assert four["host_gparams"] == pytest.approx(one["host_gparams"] / 4)
    assert four["gpu_gparams"] == one["gpu_gparams"]
    # torchrun's LOCAL_WORLD_SIZE is the default rank count.
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert tandem.machine_rates() == four
    assert tandem.machine_rates(ranks=1) == one
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "four")
    with pytest.raises(ValueError, match="LOCAL_WORLD_SIZE must be an integer, got 'four'"):
        tandem.machine_rates()
    for bad in (0, -2, 1.5, True, "4"):
        with pytest.raises(ValueError, match="ranks must be an integer >= 1"):
            tandem.machine_rates(ranks=bad)
    # A profile measured with --ranks 4 gives those figures as they are.
    key = "adamw/bf16+ecc8/q8/q8/bf16"
    node = {"ranks": 4, "gpus": 4,
            "host": {"kernels": {key: {"gparams_per_s": 3}},
                     "kernels_under_dma": {key: {"gparams_per_s": 1.25}}},
            "pcie": {"h2d_concurrent_gbps": 20.5, "d2h_concurrent_gbps": 21.5}}
    path = tmp_path / "node.json"
    path.write_text(json.dumps(_profile(node=node)))
    r = tandem.machine_rates(path, ranks=4)
    assert (r["h2d_gbps"], r["d2h_gbps"], r["host_gparams"]) == (20.5, 21.5, 1.25)


LLAMA70B_ON_FOUR = dict(gpu_mem="80GB", host_mem="512GiB", fsdp2=True, gpus_per_node=4,
                        batch=1, seq=4096, recompute="full")


def test_gradient_release_and_the_iteration():
    without = tandem.plan("llama3-70b", grad_release=False, **LLAMA70B_ON_FOUR)
    assert not without.feasible and not without.grad_release
    assert "--grad-release=off" in without.args
    # The verdict names what would fit: release, at the fraction auto then picks.
    assert without.data["would_fit"][0].startswith("would fit: gradient release")
    # Release is considered by default.
    auto = tandem.plan("llama3-70b", **LLAMA70B_ON_FOUR)
    assert auto.feasible and auto.grad_release
    assert "from offload fraction %.4f" % auto.data["min_fraction"] in without.data["would_fit"][0]
    assert auto.data == tandem.plan("llama3-70b", grad_release="auto", **LLAMA70B_ON_FOUR).data
    on = tandem.plan("llama3-70b", grad_release=True, **LLAMA70B_ON_FOUR)
    assert on.feasible and on.grad_release
    it = auto.iteration
    assert it["iteration_ms"] == pytest.approx(it["forward_ms"] + it["backward_ms"]
                                               + it["exposed_ms"])
    assert 0 < it["mfu"] < 1 and it["tokens_per_s"] > 0
    # No sequence: no iteration.
    assert tandem.plan("llama3-1b", gpu_mem="80GB", host_mem="64GiB").iteration is None
    with pytest.raises(ValueError, match="expected on, off or auto"):
        tandem.plan("llama3-1b", gpu_mem="80GB", host_mem="64GiB", grad_release="sometimes")


def test_largest_model_of_a_node():
    big = tandem.largest(gpu_mem="80GB", host_mem="512GiB", fsdp2=True, gpus_per_node=4,
                         seq=4096, recompute="full", grad_release="auto")
    best = big.best
    assert best is not None and best["shape"] == big.data["best"]
    assert best["params"] == max(r["params"] for r in big.data["rows"] if r["layers"] > 0)
    assert big.plan is not None and "LARGEST:" in str(big)
    assert repr(big).startswith("<tandem.Largest llama3-")
    # Nothing fits a 1 GB GPU: no best row, no plan.
    none = tandem.largest(gpu_mem="1GB", host_mem="1GiB")
    assert none.best is None and none.plan is None and "nothing fits" in repr(none)
    # Options it does not take, and plan() does not take --largest.
    for bad in ("model", "params", "json", "svg", "largest"):
        with pytest.raises(TypeError, match="unexpected keyword argument %r" % bad):
            tandem.largest(gpu_mem="80GB", host_mem="512GiB", **{bad: "x"})
    with pytest.raises(TypeError, match="unexpected keyword argument 'largest'"):
        tandem.plan("llama3-1b", gpu_mem="80GB", host_mem="64GiB", largest=True)
    with pytest.raises(ValueError, match="expected on, off or auto"):
        tandem.largest(gpu_mem="80GB", host_mem="512GiB", grad_release="sometimes")


def test_calibrate_training_needs_a_current_torch_or_says_so(tmp_path):
    if hasattr(torch.nn, "RMSNorm"):
        pytest.skip("torch %s has what calibrate_training needs (tests/python_dist runs it)"
                    % torch.__version__)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_profile()))
    with pytest.raises(RuntimeError, match="calibrate_training needs torch >= 2.5"):
        tandem.calibrate_training(path, model=TINY_LLAMA, layers=1, seq=8, steps=1)
    assert json.loads(path.read_text()) == _profile()  # unchanged


TINY_LLAMA = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=64,
                  intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=256, tie_word_embeddings=False)


def test_the_plan_says_how_to_run_it_and_the_optimizer_takes_that():
    model = llama_like(layers=8, dim=512, hidden=1376, vocab=32000)
    p = tandem.plan(model, gpu_mem="2120MiB", host_mem="8GiB", headroom="0%",
                    offload_compute="host", speculative_early_start=True, grad_release=True,
                    speculative_host_bytes="64MiB")
    kw = p.optimizer_kwargs
    assert p.optimizer_class == "AdamW"
    assert kw["offload_fraction"] == p.fraction > 0
    assert kw["offload_compute"] == "host"
    assert (kw["master_format"], kw["momentum_format"], kw["variance_format"]) == (
        "bf16+ecc8", "q8", "q8")
    assert kw["release_grads"] and kw["speculative_early_start"]
    # The budget the plan speculates within: its host-computed backups, whole chunks.
    assert 0 < kw["speculative_host_bytes"] <= 64 << 20
    assert "opt = tandem.torch.AdamW(model.named_parameters(), offload_fraction=" in p.text
    assert "opt.begin_step() before loss.backward()" in p.text
    # What the plan says runs: the optimizer takes exactly these keyword arguments.
    import tandem.torch as tandem_torch
    opt = tandem_torch.AdamW(model.parameters(), lr=1e-3, **kw)
    before = [t.detach().clone() for t in model.parameters()]
    sum((t * torch.randn_like(t)).sum() for t in model.parameters()).backward()
    opt.step()
    assert all(not torch.equal(a, t) for a, t in zip(before, model.parameters()))
    assert tandem.plan(model, gpu_mem="1MiB", host_mem="8GiB").optimizer_kwargs is None


def test_the_bindings_options_are_the_command_lines():
    # tandem.plan hands the planner a dict (tandem._C.make_plan); its options, flags and
    # presets are tandem-plan's (tools/plan/options.h holds both).
    _, help_text, _ = tandem._C.plan_cli(["--help"])
    cli = set(re.findall(r"^\s+(?:-\w+,)?--([a-z0-9][a-z0-9-]*)", help_text, re.M))
    options = tandem._C.plan_options()
    assert cli - {"help", "version", "json", "svg"} == {
        n.replace("_", "-") for n in options["names"]}
    for flag in options["flags"]:
        assert re.search(r"^\s+--%s\s{2,}" % flag.replace("_", "-"), help_text, re.M), flag
    assert "preset: %s\n" % ", ".join(options["presets"]) in help_text
    # One run of the planner answers with the report and the JSON plan.
    answer = tandem._C.make_plan({"model": "llama3-8b", "gpu_mem": "40GiB",
                                  "host_mem": "512GiB", "seq": 2048, "recompute": "full"})
    rc, text, _ = tandem._C.plan_cli(["--model", "llama3-8b", "--gpu-mem", "40GiB",
                                      "--host-mem", "512GiB", "--seq", "2048", "--recompute",
                                      "full"])
    assert (answer["status"], answer["text"]) == (rc, text)
    bad = tandem._C.make_plan({"model": "llama3-8b", "gpu_mem": "40GiB", "host_mem": "1TiB",
                               "shard_size": 2})
    assert bad == {"status": 2, "error": "--shard-size requires --fsdp2"}


def test_calibrations_llama3_shapes_are_the_planners_presets(tmp_path):
    # tandem.calibrate_training builds its Llama-3 models from its own shape table
    # (python/tandem/planner/_calibrate.py); each shape the planner has as a preset must
    # count the preset's parameters, so a calibration measures the model it plans.
    from tandem.planner._calibrate import LLAMA3
    presets = tandem._C.plan_options()["presets"]
    assert set(presets) <= set(LLAMA3)
    for name in presets:
        path = tmp_path / (name + ".json")
        path.write_text(json.dumps(LLAMA3[name]))
        by_preset = tandem.plan(name, gpu_mem="80GiB", host_mem="512GiB").data["model"]
        by_config = tandem.plan(str(path), gpu_mem="80GiB", host_mem="512GiB").data["model"]
        assert by_config["params"] == by_preset["params"], name
