// tandem-bench calibrate --ranks N: the figures of N ranks of one node measured at once
// (Note [The node is one machine] in tandem/compute_split.h). Each rank is a thread on its
// own share of the host's CPUs (tandem::RankCpus, as torchrun's ranks get them) and, when
// there is one GPU per rank, its own GPU; every rank runs the same measurement at the same
// time, and a rank that finishes its timed part keeps the load running until every rank
// has finished, so no rank is timed on a quieter machine than the others.
//
// Measured, per rank (the profile keeps the slowest rank's, Profile::Node):
//   host kernels        each calibration case's host step rate, every rank stepping
//   PCIe (GPU per rank) each direction with the other busy, every GPU copying both ways;
//                       their sum over the ranks is the host DRAM traffic every rank's DMA
//                       shares (Profile::Host::dram_gbps)
//   host under DMA      the host step rate while every rank's GPU copies both ways
// With fewer GPUs than ranks (or none, or --host-only) only the host kernels are measured
// at once; MeasureNode says why in `no_gpu_reason`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tandem/planner.h"

namespace tandem::bench {

// One figure of every rank.
struct RankFigures {
  std::string name, unit;
  std::vector<double> per_rank;
  double slowest() const;  // the smallest value
  double sum() const;
};

struct NodeMeasurement {
  planner::Profile::Node node;           // the slowest rank's figures
  double dma_gbps = 0;                   // every rank's PCIe both ways together; 0: none
  std::vector<std::vector<int>> cpus;    // each rank's host CPUs
  std::vector<RankFigures> figures;      // in the order measured, for the report
  std::string no_gpu_reason;             // why the PCIe figures are missing; empty: none
};

struct NodeOptions {
  int ranks = 2;                 // >= 1
  int gpus = 0;                  // devices to use, one per rank when >= ranks; else none
  std::string no_gpu_reason;     // said when gpus < ranks
  uint64_t host_elements = 0;    // per rank and host measurement
  int reps = 5;                  // timed steps or copies per figure (median)
  size_t pcie_bytes = size_t{256} << 20;
};

// Measures the node as NodeOptions says; `progress` gets each figure's name before it is
// measured. Throws what a rank's measurement threw (after every rank stopped), or
// Error(kInvalidArgument) for ranks < 1.
NodeMeasurement MeasureNode(const NodeOptions& o,
                            const std::function<void(const std::string&)>& progress);

}  // namespace tandem::bench
