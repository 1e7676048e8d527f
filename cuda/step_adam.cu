// Instances of the fused step for Adam and AdamW: 4 master x 2 momentum x 2 variance.
#include "cuda/step_kernel.cuh"

namespace tandem::gpu::detail {
namespace {

template <MasterFormat kMaster>
LaunchFn ForMaster(MomentFormat mom, MomentFormat var) {
  using MF = MomentFormat;
  if (mom == MF::kF32)
    return var == MF::kF32 ? &LaunchFused<Kind::kAdam, kMaster, MF::kF32, MF::kF32>
                           : &LaunchFused<Kind::kAdam, kMaster, MF::kF32, MF::kQ8>;
  return var == MF::kF32 ? &LaunchFused<Kind::kAdam, kMaster, MF::kQ8, MF::kF32>
                         : &LaunchFused<Kind::kAdam, kMaster, MF::kQ8, MF::kQ8>;
}

}  // namespace

LaunchFn AdamLauncher(MasterFormat master, MomentFormat mom, MomentFormat var) {
  switch (master) {
    case MasterFormat::kF32:
      return ForMaster<MasterFormat::kF32>(mom, var);
    case MasterFormat::kBF16:
      return ForMaster<MasterFormat::kBF16>(mom, var);
    case MasterFormat::kBF16Ecc8:
      return ForMaster<MasterFormat::kBF16Ecc8>(mom, var);
    case MasterFormat::kBF16Ecc16:
      return ForMaster<MasterFormat::kBF16Ecc16>(mom, var);
  }
  return nullptr;
}

}  // namespace tandem::gpu::detail
