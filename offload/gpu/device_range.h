// How many bytes of a device allocation lie at and after a pointer: lets the optimizer
// reject a tensor whose numel and dtype promise more memory than its buffer has, in GPU
// mode, before any kernel reads or writes past the end.
#pragma once

#include <cstdint>
#include <optional>

namespace tandem::offload {

// Bytes from `p` to the end of the device allocation that contains it, as the CUDA driver
// reports that allocation (cuMemGetAddressRange). nullopt where the driver cannot tell
// (no driver entry point, or memory it does not track as one allocation, such as some
// pool or virtual-memory mappings): the caller then skips the check. Never throws.
std::optional<uint64_t> DeviceBytesFrom(const void* p) noexcept;

}  // namespace tandem::offload
