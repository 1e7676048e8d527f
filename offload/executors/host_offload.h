// The host-offload executor (Note [Executors] in offload/executors/executor.h): the
// host-resident state the host computes and everything that steps it: its layout part
// and slab (pinned in GPU mode), the offload pipeline with its device and staging slots
// (offload/pipeline/pipeline.h), its chunks in backward order, early start's buffer and
// download tickets (GradReady), and the speculation's worker, backup and holding buffer
// (offload/speculation/speculator.h).
#pragma once

#include <memory>
#include <vector>

#include "engine/layout/memory_plan.h"
#include "offload/devices/stream_device.h"
#include "offload/executors/executor.h"
#include "tandem/faults.h"

namespace tandem::cpu {
class HostDriver;
}

namespace tandem::offload {

struct OffloadSetup {
  const std::vector<TensorSpec>* specs = nullptr;
  const std::vector<StateFormats>* formats = nullptr;  // per tensor
  const layout::MemoryPlan* plan = nullptr;  // its cold layout, staging, early and hold offsets
  const OptimizerConfig* config = nullptr;   // chunk_elements, speculation, threads, CPUs
  bool gpu = false;                          // state, staging and holding buffer pinned
  // Serving the copy queues (kCopyQueues) with the optimizer's FaultPlan: the CUDA device
  // (GPU mode) or the host device.
  std::unique_ptr<StreamDevice> device;
  cpu::HostDriver* driver = nullptr;  // the host kernels; outlives the executor
};

std::unique_ptr<Executor> MakeHostOffload(OffloadSetup setup);

}  // namespace tandem::offload
