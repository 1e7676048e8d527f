"""A tiny Llama from `transformers` (config only, random weights, no download), trained
a few steps with tandem.torch: its fp32 masters, exported with tandem.torch.export_masters
and with `tandem-ckpt export` from a checkpoint file, load into a fresh model by name with
`safetensors` and `load_state_dict(strict=True)`. Skips where transformers or safetensors
is not installed (Debian's Python in CI); runs on the GPU machine, in GPU mode there."""
import os
import subprocess

import pytest
import torch

import tandem
import tandem.torch as tt

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")


def tiny_llama(device):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=96,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64,
                                   tie_word_embeddings=False)
    return transformers.LlamaForCausalLM(cfg).to(device), cfg


def train(model, opt, device, steps=3):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        ids = torch.randint(0, 128, (2, 16), generator=g).to(device)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()


def ckpt_tool():
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(tandem._C.__file__))))
    path = os.environ.get("TANDEM_CKPT", os.path.join(build, "tools", "ckpt", "tandem-ckpt"))
    if not os.path.exists(path):
        pytest.skip("tandem-ckpt not built at %s" % path)
    return path


@pytest.mark.parametrize("fraction", [0.0, 0.5])
def test_masters_load_by_name_into_transformers(tmp_path, fraction):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, cfg = tiny_llama(device)
    opt = tt.AdamW(model.named_parameters(), lr=1e-3, offload_fraction=fraction,
                   master_format="f32")
    train(model, opt, device)
    path = str(tmp_path / "masters.safetensors")
    tt.export_masters(opt, path)
    fresh = transformers.LlamaForCausalLM(cfg).to(device)
    fresh.load_state_dict(safetensors_torch.load_file(path, device=device), strict=True)
    for (name, a), (_, b) in zip(model.named_parameters(), fresh.named_parameters()):
        assert torch.equal(a, b), name

    # The same through a checkpoint file and the command-line tool.
    ckpt = str(tmp_path / "run.tdm")
    opt.save_checkpoint(ckpt)
    exported = str(tmp_path / "exported.safetensors")
    r = subprocess.run([ckpt_tool(), "export", ckpt, exported], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    again = transformers.LlamaForCausalLM(cfg).to(device)
    again.load_state_dict(safetensors_torch.load_file(exported, device=device), strict=True)
    for (name, a), (_, b) in zip(model.named_parameters(), again.named_parameters()):
        assert torch.equal(a, b), name
