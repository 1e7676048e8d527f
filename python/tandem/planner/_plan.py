"""tandem.plan, tandem.largest and tandem.machine_rates: the memory-budget planner
(tandem-plan) from Python, on a live module, a config, a preset name or a parameter count
(docs/planner.md "From Python"). It runs tandem-plan's own code in this process:
tandem._C.make_plan and find_largest take its options as a dict and return the plan as a
dict (python/ext/planner.h). It needs no torch unless given a module.
"""

import functools
import json
import math
import numbers
import os
import re
import tempfile

from tandem import _C

__all__ = ["plan", "Plan", "largest", "Largest", "machine_rates"]

_DTYPES = {"torch.float32": "f32", "torch.bfloat16": "bf16", "torch.float16": "f16"}


class _Answer:
    """What tandem-plan answered: ``text`` (the report, also str()), ``data`` (its --json
    as a dict) and ``args`` (the tandem-plan arguments that reproduce it)."""

    def __init__(self, text, data, args):
        self.text = text
        self.data = data
        self.args = args

    def __str__(self):
        return self.text


class Plan(_Answer):
    """tandem.plan's answer, and the figures of its recommended point."""

    @property
    def feasible(self):
        """Whether a point fits both budgets (tandem-plan's exit status 0)."""
        return bool(self.data.get("feasible"))

    @property
    def fraction(self):
        """The recommended offload fraction; None when the plan does not fit."""
        return self.data["recommended"]["fraction"] if self.feasible else None

    @property
    def grad_release(self):
        """Whether the recommended point releases gradients (grad_release= on or auto)."""
        return bool(self.data["recommended"].get("grad_release"))

    @property
    def iteration(self):
        """The recommended point's iteration (docs/planner.md "Iteration"): a dict of
        forward_ms, backward_ms, exposed_ms (the step after backward), iteration_ms,
        tokens_per_s, mfu and the rolled-back figures; None without ``seq=``."""
        return self.data["recommended"].get("iteration")

    @property
    def compute_share(self):
        """Of the recommended point's offloaded elements, the share computed on the GPU
        (their state streamed up and down); 0.0 when all are computed on the host."""
        return self.data["recommended"]["compute_split"]["share"]

    @property
    def optimizer_kwargs(self):
        """The keyword arguments of tandem.torch's ``optimizer_class`` that run the
        recommended point, to pass beside your own hyper-parameters
        (``tandem.torch.AdamW(params, lr=3e-4, **plan.optimizer_kwargs)``); None when the
        plan does not fit."""
        kwargs = self.data.get("optimizer_kwargs")
        return dict(kwargs) if kwargs is not None else None

    @property
    def optimizer_class(self):
        """The name of tandem.torch's optimizer class the plan is for ("AdamW", ...)."""
        return self.data.get("optimizer_class")

    def __repr__(self):
        return "<tandem.Plan %s>" % ("fits at offload fraction %g" % self.fraction
                                     if self.feasible else "does not fit")


def _size(value, name):
    if isinstance(value, bool) or value is None:
        raise ValueError("%s must be a size with a unit ('80GiB') or a number of bytes, "
                         "got %r" % (name, value))
    if isinstance(value, numbers.Integral):
        if value <= 0:
            raise ValueError("%s must be positive, got %d bytes" % (name, value))
        return "%dB" % value
    return str(value)


def _module_tensors(module):
    """The trainable parameters of a live module as tandem-plan's tensor list (global
    shapes for DTensors; a parameter shared by several names counted once)."""
    seen, out = set(), []
    for name, p in module.named_parameters():
        if id(p) in seen or not p.requires_grad:
            continue
        seen.add(id(p))
        dtype = _DTYPES.get(str(p.dtype))
        if dtype is None:
            raise ValueError("parameter %r has dtype %s; the planner knows float32, bfloat16 "
                             "and float16" % (name, p.dtype))
        out.append({"name": name, "shape": [int(d) for d in p.shape], "dtype": dtype})
    if not out:
        raise ValueError("the module has no trainable parameter")
    return out


_COUNT = re.compile(r"^\s*[0-9]*\.?[0-9]+([eE][+-]?[0-9]+)?\s*[kKmMbBgGtT]?\s*$")


@functools.lru_cache(maxsize=None)
def _plan_options():
    """The planner's option names (with underscores), flags and presets
    (tandem._C.plan_options)."""
    return _C.plan_options()


# The planner's options that plan()'s `model` sets, and those set by its own arguments or
# not taken.
_MODEL_OPTIONS = {"params", "config", "model", "params_json"}
_NOT_OPTIONS = _MODEL_OPTIONS | {"gpu_mem", "host_mem", "offload_compute", "largest"}


def _options():
    """The keyword options plan() takes."""
    return sorted(set(_plan_options()["names"]) - _NOT_OPTIONS)


def _pythonic(message):
    """A tandem-plan message in plan()'s terms: its options by their keyword names, and no
    word of a command line (--help) that Python does not have."""
    message = re.sub(r"\s*Run with --help for more information\.?", "", message).strip()
    message = re.sub(r"^tandem-plan:\s*", "", message)
    known = set(_plan_options()["names"]) | {"json", "svg", "help", "version"}

    def name(m):
        key = m.group(1).replace("-", "_")
        if key in _MODEL_OPTIONS:
            return "model"
        return key if key in known else m.group(0)
    return re.sub(r"--([a-z0-9][a-z0-9-]*)", name, message)


def _count(model):
    """A number of parameters given as a number: an int, or a float that is whole
    (8.03e9); ValueError naming the value otherwise."""
    if not (isinstance(model, numbers.Integral) or isinstance(model, numbers.Real)
            and math.isfinite(model) and float(model).is_integer()):
        raise ValueError("model: a parameter count must be a whole number, got %r" % (model,))
    n = int(model)
    if n <= 0:
        raise ValueError("model: a parameter count must be positive, got %r" % (model,))
    return {"params": str(n)}


_DTYPE_NAMES = {short: name[len("torch."):] for name, short in _DTYPES.items()}


def _config_dict(config):
    """A transformers PretrainedConfig (a module's .config) as a config.json dict, or None
    for anything else."""
    to_dict = getattr(config, "to_dict", None)
    if not callable(to_dict) or not hasattr(config, "model_type"):
        return None
    d = to_dict()
    return d if isinstance(d, dict) else None


def _config_dtype(config):
    """The dtype a transformers config says the model runs in ("bf16", ...), or None."""
    # transformers 5 names it dtype (torch_dtype, which it deprecates, before).
    value = getattr(config, "dtype" if hasattr(config, "dtype") else "torch_dtype", None)
    if value is None:
        return None
    text = str(value)
    return _DTYPES.get(text if text.startswith("torch.") else "torch." + text)


# Note [The dtype a module trains in]
# A module is often built in another dtype than it trains in: on the meta device (its
# parameters float32 until materialised), or in float32 and cast to its config's bfloat16
# before training. Planned in the wrong one, its weights, gradients and activations are
# off by a factor of two. The rule: an explicit param_dtype= wins; else a module whose
# parameters are all on the meta device is planned in its config's dtype (bf16 when the
# config names none), with a note; else in the module's own dtype, and where its config
# names another, the plan says so in one line with how to plan the other.


def _module_reading(module, options):
    """What plan() reads from a live module beside its parameters: planner options (the
    dtype it will train in, Note [The dtype a module trains in]; a transformers model's
    attention implementation and gradient checkpointing) and notes for the report. Options
    the caller gave win."""
    read, notes = {}, []
    config = getattr(module, "config", None)
    params = [p for p in module.parameters() if p.requires_grad]
    if "param_dtype" not in options and params:
        wanted = _config_dtype(config) if config is not None else None
        if all(p.device.type == "meta" for p in params):
            dtype = wanted or "bf16"
            read["param_dtype"] = dtype
            if "grad_dtype" not in options:
                read["grad_dtype"] = dtype
            notes.append("the module is on the meta device: planned in %s, %s; pass "
                         "param_dtype= for another" % (
                             _DTYPE_NAMES[dtype], "its config's dtype" if wanted
                             else "as its config names no dtype"))
        else:
            have = {_DTYPES.get(str(p.dtype)) for p in params}
            if len(have) == 1 and wanted is not None and wanted not in have:
                (own,) = have
                notes.append("the module is %s, its config %s: planned in %s; pass "
                             "param_dtype='%s' if you cast it before training" % (
                                 _DTYPE_NAMES[own], _DTYPE_NAMES[wanted], _DTYPE_NAMES[own],
                                 wanted))
    if config is not None:
        impl = getattr(config, "_attn_implementation", None)
        if impl == "eager" and "attention" not in options:
            read["attention"] = "eager"
        # transformers 5 names it is_activation_checkpointing (deprecating the other).
        checkpointing = getattr(module, "is_activation_checkpointing", None)
        if checkpointing is None:
            checkpointing = getattr(module, "is_gradient_checkpointing", False)
        if (checkpointing and "recompute" not in options
                and options.get("seq") and not options.get("activations")):
            read["recompute"] = "full"
    return read, notes


def _model_options(model, tmp):
    """The planner's model options for `model` (a module or a dict is written to a file in
    `tmp`)."""
    if isinstance(model, bool):
        raise ValueError("model must be a module, a config, a preset name or a count")
    if isinstance(model, numbers.Real):
        return _count(model)
    if isinstance(model, dict):
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(model, f)
        return {"config": path}
    if isinstance(model, (str, os.PathLike)):
        text, presets = os.fspath(model), _plan_options()["presets"]
        if os.path.exists(text):
            return {"config": text}
        if isinstance(model, str) and _COUNT.match(text):
            return {"params": text.strip()}  # "8B", "7.5e9"
        if isinstance(model, str) and text in presets:
            return {"model": text}
        what = ("a preset (%s), a parameter count such as '8B' or 8.03e9, a config dict, or "
                "an existing config.json or model directory" % ", ".join(presets))
        if (not isinstance(model, str) or os.sep in text or "/" in text
                or text.endswith(".json")):
            raise FileNotFoundError("model %r: no such file or directory (model is %s)"
                                    % (text, what))
        raise ValueError("model %r is not %s" % (text, what))
    if hasattr(model, "named_parameters"):
        path = os.path.join(tmp, "%s.params.json" % type(model).__name__)
        with open(path, "w") as f:
            json.dump(_module_tensors(model), f)
        found = {"params_json": path}
        config = _config_dict(getattr(model, "config", None))
        if config is not None:  # a transformers model: its shape from its own config
            if not config.get("architectures"):
                config["architectures"] = None  # the reader goes by model_type then
            path = os.path.join(tmp, "%s.config.json" % type(model).__name__)
            with open(path, "w") as f:
                json.dump(config, f, default=str)
            found["config"] = path
        return found
    config = getattr(model, "to_dict", None)  # a transformers PretrainedConfig
    if callable(config):
        return _model_options(config(), tmp)
    raise ValueError("model must be a torch module, a config (dict, PretrainedConfig, "
                     "config.json or model directory), a preset name or a parameter count, "
                     "got %s" % type(model).__name__)


def _offload_compute(value):
    """offload_compute as tandem-plan's text; tandem::ParseOffloadCompute checks it (this
    module imports no torch, so not tandem._core.options)."""
    if isinstance(value, bool) or value is None:
        raise ValueError('offload_compute must be "auto", "host", "gpu" or a share in '
                         '[0, 1], got %r' % (value,))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    return str(value)


def _given(options):
    """The keyword options the planner is given: None and False leave an option out (True
    sets a flag); grad_release True or False is "on" or "off"."""
    given = {}
    for key, value in options.items():
        if key == "grad_release" and isinstance(value, bool):
            value = "on" if value else "off"
        if value is not None and value is not False:
            given[key] = value
    return given


def _args(options):
    """The tandem-plan arguments that give the planner `options` (_given's; True: a flag;
    grad_release as --grad-release=VALUE)."""
    args = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if key == "grad_release":
            args.append("%s=%s" % (flag, value))
        else:
            args += [flag] if value is True else [flag, str(value)]
    return args


def _renamed(data, path, name):
    """The plan's JSON `data` with every `path` in its texts written `name`."""
    if isinstance(data, dict):
        return {k: _renamed(v, path, name) for k, v in data.items()}
    if isinstance(data, list):
        return [_renamed(v, path, name) for v in data]
    return data.replace(path, name) if isinstance(data, str) else data


def plan(model, *, gpu_mem, host_mem, offload_compute="auto", **options):
    """Plans the optimizer step of `model` on GPUs of `gpu_mem` and hosts of `host_mem`
    (sizes with a unit, e.g. "80GiB", or ints in bytes).

    `options` are tandem-plan's options with underscores: ``seq=4096, batch=1,
    recompute="full", fsdp2=True, gpus_per_node=8, shard_size=4, master="bf16+ecc8",
    m="q8", v="q8", headroom="10%", algo="adamw", speculative_early_start=True, ...``
    (True for a flag). ``offload_compute``: where the offloaded elements are computed,
    as ``OptimizerConfig::offload_compute``: "auto" (the modelled best split), "host",
    "gpu" or a share in [0, 1]. ``grad_release``: "auto" (the default: the plan picks),
    True / "on", False / "off". ``model`` may be a live module (for a transformers
    model, its config gives the shape, and its dtype, attention implementation and
    gradient checkpointing are read: docs/planner.md "From Python"), a config, a preset,
    or a parameter count as an int, a whole float (8.03e9) or a string ("8B", "7.5e9").

    Raises TypeError for an option plan() does not take (naming the ones it does),
    FileNotFoundError for a config path that does not exist, and ValueError with the
    planner's message, in plan()'s argument names, for bad values or inputs; a plan that
    does not fit is returned (``feasible`` False, the verdict in ``text``)."""
    for key in options:
        if key in ("json", "svg"):
            raise TypeError("plan() takes no %s option: a Plan has the JSON (.data) and the "
                            "text (str(plan)); tandem-plan --svg FILE writes the chart" % key)
        if key not in _options():
            raise TypeError("plan() got an unexpected keyword argument %r; its options are "
                            "%s" % (key, ", ".join(_options())))
    with tempfile.TemporaryDirectory(prefix="tandem-plan-") as tmp:
        given = _model_options(model, tmp)
        notes = []
        if hasattr(model, "named_parameters"):
            read, notes = _module_reading(model, options)
            given.update(read)
        given.update(gpu_mem=_size(gpu_mem, "gpu_mem"), host_mem=_size(host_mem, "host_mem"),
                      offload_compute=_offload_compute(offload_compute))
        given.update(_given(options))
        try:
            text, data = _answer(_C.make_plan, given)
        except ValueError as e:
            # A module of a family the planner does not read is planned from its
            # parameters alone; anything else is an error.
            unknown = re.search(r"unknown (?:architecture|model_type) '([^']*)'", str(e))
            if "config" not in given or "params_json" not in given or not unknown:
                raise
            del given["config"]
            notes.append("its config is not of a family the planner reads (%s): planned "
                         "from its parameters alone" % unknown.group(1))
            text, data = _answer(_C.make_plan, given)
        # The temporary file a module or dict was written to is gone after the call: the
        # report, the JSON and the arguments name it <Sequential.params.json>.
        args = _args(given)
        temporary = {a: "<%s>" % os.path.basename(a) for a in args if a.startswith(tmp)}
        for path, name in temporary.items():
            text, data = text.replace(path, name), _renamed(data, path, name)
        for note in notes:  # what plan() read from the module, after the planner's notes
            text += "note: %s\n" % note
            data["messages"].append("note: " + note)
        return Plan(text, data, [temporary.get(a, a) for a in args])


def _answer(run, options):
    """The planner's text report and JSON plan (a dict) from `run` (tandem._C.make_plan or
    find_largest) on `options`; status 1 (does not fit) is an answer, any other a
    ValueError with the planner's message."""
    answer = run(options)
    status = answer["status"]
    if status not in (0, 1):
        raise ValueError(_pythonic(answer.get("error", "")) or
                         "the planner failed (status %d)" % status)
    return answer["text"], answer["data"]


class Largest(_Answer):
    """tandem.largest's answer: ``best`` (the row of the largest model that fits) and
    ``plan`` (its plan as JSON), each None when none fits."""

    @property
    def best(self):
        name = self.data.get("best")
        return next((r for r in self.data["rows"] if r["shape"] == name), None)

    @property
    def plan(self):
        return self.data.get("plan")

    def __repr__(self):
        b = self.best
        return "<tandem.Largest %s>" % ("%s x %d layers, %.1fB" % (
            b["shape"], b["layers"], b["params"] / 1e9) if b else "nothing fits")


def largest(*, gpu_mem, host_mem, **options):
    """The largest Llama-3-shaped model that fits GPUs of `gpu_mem` and hosts of
    `host_mem` (tandem-plan --largest): per width of the Llama-3 family, the most layers
    that fit, and the plan of the largest. `options` as plan()'s (``fsdp2=True,
    gpus_per_node=4, nodes=2, seq=4096, recompute="full", grad_release="auto"``). Raises
    TypeError for an option it does not take and ValueError with the planner's message for
    bad values."""
    for key in options:
        if key != "offload_compute" and key not in _options():
            raise TypeError("largest() got an unexpected keyword argument %r; its options "
                            "are %s" % (key, ", ".join(_options() + ["offload_compute"])))
    given = {"gpu_mem": _size(gpu_mem, "gpu_mem"), "host_mem": _size(host_mem, "host_mem")}
    given.update(_given(options))
    text, data = _answer(_C.find_largest, given)
    return Largest(text, data, ["--largest"] + _args(given))


def machine_rates(profile=None, *, algorithm="adamw", master="bf16+ecc8", m="q8", v="q8",
                  grad_dtype="bf16", param_dtype="bf16", ranks=None):
    """The rates of the compute-split model (tandem::MachineRates) for these formats, from a
    calibration profile (``tandem-bench calibrate``; None: the built-in H200 reference),
    for one of `ranks` ranks of a node stepping at once (None: LOCAL_WORLD_SIZE, as torchrun
    sets it, else 1; Note [The node is one machine]): a dict ``{"h2d_gbps", "d2h_gbps",
    "host_gparams", "gpu_gparams"}``, what the optimizer's ``machine_rates`` takes. Each
    figure is the profile's measurement where it has one (``tandem-bench calibrate --ranks
    N`` measures N ranks at once), else derived as the planner derives it (docs/planner.md
    "Step time"). Raises ValueError naming the file or field at fault."""
    path = "" if profile is None else os.fspath(profile)
    if ranks is None:
        text = os.environ.get("LOCAL_WORLD_SIZE", "1")
        try:
            ranks = int(text)
        except ValueError:
            raise ValueError("LOCAL_WORLD_SIZE must be an integer, got %r" % text) from None
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ValueError("ranks must be an integer >= 1, got %r" % (ranks,))
    return _C.machine_rates_for(path, algorithm, master, m, v, grad_dtype, param_dtype, ranks)
