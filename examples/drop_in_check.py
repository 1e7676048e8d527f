"""Drop-in check: the training-loop traps of plain torch.optim code, run against
tandem.torch and torch.optim.AdamW side by side, at offload fractions 0, 0.5 and 1.

    PYTHONPATH=build/python python3 examples/drop_in_check.py [--device cpu|cuda]

Each row is one trap or finding (docs/python.md, "Semantics compared to torch.optim"):
what torch gives, what Tandem gives, and whether they agree. Exit status 0 when every row
passes. On the CPU the engine runs in host mode (the same pipeline over host memory); on
a GPU in GPU mode.
"""

import argparse
import copy
import math
import os
import sys
import tempfile
import threading
import warnings

import torch

import tandem.torch as tt

ROWS = []


def row(name, fraction, torch_value, tandem_value, ok):
    ROWS.append((name, fraction, torch_value, tandem_value, bool(ok)))


def model_for(device, dtype=torch.float32, seed=0):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    return m.to(device=device, dtype=dtype)


def batch(device, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(16, 64, generator=g).to(device, dtype),
            torch.randn(16, 8, generator=g).to(device, dtype))


def loss_of(m, x, y):
    return (m(x) - y).float().pow(2).mean()


def trap_weights_written_after_build(device, fraction):
    """Trap 1: model.load_state_dict after the optimizer is built."""
    for master, dtype in (("bf16+ecc8", torch.float32), ("f32", torch.bfloat16),
                          ("bf16+ecc16", torch.bfloat16), ("f32", torch.float32)):
        means = []
        for use_tandem in (False, True):
            m = model_for(device, dtype)
            opt = (tt.AdamW(m.parameters(), lr=1e-6, master_format=master,
                            offload_fraction=fraction) if use_tandem
                   else torch.optim.AdamW(m.parameters(), lr=1e-6))
            m.load_state_dict({k: torch.full_like(v, 0.5) for k, v in m.state_dict().items()})
            x, y = batch(device, dtype, 1)
            loss_of(m, x, y).backward()
            opt.step()
            means.append(m[0].weight.float().mean().item())
        row("weights loaded after build (%s master, %s params)"
            % (master, str(dtype).replace("torch.", "")), fraction,
            "%.7f" % means[0], "%.7f" % means[1], abs(means[0] - means[1]) < 1e-5)


def trap_missing_grads(device, fraction):
    """Trap 2: a parameter frozen after build; zero_grad(); step() with no backward."""
    m = model_for(device)
    opt = tt.AdamW(m.parameters(), lr=1e-2, offload_fraction=fraction)
    m[0].weight.requires_grad_(False)
    before = m[0].weight.detach().clone()
    x, y = batch(device, torch.float32, 2)
    opt.zero_grad()
    loss_of(m, x, y).backward()
    opt.step()
    moved = (m[0].weight - before).abs().max().item()
    row("frozen after build: max |change|", fraction, "0.0", "%g" % moved, moved == 0.0)
    snapshot = [p.detach().clone() for p in m.parameters()]
    opt.zero_grad()
    opt.step()
    moved = max((p - s).abs().max().item() for p, s in zip(m.parameters(), snapshot))
    row("zero_grad(); step(): max |change|", fraction, "0.0", "%g" % moved, moved == 0.0)


def train(m, opt, sched, steps, device, first=0):
    for t in range(first, first + steps):
        x, y = batch(device, torch.float32, 100 + t)
        opt.zero_grad()
        loss_of(m, x, y).backward()
        opt.step()
        sched.step()


def trap_resume_with_scheduler(device, fraction):
    """Trap 3: save_checkpoint/load_checkpoint in the middle of a cosine schedule."""
    def make():
        m = model_for(device, seed=3)
        opt = tt.AdamW(m.parameters(), lr=1e-2, offload_fraction=fraction,
                       master_format="bf16+ecc8", momentum_format="q8", variance_format="q8")
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
        return m, opt, sched
    m_a, opt_a, sched_a = make()
    train(m_a, opt_a, sched_a, 10, device)
    m_b, opt_b, sched_b = make()
    train(m_b, opt_b, sched_b, 5, device)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "run.tdm")
        opt_b.save_checkpoint(path)
        model_state = copy.deepcopy(m_b.state_dict())
        sched_state = sched_b.state_dict()
        m_c, opt_c, sched_c = make()
        m_c.load_state_dict(model_state)
        opt_c.load_checkpoint(path)
        sched_c.load_state_dict(sched_state)
    train(m_c, opt_c, sched_c, 5, device, first=5)
    diff = max((a - c).abs().max().item() for a, c in zip(m_a.parameters(), m_c.parameters()))
    row("resume from file mid-schedule: max |diff|", fraction, "0.0", "%g" % diff, diff == 0.0)


def trap_accumulation(device, fraction):
    """Trap 4: gradient accumulation with early start, plain and speculative."""
    def run(early, speculative, k):
        m = model_for(device, seed=4)
        opt = tt.AdamW(m.parameters(), lr=1e-2, offload_fraction=fraction, chunk_elements=1024,
                       early_start=early, speculative_early_start=speculative)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tt.EarlyStartAccumulationWarning)
            for step in range(3):
                opt.zero_grad()
                if speculative:
                    opt.begin_step()
                for b in range(k):
                    x, y = batch(device, torch.float32, 10 * step + b)
                    (loss_of(m, x, y) / k).backward()
                opt.step()
        return [p.detach().clone() for p in m.parameters()]
    for k in (1, 3):
        ref = run(False, False, k)
        for speculative in (False, True):
            got = run(True, speculative, k)
            diff = max((a - b).abs().max().item() for a, b in zip(ref, got))
            row("%d micro-batches, early start%s: max |diff|"
                % (k, " (speculative)" if speculative else ""), fraction, "0.0", "%g" % diff,
                diff == 0.0)


def trap_gradients_and_groups(device, fraction):
    """Trap 5: every gradient that is set is stepped; param_groups can change."""
    def run(use_tandem, loop):
        m = model_for(device, seed=5)
        opt = (tt.AdamW(m[0].parameters(), lr=1e-2, offload_fraction=fraction)
               if use_tandem else torch.optim.AdamW(m[0].parameters(), lr=1e-2))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", tt.RebindWarning)
            loop(m, opt)
        return [p.detach().clone() for p in m.parameters()]

    def twice(m, opt):  # step(); step(): the same gradient steps again
        for t in range(3):
            opt.zero_grad()
            loss_of(m, *batch(device, torch.float32, 30 + t)).backward()
            opt.step()
            opt.step()

    def swapped(m, opt):  # gradients of one shape trading places
        for t in range(3):
            opt.zero_grad()
            loss_of(m, *batch(device, torch.float32, 40 + t)).backward()
            w = m[0].weight
            w.grad = w.grad.t()
            opt.step()

    def added(m, opt):  # add_param_group after two steps (BackboneFinetuning)
        for t in range(4):
            if t == 2:
                opt.add_param_group({"params": list(m[2].parameters()), "lr": 1e-3})
            opt.zero_grad()
            loss_of(m, *batch(device, torch.float32, 50 + t)).backward()
            opt.step()

    for name, loop in (("step(); step() with one gradient", twice),
                       ("p.grad = p.grad.t() (square weight)", swapped),
                       ("add_param_group after two steps", added)):
        ref, got = run(False, loop), run(True, loop)
        diff = max(((a - b).abs().max() / a.abs().max().clamp_min(1e-30)).item()
                   for a, b in zip(ref, got))
        row("%s: max rel diff" % name, fraction, "0.0", "%.2g" % diff, diff < 1e-5)


def findings(device):
    """Independent trials' findings (fraction 0.5 where it matters)."""
    def raises(fn, exc, needle):
        try:
            fn()
        except exc as e:
            return needle in str(e), str(e).splitlines()[0][:60]
        return False, "no error"

    m = model_for(device)
    ok, msg = raises(lambda: tt.AdamW(m.parameters(), host_threads=100000), ValueError,
                     "host_threads")
    row("host_threads=100000", None, "-", msg, ok)
    ok, msg = raises(lambda: tt.AdamW([m[0].weight, m[0].weight]), ValueError, "")
    row("same tensor twice", None, "ValueError", msg, ok)
    ok, msg = raises(lambda: tt.AdamW(m.parameters(), lr=math.inf).step(), ValueError, "lr")
    row("lr=inf names the lr", None, "-", msg, ok)
    sgd = tt.SGD(m.parameters(), lr=1e-2, momentum=0.9, momentum_format="q8")
    row("SGD with q8 momentum", None, "-", sgd._core.formats[1],
        True)

    # A replaced gradient of another shape is refused, not read from freed memory.
    m = model_for(device)
    opt = tt.AdamW(m.parameters(), lr=1e-2, offload_fraction=0.5)
    x, y = batch(device, torch.float32, 5)
    loss_of(m, x, y).backward()
    m[0].weight.grad.data = torch.ones(3, device=device)
    ok, msg = raises(opt.step, ValueError, "")
    row("p.grad.data = other shape", None, "-", msg, ok)

    # A corrupt state dict is refused and changes nothing.
    m = model_for(device)
    opt = tt.AdamW(m.parameters(), lr=1e-2, offload_fraction=0.5)
    loss_of(m, x, y).backward()
    opt.step()
    sd = opt.state_dict()
    before = [p.detach().clone() for p in m.parameters()]
    bad = copy.deepcopy(sd)
    bad["tandem"]["ref_group"] = 7
    ok, msg = raises(lambda: opt.load_state_dict(bad), ValueError, "")
    same = all(torch.equal(a, b) for a, b in zip(before, m.parameters()))
    row("corrupt ref_group refused, nothing changed", None, "-", msg, ok and same)

    # state_dict from another thread while steps run: every snapshot is whole.
    errors = []

    def snapshots():
        for _ in range(20):
            s = opt.state_dict()
            steps = {int(e["step"]) for e in s["state"].values()}
            if len(steps) != 1:
                errors.append(steps)
    t = threading.Thread(target=snapshots)
    t.start()
    for i in range(20):
        xi, yi = batch(device, torch.float32, 200 + i)
        opt.zero_grad()
        loss_of(m, xi, yi).backward()
        opt.step()
    t.join()
    row("state_dict during step (20 x 20)", None, "-", "%d torn" % len(errors), not errors)

    # A non-finite gradient: skipped, counted, warned.
    opt.zero_grad()
    loss_of(m, x, y).backward()
    m[0].weight.grad[0, 0] = float("nan")
    before = [p.detach().clone() for p in m.parameters()]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        opt.step()
    same = all(torch.equal(a, b) for a, b in zip(before, m.parameters()))
    warned = any(issubclass(x.category, tt.SkippedStepWarning) for x in w)
    row("NaN gradient: skipped, counted, warned", None, "-",
        "skipped_steps=%d" % opt.skipped_steps, same and warned and opt.skipped_steps == 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    device = torch.device(args.device)
    for fraction in (0.0, 0.5, 1.0):
        trap_weights_written_after_build(device, fraction)
        trap_missing_grads(device, fraction)
        trap_resume_with_scheduler(device, fraction)
        trap_accumulation(device, fraction)
        trap_gradients_and_groups(device, fraction)
    findings(device)
    mode = "GPU mode (%s)" % torch.cuda.get_device_name(device) if device.type == "cuda" \
        else "host mode"
    print("tandem.torch drop-in check, %s, torch %s" % (mode, torch.__version__))
    print("%-64s %8s  %-14s %-40s %s" % ("check", "fraction", "torch.optim", "tandem", "ok"))
    for name, fraction, a, b, ok in ROWS:
        print("%-64s %8s  %-14s %-40s %s" % (name, "-" if fraction is None else fraction, a, b,
                                            "PASS" if ok else "FAIL"))
    failed = sum(1 for r in ROWS if not r[4])
    print("%d passed, %d failed" % (len(ROWS) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
