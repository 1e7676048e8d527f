"""transformers.Trainer with tandem.torch.AdamW, against torch.optim.AdamW.

    PYTHONPATH=build/python python3 examples/hf_trainer.py [--device cpu|cuda]
        [--steps N] [--formats f32|quantized] [--offload-fraction F]

Trains a tiny Llama (random weights from LlamaConfig: nothing is downloaded) on a
synthetic dataset twice with the same seed, data and schedule: once with
torch.optim.AdamW, once with tandem.torch.AdamW given to the Trainer through
``optimizer_cls_and_kwargs`` (docs/huggingface.md). Prints both losses at every step and
their largest relative difference: rounding (about 1e-7) with fp32 state, about 1e-4 with
bf16+ecc8 masters and q8 moments. Needs a current PyTorch with transformers and
accelerate (scripts/make-torch-venv.sh); a few seconds on a CPU.
"""

import argparse
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the Hub

import torch  # noqa: E402
import transformers  # noqa: E402

import tandem.torch  # noqa: E402

FORMATS = {
    "f32": {},
    "quantized": dict(master_format="bf16+ecc8", momentum_format="q8", variance_format="q8"),
}


def tiny_llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
    return transformers.LlamaForCausalLM(config)


class Arithmetic(torch.utils.data.Dataset):
    """Sequences t, t+3, t+6, ... (mod 128)."""

    def __init__(self, n=64, length=16):
        g = torch.Generator().manual_seed(1)
        start = torch.randint(0, 128, (n, 1), generator=g)
        self.ids = (start + 3 * torch.arange(length)) % 128

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class LossTrainer(transformers.Trainer):
    """Keeps each step's loss unrounded (the Trainer's log rounds it)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.losses = []

    def training_step(self, *args, **kwargs):
        loss = super().training_step(*args, **kwargs)
        self.losses.append(loss.item())
        return loss


def train(optimizer_cls, optimizer_kwargs, args):
    with tempfile.TemporaryDirectory() as out:
        training_args = transformers.TrainingArguments(
            output_dir=out, max_steps=args.steps, per_device_train_batch_size=8,
            learning_rate=3e-3, weight_decay=0.1, lr_scheduler_type="linear",
            warmup_steps=2, save_strategy="no", report_to=[],
            use_cpu=args.device == "cpu", seed=0, disable_tqdm=True)
        trainer = LossTrainer(model=tiny_llama(), args=training_args,
                              train_dataset=Arithmetic(),
                              optimizer_cls_and_kwargs=(optimizer_cls, optimizer_kwargs))
        trainer.remove_callback(transformers.PrinterCallback)  # the table below instead
        trainer.train()
        return trainer


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--formats", choices=sorted(FORMATS), default="f32")
    parser.add_argument("--offload-fraction", type=float, default=0.5,
                        help="Tandem's offload_fraction (host mode runs the same offload "
                        "pipeline over host memory)")
    args = parser.parse_args()
    transformers.logging.set_verbosity_error()

    adam = dict(lr=3e-3, betas=(0.9, 0.999), eps=1e-8)
    reference = train(torch.optim.AdamW, dict(adam, foreach=False), args)
    ours = train(tandem.torch.AdamW,
                 dict(adam, offload_fraction=args.offload_fraction, **FORMATS[args.formats]),
                 args)
    opt = ours.optimizer.optimizer  # inside Accelerate's AcceleratedOptimizer
    print("tiny Llama, %d steps on %s; tandem.torch.AdamW (%s mode, formats %s, offload "
          "fraction %g) vs torch.optim.AdamW"
          % (args.steps, args.device, opt.mode, args.formats, args.offload_fraction))
    print("%4s  %12s  %12s" % ("step", "torch", "tandem"))
    for step, (a, b) in enumerate(zip(reference.losses, ours.losses), 1):
        print("%4d  %12.6f  %12.6f" % (step, a, b))
    diff = max(abs(a - b) / abs(a) for a, b in zip(reference.losses, ours.losses))
    print("max relative difference of the losses: %.3g (rebinds: %d)" % (diff, opt.rebinds))


if __name__ == "__main__":
    main()
