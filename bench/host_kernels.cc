// tandem-bench-host: throughput of the host step kernels against this machine's own
// memory bandwidth, measured in the same run with the same threads.
//
// For each thread count: a STREAM-like copy (b = a with streaming stores, counted
// 8 B/element: read + write)
// and triad (a = b + s c, 12 B/element), the plain auto-vectorised fp32 AdamW loop, then
// each kernel through HostDriver on one span of --size elements. Each figure is the median
// of --reps timed repetitions after --warmup untimed ones (steady clock). The roofline of
// a kernel is its minimal bytes per element (every array read once, every state array
// written once; see KernelBytes) moved at the copy bandwidth; "of roof" is the achieved
// fraction of it. After each thread count, "of best" gives every row's GB/s as a fraction
// of the best Tandem kernel of that thread count (not copy, triad or the naive loop: the
// in-place read-modify-write streams of the fp32 kernels usually beat the copy); at the
// end, for the largest thread count, one line per target kernel (kTargets) says whether
// it reaches its limit. Prints a table, optionally writes --json FILE.
#include <sys/mman.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/naive_adamw.h"
#include "cpu_simd/host_kernels.h"
#include "engine/fp_bits.h"
#include "engine/step_scalars.h"
#include "tandem/error.h"
#include "tandem/types.h"
#include "tandem/version.h"

namespace tandem::bench {
namespace {

using Clock = std::chrono::steady_clock;

// ---- memory ----

// Page-aligned, huge-page-advised, freed on destruction. Not zeroed: callers fill in
// parallel (first touch spreads pages the way the workers will use them).
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    const size_t align = size_t{2} << 20;
    const size_t rounded = (bytes + align - 1) / align * align;
    p_ = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    if (p_ == nullptr) {
      std::fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
      std::exit(2);
    }
    madvise(p_, rounded, MADV_HUGEPAGE);
  }
  ~Buffer() { std::free(p_); }
  Buffer(Buffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Runs body(begin, end) over [0, n) in the arena, in blocks of 64K elements.
void ParallelFor(tbb::task_arena& arena, size_t n,
                 const std::function<void(size_t, size_t)>& body) {
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, n, size_t{1} << 16),
        [&](const tbb::blocked_range<size_t>& r) { body(r.begin(), r.end()); },
        tbb::simple_partitioner());
  });
}

uint32_t Hash(size_t i) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  return static_cast<uint32_t>(x >> 32);
}

// A normal-range value in about +-[2^-12, 2^-8]: realistic gradients, no denormals.
float SmallValue(size_t i, int shift) {
  const uint32_t h = Hash(i + shift);
  const float mant = 1.0f + static_cast<float>(h & 0xFFFF) / 65536.0f;
  const float x = std::ldexp(mant, -12 + static_cast<int>((h >> 16) % 5));
  return (h >> 31) ? -x : x;
}

// Median (or, with --best, minimum) of `reps` timed runs after `warmup` untimed ones, in
// seconds. The minimum is for in-cache per-core figures on a shared, noisy machine.
bool g_best = false;
double MedianSeconds(int warmup, int reps, const std::function<void(int)>& run) {
  for (int i = 0; i < warmup; ++i) run(i);
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    run(warmup + i);
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return g_best ? t.front() : t[t.size() / 2];
}

// ---- kernels ----

enum class ParamMode { kNone, kSeparate, kAliasMaster };

struct KernelSpec {
  std::string name;
  Algorithm algo;
  HyperParams h;
  StateFormats f;
  DType grad;
  ParamMode param;
  DType param_dtype;
};

double MomentBytes(MomentFormat f) {
  return f == MomentFormat::kF32 ? 8.0 : 2.0 + 2.0 * 2.0 / kQuantGroup;
}

// Fewest bytes per element a step must move: gradient read; master, moments (and scales)
// read and written; the parameter written (nothing when it is the master's own bf16).
double KernelBytes(const KernelSpec& k) {
  double b = DTypeSize(k.grad);
  switch (k.f.master) {
    case MasterFormat::kF32:
      b += 8;
      break;
    case MasterFormat::kBF16:
      b += 4;
      break;
    case MasterFormat::kBF16Ecc8:
      b += 6;
      break;
    case MasterFormat::kBF16Ecc16:
      b += 8;
      break;
  }
  if (HasMomentum(k.algo, k.h)) b += MomentBytes(k.f.momentum);
  if (HasVariance(k.algo)) b += MomentBytes(k.f.variance);
  if (k.param == ParamMode::kSeparate) b += DTypeSize(k.param_dtype);
  return b;
}

std::vector<KernelSpec> AllKernels() {
  using MF = MasterFormat;
  using M = MomentFormat;
  HyperParams adam;
  adam.weight_decay = 0.01;
  HyperParams lion;
  lion.beta2 = 0.99;
  lion.weight_decay = 0.1;
  HyperParams sgd;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-4;
  return {
      {"adamw_f32_bf16g_bf16p",
       Algorithm::kAdamW,
       adam,
       {MF::kF32, M::kF32, M::kF32},
       DType::kBF16,
       ParamMode::kSeparate,
       DType::kBF16},
      {"adamw_ecc8_q8_q8_bf16g",
       Algorithm::kAdamW,
       adam,
       {MF::kBF16Ecc8, M::kQ8, M::kQ8},
       DType::kBF16,
       ParamMode::kAliasMaster,
       DType::kBF16},
      {"adamw_ecc16_q8_q8_bf16g",
       Algorithm::kAdamW,
       adam,
       {MF::kBF16Ecc16, M::kQ8, M::kQ8},
       DType::kBF16,
       ParamMode::kAliasMaster,
       DType::kBF16},
      {"lion_ecc8_q8_bf16g",
       Algorithm::kLion,
       lion,
       {MF::kBF16Ecc8, M::kQ8, M::kF32},
       DType::kBF16,
       ParamMode::kAliasMaster,
       DType::kBF16},
      {"lion_f32_q8_bf16g_bf16p",
       Algorithm::kLion,
       lion,
       {MF::kF32, M::kQ8, M::kF32},
       DType::kBF16,
       ParamMode::kSeparate,
       DType::kBF16},
      {"sgd_ecc8_q8_bf16g",
       Algorithm::kSGD,
       sgd,
       {MF::kBF16Ecc8, M::kQ8, M::kF32},
       DType::kBF16,
       ParamMode::kAliasMaster,
       DType::kBF16},
      {"sgd_f32_q8_bf16g_bf16p",
       Algorithm::kSGD,
       sgd,
       {MF::kF32, M::kQ8, M::kF32},
       DType::kBF16,
       ParamMode::kSeparate,
       DType::kBF16},
  };
}

// The arrays of one kernel's state, filled with realistic values.
struct KernelState {
  Buffer grad, param, w_f32, w_bf16, ecc, m, v, m_scales, v_scales;
  StepSpan span;
};

KernelState MakeState(const KernelSpec& k, size_t n, tbb::task_arena& arena) {
  KernelState st;
  const size_t groups = GroupCount(n);
  StepSpan& sp = st.span;
  sp.n = n;
  sp.formats = k.f;
  sp.grad_dtype = k.grad;
  st.grad = Buffer(n * DTypeSize(k.grad));
  sp.grad = st.grad.as<void>();
  if (k.f.master == MasterFormat::kF32) {
    st.w_f32 = Buffer(n * 4);
    sp.master.f32 = st.w_f32.as<float>();
  } else {
    st.w_bf16 = Buffer(n * 2);
    sp.master.bf16 = st.w_bf16.as<uint16_t>();
    if (k.f.master == MasterFormat::kBF16Ecc8) {
      st.ecc = Buffer(n);
      sp.master.ecc8 = st.ecc.as<int8_t>();
    } else if (k.f.master == MasterFormat::kBF16Ecc16) {
      st.ecc = Buffer(n * 2);
      sp.master.ecc16 = st.ecc.as<int16_t>();
    }
  }
  auto moment = [&](MomentFormat f, Buffer& data, Buffer& scales, MomentSpan& ms) {
    if (f == MomentFormat::kF32) {
      data = Buffer(n * 4);
      ms.f32 = data.as<float>();
    } else {
      data = Buffer(n);
      scales = Buffer(groups * 2);
      ms.codes = data.as<uint8_t>();
      ms.scales = scales.as<uint16_t>();
    }
  };
  if (HasMomentum(k.algo, k.h)) moment(k.f.momentum, st.m, st.m_scales, sp.m);
  if (HasVariance(k.algo)) moment(k.f.variance, st.v, st.v_scales, sp.v);
  if (k.param == ParamMode::kSeparate) {
    st.param = Buffer(n * DTypeSize(k.param_dtype));
    sp.param = st.param.as<void>();
    sp.param_dtype = k.param_dtype;
  } else if (k.param == ParamMode::kAliasMaster) {
    sp.param = sp.master.bf16;
    sp.param_dtype = DType::kBF16;
  }
  ParallelFor(arena, n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      const float g = SmallValue(i, 1);
      if (k.grad == DType::kF32)
        static_cast<float*>(st.grad.as<void>())[i] = g;
      else if (k.grad == DType::kBF16)
        st.grad.as<uint16_t>()[i] = num::F32ToBf16(g);
      else
        st.grad.as<uint16_t>()[i] = num::F32ToF16(g);
      const float w = SmallValue(i, 2) * 64.0f;
      if (sp.master.f32) sp.master.f32[i] = w;
      if (sp.master.bf16) sp.master.bf16[i] = num::F32ToBf16(w);
      if (sp.master.ecc8) sp.master.ecc8[i] = static_cast<int8_t>(Hash(i) & 0x3F);
      if (sp.master.ecc16) sp.master.ecc16[i] = static_cast<int16_t>(Hash(i) & 0x3FFF);
      for (MomentSpan* ms : {&sp.m, &sp.v}) {
        if (ms->f32) ms->f32[i] = ms == &sp.v ? g * g : g;
        if (ms->codes) ms->codes[i] = static_cast<uint8_t>(1 + Hash(i + 7) % 100);
        if (ms->scales && i % kQuantGroup == 0) ms->scales[i / kQuantGroup] = 0x3A83;
      }
      if (st.param.as<void>())
        std::memset(st.param.as<unsigned char>() + i * DTypeSize(sp.param_dtype), 0,
                    DTypeSize(sp.param_dtype));
    }
  });
  return st;
}

// ---- the run ----

struct Row {
  std::string kernel;
  int threads;
  double bytes_per_elem, seconds, gparams, gbytes, copy_gbs, roof_gparams, fraction;
};

// The targets at the memory limit: these kernels must move their bytes at a
// fraction of the best GB/s that any Tandem kernel reaches in the same run with the same
// threads (docs/host_kernels.md, "Of best").
struct Target {
  const char* kernel;
  double limit;
};
constexpr Target kTargets[] = {
    {"adamw_ecc8_q8_q8_bf16g", 0.85},
    {"lion_ecc8_q8_bf16g", 0.90},
    {"sgd_ecc8_q8_bf16g", 0.90},
};

constexpr char kNaiveName[] = "naive_adamw_f32 (-O3 native)";

// The Tandem kernel row with the most GB/s among `rows` (the naive loop, which has not
// Tandem's numerics, does not count), or the first row if there is none.
const Row& BestRow(const std::vector<Row>& rows) {
  const Row* best = &rows.front();
  for (const Row& r : rows)
    if (r.kernel != kNaiveName && (best->kernel == kNaiveName || r.gbytes > best->gbytes))
      best = &r;
  return *best;
}

void PrintRow(const Row& r) {
  std::printf("%-26s %3d %7.3f %9.2f %9.3f %8.1f %8.1f %9.3f %7.1f%%\n", r.kernel.c_str(),
              r.threads, r.bytes_per_elem, r.seconds * 1e3, r.gparams, r.gbytes, r.copy_gbs,
              r.roof_gparams, r.fraction * 100.0);
}

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) r.push_back(item);
  return r;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

int Main(int argc, char** argv) {
  CLI::App app{"tandem-bench-host: host step kernels vs. this machine's copy bandwidth"};
  app.set_version_flag("--version", std::string("tandem-bench-host ") + tandem::kVersion);
  size_t size = size_t{256} << 20;
  std::string threads_list = "1,2,4,8,16", kernels_filter, json_path, isa_name;
  int reps = 5, warmup = 1;
  cpu::HostKernelOptions options;  // --isa, --prefetch, --nt, --paired, --vbmi
  int paired = static_cast<int>(options.paired_groups);
  size_t grain = cpu::kHostGrainElements;
  app.add_option("--size", size, "elements per kernel span (default 256M)");
  app.add_option("--threads", threads_list, "comma-separated thread counts");
  app.add_option("--reps", reps, "timed repetitions (median reported)");
  app.add_option("--warmup", warmup, "untimed repetitions first");
  app.add_option("--grain", grain, "HostDriver grain in elements");
  app.add_option("--kernels", kernels_filter, "comma-separated kernel names (default all)");
  app.add_option("--isa", isa_name, "sse|avx2|avx512 (x86-64), neon|sve (aarch64); default: the best this CPU has");
  app.add_option("--prefetch", options.prefetch_groups,
                 "software prefetch distance in groups: 0 (off), 8, 16, 32 (default), 64");
  app.add_option("--nt", options.nt_param_stores, "non-temporal parameter stores 0/1 (default 1)");
  app.add_option("--paired", paired,
                 "two groups per iteration: 0 off, 1 all q8 kernels (default), 2 Lion/SGD only")
      ->check(CLI::Range(0, 2));
  app.add_option("--vbmi", options.vbmi_decode,
                 "VBMI momentum decode 0/1 (default 1: on where the CPU has VBMI)");
  app.add_option("--json", json_path, "write results as JSON to this file");
  app.add_flag("--best", g_best, "report the fastest rep instead of the median (in-cache runs)");
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // partial results survive a kill

  if (!isa_name.empty()) options.isa = cpu::ParseIsa(isa_name);
  options.paired_groups = static_cast<cpu::PairedGroups>(paired);
  options = cpu::Resolve(options);  // as every driver below applies them
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  std::vector<int> threads;
  for (const auto& t : Split(threads_list)) {
    const int v = std::stoi(t);
    if (v >= 1 && static_cast<unsigned>(v) <= hw)
      threads.push_back(v);
    else
      std::printf("# skipping %d threads (this machine has %u)\n", v, hw);
  }
  std::vector<KernelSpec> kernels;
  const auto wanted = Split(kernels_filter);
  for (const auto& k : AllKernels())
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), k.name) != wanted.end())
      kernels.push_back(k);

  std::printf(
      "# tandem-bench-host: cpu '%s', %u hardware threads, isa %s, size %zu, reps %d "
      "(%s) after %d warm-up, grain %zu, prefetch %d groups, nt-param %d, paired %d, vbmi %d\n",
      CpuModel().c_str(), hw, cpu::IsaName(*options.isa), size, reps, g_best ? "best" : "median",
      warmup, grain, options.prefetch_groups, options.nt_param_stores ? 1 : 0,
      static_cast<int>(options.paired_groups), options.vbmi_decode ? 1 : 0);
  std::printf("%-26s %3s %7s %9s %9s %8s %8s %9s %8s\n", "kernel", "thr", "B/elem", "ms",
              "Gparam/s", "GB/s", "copyGB/s", "roofGp/s", "of roof");

  nlohmann::json out;
  out["cpu"] = CpuModel();
  out["hardware_threads"] = hw;
  out["isa"] = cpu::IsaName(*options.isa);
  out["size"] = size;
  out["reps"] = reps;
  out["warmup"] = warmup;
  out["statistic"] = g_best ? "best" : "median";
  out["grain"] = grain;
  out["prefetch_groups"] = options.prefetch_groups;
  out["nt_param"] = options.nt_param_stores;
  out["paired_groups"] = static_cast<int>(options.paired_groups);
  out["vbmi_decode"] = options.vbmi_decode;
  out["rows"] = nlohmann::json::array();
  out["bandwidth"] = nlohmann::json::array();
  out["best"] = nlohmann::json::array();
  out["targets"] = nlohmann::json::array();
  std::vector<Row> run_rows;        // this thread count's kernel rows
  std::vector<Row> last_rows;       // those of the largest thread count
  auto add = [&](const Row& r) {
    PrintRow(r);
    run_rows.push_back(r);
    out["rows"].push_back({{"kernel", r.kernel},
                           {"threads", r.threads},
                           {"bytes_per_element", r.bytes_per_elem},
                           {"seconds", r.seconds},
                           {"gparam_per_s", r.gparams},
                           {"gbytes_per_s", r.gbytes},
                           {"copy_gbytes_per_s", r.copy_gbs},
                           {"roofline_gparam_per_s", r.roof_gparams},
                           {"fraction_of_roofline", r.fraction}});
  };

  tbb::task_arena fill_arena;  // all cores: filling is not what is measured
  for (int t : threads) {
    tbb::task_arena arena(t);
    run_rows.clear();
    // STREAM-like copy and triad on fp32 arrays of `size` elements.
    double copy_gbs, triad_gbs;
    {
      Buffer a(size * 4), b(size * 4), c(size * 4);
      float* pa = a.as<float>();
      float* pb = b.as<float>();
      float* pc = c.as<float>();
      ParallelFor(fill_arena, size, [&](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) pa[i] = 1.0f, pb[i] = 2.0f, pc[i] = 0.5f;
      });
      const double tc = MedianSeconds(warmup, reps, [&](int) {
        // Streaming stores: the destination is not read first, so the 8 bytes counted
        // are the bytes moved (a plain-store copy also reads b: 12 B of traffic).
        // On aarch64 a plain copy: Arm cores stream a write-only destination without
        // reading it (write streaming mode), and glibc's memcpy is written for that.
        ParallelFor(arena, size, [&](size_t lo, size_t hi) {
#if defined(__x86_64__)
          size_t i = lo;
          for (; i + 4 <= hi; i += 4) _mm_stream_ps(pb + i, _mm_load_ps(pa + i));
          for (; i < hi; ++i) pb[i] = pa[i];
          _mm_sfence();
#else
          std::memcpy(pb + lo, pa + lo, (hi - lo) * sizeof(float));
#endif
        });
      });
      const double tt = MedianSeconds(warmup, reps, [&](int) {
        ParallelFor(arena, size, [&](size_t lo, size_t hi) {
          for (size_t i = lo; i < hi; ++i) pa[i] = pb[i] + 3.0f * pc[i];
        });
      });
      copy_gbs = 8.0 * size / tc / 1e9;
      triad_gbs = 12.0 * size / tt / 1e9;
      std::printf("%-26s %3d %7.3f %9.2f %9s %8.1f\n", "copy (stream)", t, 8.0, tc * 1e3, "-",
                  copy_gbs);
      std::printf("%-26s %3d %7.3f %9.2f %9s %8.1f\n", "triad (stream)", t, 12.0, tt * 1e3, "-",
                  triad_gbs);
      out["bandwidth"].push_back(
          {{"threads", t}, {"copy_gbytes_per_s", copy_gbs}, {"triad_gbytes_per_s", triad_gbs}});
    }
    auto row = [&](const std::string& name, double bytes, double seconds) {
      Row r;
      r.kernel = name;
      r.threads = t;
      r.bytes_per_elem = bytes;
      r.seconds = seconds;
      r.gparams = size / seconds / 1e9;
      r.gbytes = r.gparams * bytes;
      r.copy_gbs = copy_gbs;
      r.roof_gparams = copy_gbs / bytes;
      r.fraction = r.gparams / r.roof_gparams;
      add(r);
    };
    // The plain fp32 AdamW loop (fp32 gradient): 28 B/element as well.
    {
      Buffer g(size * 4), w(size * 4), m(size * 4), v(size * 4);
      ParallelFor(fill_arena, size, [&](size_t lo, size_t hi) {
        for (size_t i = lo; i < hi; ++i) {
          g.as<float>()[i] = SmallValue(i, 1);
          w.as<float>()[i] = SmallValue(i, 2);
          m.as<float>()[i] = 0.0f;
          v.as<float>()[i] = 0.0f;
        }
      });
      const double s = MedianSeconds(warmup, reps, [&](int step) {
        const NaiveAdamWParams p{1e-3f,
                                 0.9f,
                                 0.999f,
                                 1e-8f,
                                 0.01f,
                                 1.0f - std::pow(0.9f, step + 1.0f),
                                 1.0f - std::pow(0.999f, step + 1.0f)};
        ParallelFor(arena, size, [&](size_t lo, size_t hi) {
          NaiveAdamW(p, g.as<float>() + lo, w.as<float>() + lo, m.as<float>() + lo,
                     v.as<float>() + lo, hi - lo);
        });
      });
      row(kNaiveName, 28.0, s);
    }
    cpu::HostDriver driver(t, grain, {}, options);
    for (const KernelSpec& k : kernels) {
      KernelState st = MakeState(k, size, fill_arena);
      const double s = MedianSeconds(warmup, reps, [&](int step) {
        const StepScalars sc = ComputeStepScalars(k.algo, k.h, 1e-3, step + 1, 1.0);
        const cpu::HostWork work{&sc, st.span};
        driver.Run(&work, 1);
      });
      row(k.name, KernelBytes(k), s);
    }
    // Of best: each row's GB/s against the best row of this thread count.
    const Row best = BestRow(run_rows);
    std::printf("# of best, %d threads: best %.1f GB/s (%s)\n", t, best.gbytes,
                best.kernel.c_str());
    const size_t first = out["rows"].size() - run_rows.size();
    for (size_t i = 0; i < run_rows.size(); ++i) {
      const Row& r = run_rows[i];
      std::printf("%-26s %3d %8.1f %7.1f%% of best\n", r.kernel.c_str(), t, r.gbytes,
                  100.0 * r.gbytes / best.gbytes);
      out["rows"][first + i]["fraction_of_best"] = r.gbytes / best.gbytes;
    }
    out["best"].push_back(
        {{"threads", t}, {"gbytes_per_s", best.gbytes}, {"kernel", best.kernel}});
    if (last_rows.empty() || t >= last_rows.front().threads) last_rows = run_rows;
  }
  // The targets, at the largest thread count of the run.
  if (!last_rows.empty() && BestRow(last_rows).kernel != "adamw_f32_bf16g_bf16p")
    std::printf("# note: the best is not adamw_f32_bf16g_bf16p (the usual best); add it to "
                "--kernels for the targets' reference\n");
  for (const Target& target : kTargets) {
    if (last_rows.empty()) break;
    const auto it = std::find_if(last_rows.begin(), last_rows.end(),
                                 [&](const Row& r) { return r.kernel == target.kernel; });
    if (it == last_rows.end()) continue;
    const Row& best = BestRow(last_rows);
    const double fraction = it->gbytes / best.gbytes;
    const bool met = fraction >= target.limit;
    std::printf("%s at %d threads: measured %.1f%% of best (limit %.0f%%: %s)\n", target.kernel,
                it->threads, 100.0 * fraction, 100.0 * target.limit, met ? "met" : "missed");
    out["targets"].push_back({{"kernel", target.kernel},
                              {"threads", it->threads},
                              {"fraction_of_best", fraction},
                              {"limit", target.limit},
                              {"best_kernel", best.kernel},
                              {"best_gbytes_per_s", best.gbytes},
                              {"met", met}});
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  try {
    return tandem::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem-bench-host: %s\n", e.what());
    return 1;
  }
}
