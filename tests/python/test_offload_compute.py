"""offload_compute: where host-resident elements are computed. In host mode a share > 0
runs the streaming data path with host memory standing in for the GPU's; every choice
gives the bits of "host". Bad values are refused by name; compute_split() and
placement() report the choice."""

import pytest

import tandem.torch
from helpers import batches, make_mlp, params_bits, same_bits, train
from test_exact import same_state


def run(compute, fraction=1.0, **options):
    model = make_mlp(seed=5)
    opt = tandem.torch.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1,
                             offload_fraction=fraction, chunk_elements=64,
                             offload_compute=compute, stream_chunk_bytes=4096,
                             master="bf16+ecc8", momentum="q8", variance="q8", **options)
    losses = train(model, opt, batches(12, seed=6))
    return losses, params_bits(model), opt.state_dict(), opt


@pytest.mark.parametrize("fraction", [0.5, 1.0])
def test_every_share_gives_the_bits_of_host(fraction):
    base_losses, base_params, base_state, _ = run("host", fraction)
    for compute in ("gpu", 0.3, "0.7", "auto"):
        losses, params, state, opt = run(compute, fraction)
        assert losses == base_losses, compute
        assert same_bits(params, base_params), compute
        assert same_state(state, base_state), compute
        placement = opt.placement()
        if compute == "auto":  # host mode: no GPU to stream through
            assert placement["streamed"] == 0
        else:
            assert placement["streamed"] > 0
            assert sum(placement["stream_counts"]) == placement["streamed"]
            assert opt.last_step_times()["stream_chunks"] > 0
            assert opt.memory()["classes"]["streamed"] > 0


def test_compute_split_with_rates():
    rates = dict(h2d_gbps=50.0, d2h_gbps=50.0, host_gparams=6.0, gpu_gparams=270.0)
    _, _, _, opt = run(0.5, machine_rates=rates)
    split = opt.compute_split()
    assert split["share"] == 0.5
    assert split["step_ms"] > 0
    assert split["bound"] in ("d2h", "h2d", "host", "gpu", "stream", "stream+host")
    assert split["step_ms"] == max(split["gpu_ms"], split["stream_ms"] + split["host_path_ms"])
    _, _, _, plain = run("host")
    assert plain.compute_split()["step_ms"] == 0


def test_streamed_chunks_speculate_with_the_same_bits():
    """begin_step() before backward: streamed chunks are updated during backward and kept
    by step() (Note [Speculating streamed chunks]); the bits are those of plain steps."""
    import torch
    _, base_params, base_state, _ = run("gpu")
    model = make_mlp(seed=5)
    opt = tandem.torch.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1,
                             offload_fraction=1.0, chunk_elements=64, offload_compute="gpu",
                             stream_chunk_bytes=4096, master="bf16+ecc8", momentum="q8",
                             variance="q8", speculative_early_start=True)
    speculated = 0
    for x, y in batches(12, seed=6):
        opt.zero_grad()
        opt.begin_step()
        torch.nn.functional.mse_loss(model(x).float(), y.float()).backward()
        opt.step()
        times = opt.last_step_times()
        speculated += times["speculated_stream_chunks"]
        assert times["handover_ms"] > 0  # begin_step and the hooks' GradReady, this step's
    assert speculated > 0
    assert same_bits(params_bits(model), base_params)
    assert same_state(opt.state_dict(), base_state)
    assert opt.memory()["host"]["speculation"] > 0


@pytest.mark.parametrize("bad, needle", [
    (dict(offload_compute="fast"), "offload_compute"),
    (dict(offload_compute=1.5), "offload_compute"),
    (dict(offload_compute=True), "offload_compute"),
    (dict(stream_chunk_bytes=100), "stream_chunk_bytes"),
    (dict(stream_slots=1), "stream_slots"),
    (dict(speculative_stream_bytes=-1), "speculative_stream_bytes"),
    (dict(machine_rates=dict(h2d_gbps=1.0)), "machine_rates"),
    (dict(machine_rates=dict(h2d_gbps=1.0, d2h_gbps=1.0, host_gparams=0.0, gpu_gparams=1.0)),
     "host_gparams"),
])
def test_bad_values_are_refused_by_name(bad, needle):
    model = make_mlp(seed=5)
    with pytest.raises(ValueError, match=needle):
        tandem.torch.AdamW(model.parameters(), lr=1e-3, offload_fraction=0.5, **bad)
