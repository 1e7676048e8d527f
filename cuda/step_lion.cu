// Instances of the fused step for Lion: 4 master x 2 momentum formats.
#include "cuda/step_kernel.cuh"

namespace tandem::gpu::detail {
namespace {

template <MasterFormat kMaster>
LaunchFn ForMaster(MomentFormat mom) {
  using MF = MomentFormat;
  return mom == MF::kF32 ? &LaunchFused<Kind::kLion, kMaster, MF::kF32, MF::kF32>
                         : &LaunchFused<Kind::kLion, kMaster, MF::kQ8, MF::kF32>;
}

}  // namespace

LaunchFn LionLauncher(MasterFormat master, MomentFormat mom) {
  switch (master) {
    case MasterFormat::kF32:
      return ForMaster<MasterFormat::kF32>(mom);
    case MasterFormat::kBF16:
      return ForMaster<MasterFormat::kBF16>(mom);
    case MasterFormat::kBF16Ecc8:
      return ForMaster<MasterFormat::kBF16Ecc8>(mom);
    case MasterFormat::kBF16Ecc16:
      return ForMaster<MasterFormat::kBF16Ecc16>(mom);
  }
  return nullptr;
}

}  // namespace tandem::gpu::detail
