// RankCpus: this rank's share of the node's cores (include/tandem/node.h states the
// policy). The topology comes from hwloc; the split itself (SplitCores) is plain code
// over a list of cores, so a synthetic topology tests exactly what a real one runs.
#include <hwloc.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cpu_simd/cpu_pinning.h"
#include "tandem/error.h"
#include "tandem/node.h"

namespace tandem {
namespace {

// One physical core: its allowed PUs (os indexes, ascending) and its NUMA node (-1: none).
struct Core {
  std::vector<int> pus;
  int numa = -1;
};

class Topology {
 public:
  // synthetic empty: this machine, with I/O discovery (PCI devices) when `io`.
  Topology(const std::string& synthetic, bool io) {
    if (hwloc_topology_init(&topo_) != 0)
      throw Error(ErrorKind::kInternal, "hwloc_topology_init failed");
    if (!synthetic.empty() && hwloc_topology_set_synthetic(topo_, synthetic.c_str()) != 0) {
      hwloc_topology_destroy(topo_);
      throw Error(ErrorKind::kInvalidArgument,
                  "synthetic topology '" + synthetic + "' is not valid for hwloc");
    }
    if (io) hwloc_topology_set_io_types_filter(topo_, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(topo_) != 0) {
      hwloc_topology_destroy(topo_);
      throw Error(ErrorKind::kInternal, "hwloc_topology_load failed");
    }
  }
  ~Topology() { hwloc_topology_destroy(topo_); }
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  hwloc_topology_t get() const { return topo_; }

 private:
  hwloc_topology_t topo_ = nullptr;
};

int NumaOf(hwloc_topology_t topo, hwloc_const_cpuset_t cpus) {
  const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t node = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    if (node->cpuset != nullptr && !hwloc_bitmap_iszero(cpus) &&
        hwloc_bitmap_isincluded(cpus, node->cpuset))
      return static_cast<int>(node->os_index);
  }
  return -1;
}

// The cores with at least one allowed PU, in hwloc's logical order (a topology without
// Core objects: each PU is a core).
std::vector<Core> AllowedCores(hwloc_topology_t topo, const std::vector<int>& allowed) {
  hwloc_obj_type_t type = HWLOC_OBJ_CORE;
  if (hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE) <= 0) type = HWLOC_OBJ_PU;
  std::vector<Core> cores;
  const int n = hwloc_get_nbobjs_by_type(topo, type);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topo, type, i);
    Core c;
    int pu = -1;
    while ((pu = hwloc_bitmap_next(obj->cpuset, pu)) != -1)
      if (allowed.empty() || std::binary_search(allowed.begin(), allowed.end(), pu))
        c.pus.push_back(pu);
    if (c.pus.empty()) continue;
    c.numa = NumaOf(topo, obj->cpuset);
    cores.push_back(std::move(c));
  }
  return cores;
}

void CheckRanks(int local_rank, int local_world_size) {
  if (local_world_size < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "local_world_size must be >= 1, got " + std::to_string(local_world_size));
  if (local_rank < 0 || local_rank >= local_world_size)
    throw Error(ErrorKind::kInvalidArgument, "local_rank must be in [0, " +
                                                 std::to_string(local_world_size) + "), got " +
                                                 std::to_string(local_rank));
}

// Block `index` of `count` contiguous, even blocks of `cores` (or core index mod size when
// there are fewer cores than blocks), as sorted PU ids.
std::vector<int> Block(const std::vector<const Core*>& cores, int index, int count) {
  const size_t n = cores.size();
  size_t begin, end;
  if (n < static_cast<size_t>(count)) {
    begin = static_cast<size_t>(index) % n;
    end = begin + 1;
  } else {
    begin = n * static_cast<size_t>(index) / static_cast<size_t>(count);
    end = n * (static_cast<size_t>(index) + 1) / static_cast<size_t>(count);
  }
  std::vector<int> pus;
  for (size_t i = begin; i < end; ++i)
    pus.insert(pus.end(), cores[i]->pus.begin(), cores[i]->pus.end());
  std::sort(pus.begin(), pus.end());
  return pus;
}

std::vector<int> SplitCores(const std::vector<Core>& cores, std::vector<int> rank_numa,
                            int local_rank, int local_world_size) {
  if (cores.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "RankCpus: none of the allowed CPUs belongs to a core of the topology");
  if (rank_numa.empty()) rank_numa.assign(static_cast<size_t>(local_world_size), -1);
  // NUMA-local split only when every rank's node is known and has a core per rank.
  bool local = true;
  std::map<int, int> ranks_on, cores_on;
  for (int node : rank_numa) {
    if (node < 0) local = false;
    ++ranks_on[node];
  }
  for (const Core& c : cores) ++cores_on[c.numa];
  for (const auto& [node, ranks] : ranks_on)
    if (cores_on[node] < ranks) local = false;
  std::vector<const Core*> group;
  int index = local_rank, count = local_world_size;
  if (local) {
    const int node = rank_numa[static_cast<size_t>(local_rank)];
    for (const Core& c : cores)
      if (c.numa == node) group.push_back(&c);
    index = static_cast<int>(std::count(rank_numa.begin(), rank_numa.begin() + local_rank, node));
    count = ranks_on[node];
  } else {
    for (const Core& c : cores) group.push_back(&c);
  }
  return Block(group, index, count);
}

}  // namespace

std::vector<int> RankCpusOnTopology(const std::string& synthetic,
                                    const std::vector<int>& allowed_cpus,
                                    const std::vector<int>& rank_numa_nodes, int local_rank,
                                    int local_world_size) {
  if (synthetic.empty())
    throw Error(ErrorKind::kInvalidArgument, "RankCpusOnTopology: the synthetic topology is empty");
  if (!rank_numa_nodes.empty()) local_world_size = static_cast<int>(rank_numa_nodes.size());
  CheckRanks(local_rank, local_world_size);
  std::vector<int> allowed = allowed_cpus;
  std::sort(allowed.begin(), allowed.end());
  Topology topo(synthetic, /*io=*/false);
  return SplitCores(AllowedCores(topo.get(), allowed), rank_numa_nodes, local_rank,
                    local_world_size);
}

std::vector<int> RankCpus(int local_rank, int local_world_size,
                          const std::vector<std::string>& gpu_pci_bus_ids) {
  CheckRanks(local_rank, local_world_size);
  if (!gpu_pci_bus_ids.empty() && gpu_pci_bus_ids.size() != static_cast<size_t>(local_world_size))
    throw Error(ErrorKind::kInvalidArgument,
                "RankCpus: gpu_pci_bus_ids has " + std::to_string(gpu_pci_bus_ids.size()) +
                    " entries for a local world of " + std::to_string(local_world_size) +
                    " ranks (one per rank, or none)");
  Topology topo("", /*io=*/!gpu_pci_bus_ids.empty());
  std::vector<int> allowed;
  hwloc_const_cpuset_t topo_allowed = hwloc_topology_get_allowed_cpuset(topo.get());
  for (int c : cpu::ProcessCpus())
    if (hwloc_bitmap_isset(topo_allowed, static_cast<unsigned>(c))) allowed.push_back(c);
  if (allowed.empty()) allowed = cpu::ProcessCpus();
  std::vector<int> rank_numa;
  for (const std::string& id : gpu_pci_bus_ids) {
    int node = -1;
    if (!id.empty()) {
      hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(topo.get(), id.c_str());
      hwloc_obj_t anc = dev != nullptr ? hwloc_get_non_io_ancestor_obj(topo.get(), dev) : nullptr;
      if (anc != nullptr && anc->cpuset != nullptr) node = NumaOf(topo.get(), anc->cpuset);
    }
    rank_numa.push_back(node);
  }
  return SplitCores(AllowedCores(topo.get(), allowed), rank_numa, local_rank, local_world_size);
}

}  // namespace tandem
