// tandem-bench calibrate --ranks N (node_calibrate.h): rank threads measuring at once.
#include "node_calibrate.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <exception>
#include <mutex>
#include <numeric>
#include <thread>

#include "background_load.h"
#include "measure.h"
#include "tandem/error.h"
#include "tandem/node.h"

namespace tandem::bench {

double RankFigures::slowest() const {
  return per_rank.empty() ? 0 : *std::min_element(per_rank.begin(), per_rank.end());
}

double RankFigures::sum() const { return std::accumulate(per_rank.begin(), per_rank.end(), 0.0); }

namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Keeps the calling thread on `cpus` (empty: as it is).
void Pin(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

// One measurement every rank runs at once. A rank's `run` times its part, then calls
// `finished()`, then keeps its load going while `busy()` (some rank still timing).
class AtOnce {
 public:
  explicit AtOnce(int ranks) : ranks_(ranks) {}
  void Finished() { ++finished_; }
  bool Busy() const { return finished_.load() < ranks_; }

 private:
  int ranks_;
  std::atomic<int> finished_{0};
};

// What one rank measures in one phase: a value per rank (or two, for PCIe).
using RankRun = std::function<std::vector<double>(int rank, AtOnce& at_once)>;

}  // namespace

NodeMeasurement MeasureNode(const NodeOptions& o,
                            const std::function<void(const std::string&)>& progress) {
  if (o.ranks < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "calibrate --ranks: at least 1 rank, got " + std::to_string(o.ranks));
  const int n = o.ranks;
  const bool gpu = o.gpus >= n;
  NodeMeasurement m;
  m.node.ranks = n;
  m.node.gpus = gpu ? n : 0;
  m.no_gpu_reason = gpu ? "" : o.no_gpu_reason;
  std::vector<std::string> bus_ids;
  if (gpu)
    for (int r = 0; r < n; ++r) bus_ids.push_back(GpuBusId(r));
  for (int r = 0; r < n; ++r) m.cpus.push_back(RankCpus(r, n, bus_ids));
  m.node.cpus_per_rank = static_cast<int>(m.cpus[0].size());
  for (const std::vector<int>& c : m.cpus)
    m.node.cpus_per_rank = std::min(m.node.cpus_per_rank, static_cast<int>(c.size()));

  // Runs `run` on every rank at once; its values per rank.
  auto phase = [&](const RankRun& run) {
    AtOnce at_once(n);
    std::barrier start(n);
    std::vector<std::vector<double>> values(n);
    std::mutex mu;
    std::exception_ptr error;
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        Pin(m.cpus[r]);
        start.arrive_and_wait();
        try {
          values[r] = run(r, at_once);
        } catch (...) {
          at_once.Finished();  // the others stop waiting for this rank
          std::lock_guard<std::mutex> lock(mu);
          if (!error) error = std::current_exception();
        }
      });
    for (std::thread& t : threads) t.join();
    if (error) std::rethrow_exception(error);
    return values;
  };
  auto record = [&](const std::string& name, const std::string& unit,
                    const std::vector<std::vector<double>>& values, size_t column) {
    RankFigures f{name, unit, {}};
    for (const std::vector<double>& v : values) f.per_rank.push_back(v.at(column));
    m.figures.push_back(f);
    return f;
  };
  // The median of `reps` steps of a host stepper, then steps while the others time.
  auto host_rate = [&](HostStepper& s, AtOnce& at_once) {
    std::vector<double> ms;
    for (int i = 0; i < o.reps + 1; ++i) {
      const double t = s.StepMs();
      if (i > 0) ms.push_back(t);
    }
    at_once.Finished();
    while (at_once.Busy()) s.StepMs();
    return static_cast<double>(s.elements()) / (Median(ms) * 1e6);
  };

  for (const KernelCase& c : CalibrationCases()) {
    const std::string key = planner::KernelKey(c.algo, c.formats, DType::kBF16);
    const std::string name = "host " + key + ", " + std::to_string(n) + " ranks at once";
    progress(name);
    const auto v = phase([&](int r, AtOnce& at_once) {
      HostStepper s(c, o.host_elements, 0, m.cpus[r]);
      return std::vector<double>{host_rate(s, at_once)};
    });
    m.node.host_kernels[key].gparams_per_s = record(name, "Gparam/s", v, 0).slowest();
  }
  if (!gpu) return m;

  progress("PCIe, every GPU both ways at once");
  const auto pcie = phase([&](int r, AtOnce& at_once) {
    PcieLoad load(r, o.pcie_bytes);
    load.Round();  // warm-up
    std::vector<double> up, down;
    for (int i = 0; i < o.reps; ++i) {
      up.push_back(load.TimedGbps(PcieDirection::kH2D));
      down.push_back(load.TimedGbps(PcieDirection::kD2H));
    }
    at_once.Finished();
    while (at_once.Busy()) load.Round();
    return std::vector<double>{Median(up), Median(down)};
  });
  const RankFigures up = record("PCIe H2D, D2H busy, every GPU at once", "GB/s", pcie, 0);
  const RankFigures down = record("PCIe D2H, H2D busy, every GPU at once", "GB/s", pcie, 1);
  m.node.h2d_concurrent_gbps = up.slowest();
  m.node.d2h_concurrent_gbps = down.slowest();
  m.dma_gbps = up.sum() + down.sum();

  for (const KernelCase& c : CalibrationCases()) {
    const std::string key = planner::KernelKey(c.algo, c.formats, DType::kBF16);
    const std::string name = "host under DMA load " + key + ", " + std::to_string(n) + " ranks";
    progress(name);
    const auto v = phase([&](int r, AtOnce& at_once) {
      PcieLoad pcie_load(r, o.pcie_bytes);
      tools::BackgroundLoad load([&] { pcie_load.Round(); });
      load.WaitForRounds(1);
      double rate = 0;
      try {
        HostStepper s(c, o.host_elements, 0, m.cpus[r]);
        rate = host_rate(s, at_once);
      } catch (...) {
        load.Stop();
        throw;
      }
      load.Stop();
      return std::vector<double>{rate};
    });
    m.node.host_kernels_under_dma[key].gparams_per_s = record(name, "Gparam/s", v, 0).slowest();
  }
  return m;
}

}  // namespace tandem::bench
