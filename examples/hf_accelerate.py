"""Accelerate with tandem.torch, the optimizer built before the model reaches its device:
``accelerator.prepare`` in either order, against the same loop with torch.optim.AdamW
(docs/huggingface.md).

    python3 examples/hf_accelerate.py                  # CPU
    python3 examples/hf_accelerate.py --device cuda    # prepare moves the model to the GPU

Prints the losses of the three runs and how often the optimizer rebound its engine to
the moved parameters (once per run on a GPU, none on the CPU).
"""

import argparse
import importlib.util
import os

import torch

import tandem.torch

_spec = importlib.util.spec_from_file_location(
    "hf_trainer_example", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       "hf_trainer.py"))
_example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_example)  # the tiny Llama and the data of hf_trainer.py
tiny_llama, Arithmetic, FORMATS = _example.tiny_llama, _example.Arithmetic, _example.FORMATS
transformers = _example.transformers


def run(make_optimizer, order, args):
    import accelerate
    accelerator = accelerate.Accelerator(cpu=args.device == "cpu")
    model = tiny_llama()  # on the CPU: prepare moves it
    opt = make_optimizer(model)
    data = torch.utils.data.DataLoader(Arithmetic(), batch_size=8)
    if order == "model, optimizer":
        model, opt, data = accelerator.prepare(model, opt, data)
    else:
        opt, model, data = accelerator.prepare(opt, model, data)
    losses = []
    for step, batch in zip(range(args.steps), data):
        loss = model(**batch).loss
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    inner = opt.optimizer
    return losses, getattr(inner, "rebinds", 0), str(next(model.parameters()).device)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--formats", choices=sorted(FORMATS), default="f32")
    args = ap.parse_args()
    transformers.logging.set_verbosity_error()
    adam = dict(lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    runs = {"torch.optim.AdamW": run(lambda m: torch.optim.AdamW(m.parameters(), **adam),
                                     "model, optimizer", args)}
    for order in ("model, optimizer", "optimizer, model"):
        runs["tandem, prepare(%s)" % order] = run(
            lambda m: tandem.torch.AdamW(m.named_parameters(), offload_fraction=0.5,
                                         **adam, **FORMATS[args.formats]), order, args)
    names = list(runs)
    print("tiny Llama, %d steps, Accelerate on %s, tandem formats %s"
          % (args.steps, runs[names[0]][2], args.formats))
    print("%4s" % "step" + "".join("  %28s" % n for n in names))
    for i in range(args.steps):
        print("%4d" % (i + 1) + "".join("  %28.6f" % runs[n][0][i] for n in names))
    ref = runs[names[0]][0]
    for n in names[1:]:
        diff = max(abs(a - b) / abs(a) for a, b in zip(ref, runs[n][0]))
        print("%s: max relative loss difference %.3g, rebinds %d" % (n, diff, runs[n][1]))


if __name__ == "__main__":
    main()
