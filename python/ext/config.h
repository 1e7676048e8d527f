// tandem._C.OptimizerConfig and tandem._C.StepOptions: the engine's options bound as Python
// classes, declared once. Every field keeps the C++ default (include/tandem/optimizer.h)
// and is checked when set, in C++: an InvalidArgumentError (a ValueError) naming the
// field, the rule and the Python value, before anything is built. The engine checks the
// whole configuration again at construction (the C++ API's contract).
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "tandem/optimizer.h"

namespace tandem::python {

// HyperParams <-> dict with the C++ field names (lr_scale, beta1, beta2, eps,
// weight_decay, momentum, dampening, nesterov); an unknown key is kInvalidArgument.
HyperParams HyperParamsFromDict(const pybind11::dict& d);
pybind11::dict HyperParamsToDict(const HyperParams& h);

const char* ModeName(ExecutionMode m);

// MachineRates as Python sees them: None, or {h2d_gbps, d2h_gbps, host_gparams,
// gpu_gparams} (OptimizerConfig.machine_rates, tandem._C.rates_for, machine_rates_for).
pybind11::object RatesTo(const std::optional<MachineRates>& r);

// Sets the fields named by `kwargs` in `cfg`, in order, each checked; an unknown name is
// a TypeError naming it, as Python's own keyword arguments give.
void SetConfigFields(OptimizerConfig& cfg, const pybind11::kwargs& kwargs);

// StepOptions' Python-side values: the scalar options checked when set, and the
// per-call parts (active flags, the gradient-statistics callback, each group's
// hyper-parameters, each tensor's gradient pointer) kept as given, converted at the call.
struct PyStepOptions {
  double max_grad_norm = StepOptions{}.max_grad_norm;
  double loss_scale = StepOptions{}.loss_scale;
  pybind11::object active = pybind11::none();
  pybind11::object combine = pybind11::none();
  pybind11::object groups = pybind11::none();  // StepOptions::group_hyper: dicts or None
  pybind11::object grads = pybind11::none();   // StepOptions::grads: pointers or None
};

// A step's options: `options` (a StepOptions, or None for the defaults) with the fields
// named in `kwargs` set on a copy (max_grad_norm, loss_scale, active, combine, groups,
// grads), each checked; an unknown name is a TypeError.
PyStepOptions StepOptionsFrom(const pybind11::object& options, const pybind11::kwargs& kwargs);

// Adds OptimizerConfig and StepOptions to `m`.
void BindConfig(pybind11::module_& m);

}  // namespace tandem::python
