// One node, many ranks: which host CPUs and how much pinned memory each local rank's
// optimizer may use when several processes (one per GPU, e.g. under torchrun) share a
// node. docs/node_sharing.md explains the policy with an example.
//
//   tandem::OptimizerConfig cfg;
//   cfg.host_cpus = tandem::RankCpus(local_rank, local_world_size, gpu_bus_ids);
//   cfg.pinned_budget_bytes = tandem::PinnedBudget(local_world_size);
//
// The CPU split: the node's physical cores are taken in hwloc's logical order; a core
// counts when at least one of its hardware threads (PUs) is in the process's CPU affinity,
// and a rank gets *every* allowed PU of its cores, so SMT siblings are never split between
// ranks (host_threads = 0 then runs one thread per PU). When every rank's GPU has a known
// NUMA node, the ranks of one node split that node's cores into contiguous blocks as even
// as possible (sizes differ by at most one core), in rank order; otherwise (a GPU unknown,
// or a node with fewer allowed cores than ranks on it) all ranks split all allowed cores
// the same way. Every rank computes the same split from the same inputs, so the sets of
// different ranks are disjoint — unless there are more ranks than allowed cores: then
// rank r gets the one core r mod cores (shared by several ranks: a node that small cannot
// give every rank a core of its own).
//
// Thread safety: every function is thread-safe. Errors: tandem::Error(kInvalidArgument)
// naming the bad argument; Error(kInternal) when hwloc cannot load a topology.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

// This rank's CPUs (ascending logical CPU ids) on this machine. local_rank in
// [0, local_world_size). gpu_pci_bus_ids: the PCI bus id of each local rank's GPU
// ("0000:17:00.0" or "17:00.0", case-insensitive), indexed by local rank; empty (or any
// id that hwloc does not find, or "") means unknown: the ranks then split all cores of the
// process's affinity. A GPU's NUMA node is the NUMA node whose CPUs contain the CPUs
// local to its PCI device (hwloc I/O discovery).
std::vector<int> RankCpus(int local_rank, int local_world_size,
                          const std::vector<std::string>& gpu_pci_bus_ids = {});

// The same split on a synthetic hwloc topology (hwloc_topology_set_synthetic, e.g.
// "node:2 core:8 pu:2", whose PUs are numbered 0.. in order), for tests and planning.
// allowed_cpus: the process's affinity to assume (empty: every PU). rank_numa_nodes: the
// NUMA node (os index) of each local rank's GPU, -1 for unknown; empty: all unknown.
// Its size, when not empty, is the local world size; otherwise local_world_size is.
std::vector<int> RankCpusOnTopology(const std::string& synthetic,
                                    const std::vector<int>& allowed_cpus,
                                    const std::vector<int>& rank_numa_nodes, int local_rank,
                                    int local_world_size);

// The pinned-memory budget of the whole node, in bytes: the environment variable
// TANDEM_NODE_PINNED_BUDGET when set (a size, ParseByteSize), else half of MemTotal
// (/proc/meminfo; 0 when that cannot be read: no limit). Error(kInvalidArgument) for a
// malformed TANDEM_NODE_PINNED_BUDGET.
uint64_t NodePinnedBudget();

// One local rank's share: node_budget_bytes / local_world_size, rounded down
// (node_budget_bytes 0: NodePinnedBudget()). local_world_size >= 1. The shares of all
// local ranks add up to at most the node budget. Returns 0 (no limit) only when the node
// budget is unknown.
uint64_t PinnedBudget(int local_world_size, uint64_t node_budget_bytes = 0);

// "12345", "64GiB", "1.5 TiB", "200GB", "512MiB", "4k": a non-negative number with an
// optional unit: B; KiB, MiB, GiB, TiB (powers of 1024, also K, M, G, T); KB, MB, GB, TB
// (powers of 1000); case-insensitive, spaces allowed between number and unit; rounded
// down to whole bytes. Error(kInvalidArgument) naming the text otherwise (negative,
// unknown unit, or beyond 2^64 - 1).
uint64_t ParseByteSize(const std::string& text);

}  // namespace tandem
