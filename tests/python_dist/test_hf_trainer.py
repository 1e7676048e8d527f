"""transformers.Trainer with tandem.torch.AdamW (docs/huggingface.md), on the CPU.

A tiny Llama (random weights from LlamaConfig, nothing downloaded) trains on a
synthetic dataset through both of the Trainer's optimizer hooks:
``optimizer_cls_and_kwargs=(tandem.torch.AdamW, {...})`` and ``optimizers=(opt,
scheduler)``. Each run is compared with the same run (same seed, data and parameter
groups) with torch.optim.AdamW: with fp32 state the per-step losses and the weights
agree to rounding; with bf16+ecc8 masters and q8 moments they agree loosely. A run
resumed from a Trainer checkpoint (Tandem's state_dict in optimizer.pt) continues
bit for bit as the run that was not interrupted.
"""

import importlib.util
import os
import re
import subprocess
import sys
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

transformers = pytest.importorskip("transformers")
import tandem.torch  # noqa: E402

STEPS = 8
SAVE_AT = 4                      # checkpoint-4: the resumed runs start there
LR = 3e-3
WEIGHT_DECAY = 0.1
ADAM = dict(lr=LR, betas=(0.9, 0.999), eps=1e-8)
QUANTIZED = dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLE = os.path.join(ROOT, "examples", "hf_trainer.py")
DOC = os.path.join(ROOT, "docs", "huggingface.md")


def _load_example():
    """The example's model, data and trainer (one definition for both)."""
    spec = importlib.util.spec_from_file_location("hf_trainer_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_example = _load_example()
tiny_llama = _example.tiny_llama
Arithmetic = _example.Arithmetic
RecordingTrainer = _example.LossTrainer


def arguments(out, save):
    return transformers.TrainingArguments(
        output_dir=str(out), max_steps=STEPS, per_device_train_batch_size=8,
        learning_rate=LR, weight_decay=WEIGHT_DECAY, lr_scheduler_type="linear",
        warmup_steps=2, logging_steps=1, save_strategy="steps" if save else "no",
        save_steps=SAVE_AT, report_to=[], use_cpu=True, seed=0, disable_tqdm=True)


def run(out, optimizer_cls=None, kwargs=None, make_optimizers=None, save=False,
        resume=None):
    """One Trainer run; the optimizer comes from optimizer_cls_and_kwargs, or from
    make_optimizers(model) -> (optimizer, scheduler) (the ``optimizers=`` hook)."""
    model = tiny_llama()
    hooks = {}
    if make_optimizers is not None:
        hooks["optimizers"] = make_optimizers(model)
    else:
        hooks["optimizer_cls_and_kwargs"] = (optimizer_cls, dict(kwargs))
    trainer = RecordingTrainer(model=model, args=arguments(out, save),
                               train_dataset=Arithmetic(), **hooks)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tandem.torch.TandemWarning)  # no rebind, no skip
        trainer.train(resume_from_checkpoint=resume)
    return trainer


def single_group(cls, **options):
    """The ``optimizers=`` hook: one group with weight decay, a linear schedule."""
    def make(model):
        opt = cls(model.named_parameters(), weight_decay=WEIGHT_DECAY, **ADAM, **options)
        return opt, transformers.get_linear_schedule_with_warmup(opt, 2, STEPS)
    return make


def weights(trainer):
    return [p.detach().clone() for p in trainer.model.parameters()]


def max_rel_diff(a, b):
    return max(((x - y).abs().max() / x.abs().max()).item() for x, y in zip(a, b))


def rel_loss_diff(a, b):
    assert len(a) == len(b) == STEPS
    return max(abs(x - y) / abs(x) for x, y in zip(a, b))


def tandem_of(trainer):
    opt = trainer.optimizer
    opt = getattr(opt, "optimizer", opt)  # Accelerate's AcceleratedOptimizer wraps it
    assert isinstance(opt, tandem.torch.AdamW)
    return opt


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every Trainer run the tests compare, made once."""
    tmp = tmp_path_factory.mktemp("trainer")
    r = {}
    torch_kwargs = dict(ADAM, foreach=False)
    r["torch_cls"] = run(tmp / "torch_cls", torch.optim.AdamW, torch_kwargs)
    r["tandem_cls"] = run(tmp / "tandem_cls", tandem.torch.AdamW, ADAM, save=True)
    r["tandem_cls_q"] = run(tmp / "tandem_cls_q", tandem.torch.AdamW, dict(ADAM, **QUANTIZED),
                            save=True)
    r["torch_opt"] = run(tmp / "torch_opt",
                         make_optimizers=single_group(torch.optim.AdamW, foreach=False))
    r["tandem_opt"] = run(tmp / "tandem_opt", make_optimizers=single_group(tandem.torch.AdamW),
                          save=True)
    r["tmp"] = tmp
    return r


def test_losses_decrease(runs):
    for name in ("torch_cls", "tandem_cls", "tandem_cls_q", "tandem_opt"):
        losses = runs[name].losses
        assert len(losses) == STEPS and losses[-1] < losses[0] - 0.3, (name, losses)


def test_optimizer_cls_and_kwargs_matches_torch_adamw(runs):
    ours, ref = runs["tandem_cls"], runs["torch_cls"]
    opt = tandem_of(ours)
    # The Trainer's two groups (weight decay, and none for norms and biases) reached the
    # engine, and every parameter was stepped at every step.
    assert [g["weight_decay"] for g in opt.param_groups] == [WEIGHT_DECAY, 0.0]
    assert opt.tensor_step_counts() == [STEPS] * len(opt.param_names)
    assert opt.rebinds == 0 and opt.skipped_steps == 0
    assert rel_loss_diff(ours.losses, ref.losses) < 1e-5
    assert max_rel_diff(weights(ours), weights(ref)) < 1e-5


def test_optimizers_hook_matches_torch_adamw(runs):
    ours, ref = runs["tandem_opt"], runs["torch_opt"]
    opt = tandem_of(ours)
    assert opt.param_names[0] == "model.embed_tokens.weight"  # named_parameters()
    # The scheduler given to the Trainer drove the engine's lr: linear decay to 0.
    assert opt.param_groups[0]["lr"] == 0.0
    assert rel_loss_diff(ours.losses, ref.losses) < 1e-5
    assert max_rel_diff(weights(ours), weights(ref)) < 1e-5


def test_quantized_state_follows_torch_adamw_loosely(runs):
    ours, ref = runs["tandem_cls_q"], runs["torch_cls"]
    assert tandem_of(ours)._core.formats == ("bf16+ecc8", "q8", "q8")
    # bf16+ecc8 masters (~16 significant bits) and q8 moments: close, not equal.
    diff = rel_loss_diff(ours.losses, ref.losses)
    assert 0 < diff < 1e-2
    assert max_rel_diff(weights(ours), weights(ref)) < 5e-2


@pytest.mark.parametrize("name, quantized", [("tandem_cls_q", True), ("tandem_opt", False)])
def test_resume_from_checkpoint_continues_identically(runs, name, quantized):
    uninterrupted = runs[name]
    checkpoint = runs["tmp"] / name / ("checkpoint-%d" % SAVE_AT)
    saved = torch.load(checkpoint / "optimizer.pt", weights_only=True)
    assert saved["tandem"]["step"] == SAVE_AT  # Tandem's own state dict
    out = runs["tmp"] / (name + "_resumed")
    if name == "tandem_opt":
        resumed = run(out, make_optimizers=single_group(tandem.torch.AdamW),
                      resume=str(checkpoint))
    else:
        resumed = run(out, tandem.torch.AdamW, dict(ADAM, **QUANTIZED), resume=str(checkpoint))
    opt = tandem_of(resumed)
    assert opt._core.formats == (("bf16+ecc8", "q8", "q8") if quantized else ("f32", "f32", "f32"))
    # Steps SAVE_AT+1 .. STEPS: the same losses and weights, bit for bit.
    assert resumed.losses == uninterrupted.losses[SAVE_AT:]
    assert all(torch.equal(a, b) for a, b in zip(weights(resumed), weights(uninterrupted)))
    assert opt.tensor_step_counts() == tandem_of(uninterrupted).tensor_step_counts()
    assert opt.rebinds == 0


def test_example_runs():
    # examples/hf_trainer.py, as docs/huggingface.md shows it (fewer steps).
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    out = subprocess.run([sys.executable, EXAMPLE, "--steps", "6"], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "tandem.torch.AdamW" in out.stdout and "max relative difference" in out.stdout


def doc_examples():
    with open(DOC) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


@pytest.mark.parametrize("index", range(3))
def test_doc_example_runs(index, tmp_path):
    # Each ```python block of docs/huggingface.md, as it is, in a fresh process.
    blocks = doc_examples()
    assert len(blocks) == 3  # keep the parametrisation in step with the page
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(  # absolute: the block runs in tmp_path
        os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)
    out = subprocess.run([sys.executable, "-c", blocks[index]], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
