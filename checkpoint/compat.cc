// CheckCompatible: structural comparison of a loaded snapshot with the optimizer's layout.
#include <string>
#include <vector>

#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace tandem {
namespace {

[[noreturn]] void Mismatch(const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "checkpoint does not match the optimizer: " + what);
}

std::string Both(const std::string& a, const std::string& b) {
  return "checkpoint has " + a + ", optimizer has " + b;
}

std::string ShapeText(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

void CheckCompatible(const OptimizerSnapshot& loaded, const OptimizerSnapshot& layout) {
  if (loaded.algo != layout.algo)
    Mismatch("algorithm: " + Both(Name(loaded.algo), Name(layout.algo)));
  if (!(loaded.formats == layout.formats))
    Mismatch("state formats: " + Both(Name(loaded.formats), Name(layout.formats)));
  if (loaded.groups.size() != layout.groups.size())
    Mismatch("parameter group count: " + Both(std::to_string(loaded.groups.size()),
                                              std::to_string(layout.groups.size())));
  if (loaded.tensors.size() != layout.tensors.size())
    Mismatch("tensor count: " + Both(std::to_string(loaded.tensors.size()),
                                     std::to_string(layout.tensors.size())));
  for (size_t i = 0; i < loaded.tensors.size(); ++i) {
    const TensorSnapshot& a = loaded.tensors[i];
    const TensorSnapshot& b = layout.tensors[i];
    const std::string t = "tensor " + std::to_string(i);
    if (a.name != b.name) Mismatch(t + " name: " + Both("'" + a.name + "'", "'" + b.name + "'"));
    const std::string tn = t + " ('" + a.name + "') ";
    if (a.numel != b.numel)
      Mismatch(tn + "numel: " + Both(std::to_string(a.numel), std::to_string(b.numel)));
    if (!a.shape.empty() && !b.shape.empty() && a.shape != b.shape)
      Mismatch(tn + "shape: " + Both(ShapeText(a.shape), ShapeText(b.shape)));
    if (a.param_dtype != b.param_dtype)
      Mismatch(tn + "param dtype: " + Both(Name(a.param_dtype), Name(b.param_dtype)));
    if (a.grad_dtype != b.grad_dtype)
      Mismatch(tn + "grad dtype: " + Both(Name(a.grad_dtype), Name(b.grad_dtype)));
    if (a.group != b.group)
      Mismatch(tn + "group: " + Both(std::to_string(a.group), std::to_string(b.group)));
    if (!(a.formats == b.formats))
      Mismatch(tn + "state formats: " + Both(Name(a.formats), Name(b.formats)));
  }
}

}  // namespace tandem
