// tandem-bench: one command for Tandem's throughput measurements.
//
//   tandem-bench pcie       pinned and pageable H2D, D2H, and both directions at once
//   tandem-bench calibrate  host/GPU step rates, copy and PCIe bandwidths, each repeated
//                           with its spread -> a profile JSON that tandem-plan reads
//   tandem-bench kernels    host and GPU kernels against their rooflines
//                           (runs tandem-bench-host and tandem-bench-gpu)
//   tandem-bench hybrid     the whole step across offload fractions (tandem-bench-hybrid)
//
// Results go to stdout (line-buffered, so logs fill line by line); a progress bar with an
// ETA goes to stderr only when stderr is a terminal. Every argument is checked before any
// measurement (exit status 2 naming it): counts and sizes, --threads against the same
// limit the optimizer has, every output file's directory, and that no output is another.
// Outputs are written whole or not at all (temporary file, fsync, rename). On a machine
// without a GPU every subcommand says what it skipped and why; in a build without CUDA the
// GPU-only subcommands (pcie, hybrid) fail with exit status 2, and so do kernels and
// hybrid where the benchmark programs they run are not installed beside tandem-bench
// (pip install . builds the tools without them). calibrate and pcie measure in-process
// with the engine itself: the step rates are those of HybridOptimizer::Step on one large
// tensor, so the profile keys are exactly the planner's.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "measure.h"
#include "output_file.h"
#include "progress.h"
#include "tandem/error.h"
#include "tandem/version.h"

namespace tandem::bench {

std::string UtcNow() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string CpuName() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

uint64_t HostMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

void CheckFitsHostMemory(const char* what, uint64_t count, double bytes_each, const char* why) {
  const uint64_t have = HostMemoryBytes();
  const double need = double(count) * bytes_each;
  if (have > 0 && need > double(have)) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s %llu needs about %.1f GiB of host memory (%s), more than this machine's "
                  "%.1f GiB",
                  what, static_cast<unsigned long long>(count), need / 1073741824.0, why,
                  double(have) / 1073741824.0);
    throw Error(ErrorKind::kInvalidArgument, buf);
  }
}

namespace {

int NoCudaBuild(const char* sub) {
  std::fprintf(stderr,
               "tandem-bench %s: this tandem-bench was built without CUDA (TANDEM_HAS_CUDA=0); "
               "%s needs a CUDA build and a GPU\n",
               sub, sub);
  return kExitNoCuda;
}

// ---------------------------------------------------------------------------------------
// pcie

int Pcie(size_t mib, int reps, const std::string& json_path, const std::string& command) {
  if (!TANDEM_HAS_CUDA) return NoCudaBuild("pcie");
  if (!json_path.empty()) tools::CheckOutputFile("--json", json_path);
  // A pinned and a pageable buffer of --mib each.
  CheckFitsHostMemory("--mib", mib, 2.0 * 1048576.0,
                      "a pinned and a pageable buffer of that many MiB");
  nlohmann::json j{{"benchmark", "tandem-bench pcie"},
                   {"command", command},
                   {"date", UtcNow()},
                   {"version", kVersion},
                   {"bytes", mib << 20},
                   {"reps", reps},
                   {"cpu", CpuName()}};
  if (!CudaDeviceAvailable()) {
    std::printf("tandem-bench pcie: skipped: no CUDA device on this machine\n");
    j["skipped"] = "no CUDA device";
  } else {
    tools::Progress bar("pcie", kPcieFigures);
    const PcieResult r = MeasurePcie(mib << 20, reps, [&](const char* what) {
      bar.Note(what);
      bar.Advance();
    });
    bar.Finish();
    std::printf("PCIe on %s, %zu MiB transfers, median of %d\n", GpuName().c_str(), mib, reps);
    std::printf(
        "  %-26s %8.1f GB/s\n  %-26s %8.1f GB/s\n  %-26s %8.1f GB/s\n"
        "  %-26s %8.1f GB/s\n  %-26s %8.1f GB/s\n",
        "pinned H2D", r.h2d, "pinned D2H", r.d2h, "pinned both at once", r.bidir, "pageable H2D",
        r.h2d_pageable, "pageable D2H", r.d2h_pageable);
    j.update({{"gpu", GpuName()},
              {"h2d_gbps", r.h2d},
              {"d2h_gbps", r.d2h},
              {"bidir_gbps", r.bidir},
              {"h2d_pageable_gbps", r.h2d_pageable},
              {"d2h_pageable_gbps", r.d2h_pageable}});
  }
  if (!json_path.empty()) {
    tools::WriteFileAtomically(json_path, j.dump(2) + "\n");
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}

// ---------------------------------------------------------------------------------------
// Subcommands that run the specialised benchmark programs beside this one.

std::string SelfDir() {
  char buf[4096];
  const ssize_t len = readlink("/proc/self/exe", buf, sizeof buf - 1);
  const std::string self = len > 0 ? std::string(buf, size_t(len)) : std::string("./tandem-bench");
  return self.substr(0, self.find_last_of('/'));
}

// The benchmark program `name` installed beside this tandem-bench, or in the build tree
// (tools/bench/../../bench/...). Throws Error(kUnsupported) saying how to get it when it
// is in neither: pip install . builds the tools without the benchmark programs.
std::string Sibling(const char* name, const char* sub) {
  const std::string dir = SelfDir();
  for (const std::string& p :
       {dir + "/" + name, dir + "/../../bench/" + name, dir + "/../../bench/gpu/" + name,
        dir + "/../../bench/hybrid/" + name})
    if (access(p.c_str(), X_OK) == 0) return p;
  throw Error(ErrorKind::kUnsupported,
              std::string(name) + ", the program `tandem-bench " + sub +
                  "` runs, is neither beside this tandem-bench (" + dir +
                  ") nor in a build tree: `pip install .` installs the tools without the "
                  "benchmark programs. Build them from a source checkout (cmake -S . -B build "
                  "-G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build) and run "
                  "build/tools/bench/tandem-bench " +
                  sub + " (docs/building.md, \"pip\")");
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs the program at `path` with `args`, passing its output through line by line; the bar
// advances on each line that `is_row` accepts (a result row). `total_rows` 0: unknown.
int RunSibling(const std::string& path, const std::vector<std::string>& args, uint64_t total_rows,
               const std::function<bool(const std::string&)>& is_row) {
  std::string cmd = Quote(path);
  for (const std::string& a : args) cmd += " " + Quote(a);
  std::printf("== %s\n", cmd.c_str());
  std::fflush(stdout);
  // The child's stdout is a pipe: have it line-buffered too where coreutils' stdbuf exists.
  const std::string run =
      (access("/usr/bin/stdbuf", X_OK) == 0 ? "/usr/bin/stdbuf -oL " : "") + cmd;
  std::FILE* pipe = popen(run.c_str(), "r");
  if (!pipe) throw Error(ErrorKind::kIO, std::string("cannot start ") + path);
  const std::string name = path.substr(path.find_last_of('/') + 1);
  tools::Progress bar(name, total_rows);
  char line[4096];
  while (std::fgets(line, sizeof line, pipe)) {
    bar.Print("%s", line);
    if (is_row(line)) bar.Advance();
  }
  bar.Finish();
  const int status = pclose(pipe);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int Kernels(bool quick, const std::string& out_dir) {
  // Everything is checked before the first program runs.
  // Arguments first, then the programs: a build without bench/ still names a bad --out-dir.
  if (!out_dir.empty()) tools::CheckOutputDir("--out-dir", out_dir);
  const bool gpu = TANDEM_HAS_CUDA && CudaDeviceAvailable();
  const std::string host_program = Sibling("tandem-bench-host", "kernels");
  const std::string gpu_program = gpu ? Sibling("tandem-bench-gpu", "kernels") : "";
  std::vector<std::string> host_args, gpu_args;
  if (quick) {
    host_args = {"--size", std::to_string(64ull << 20), "--reps", "3"};
    gpu_args = {"--elements", std::to_string(256ull << 20), "--reps", "5"};
  }
  if (!out_dir.empty()) {
    host_args.insert(host_args.end(), {"--json", out_dir + "/host_kernels.json"});
    gpu_args.insert(gpu_args.end(), {"--json", out_dir + "/gpu_kernels.json"});
  }
  // Result rows: anything but comments, headers and blank lines (the totals are unknown
  // here: the bar shows rows done and the time elapsed).
  auto row = [](const std::string& l) {
    return !l.empty() && l[0] != '#' && l[0] != '\n' && l.rfind("kernel", 0) != 0;
  };
  int rc = RunSibling(host_program, host_args, 0, row);
  if (!TANDEM_HAS_CUDA)
    std::printf("skipped tandem-bench-gpu: this tandem-bench was built without CUDA\n");
  else if (!gpu)
    std::printf("skipped tandem-bench-gpu: no CUDA device on this machine\n");
  else
    rc |= RunSibling(gpu_program, gpu_args, 0, row);
  return rc;
}

// The values after `flag` in `args`, up to the next option.
std::vector<std::string> ValuesOf(const std::vector<std::string>& args, const std::string& flag) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == flag)
      for (size_t k = i + 1; k < args.size() && args[k].rfind("--", 0) != 0; ++k)
        out.push_back(args[k]);
  return out;
}

int Hybrid(const std::vector<std::string>& args) {
  if (!TANDEM_HAS_CUDA) return NoCudaBuild("hybrid");
  const std::string program = Sibling("tandem-bench-hybrid", "hybrid");
  // Rows expected: models x fractions x formats, with tandem-bench-hybrid's defaults.
  std::vector<std::string> models = ValuesOf(args, "--models");
  if (models.empty()) models = {"llama3-1b"};
  uint64_t fractions = ValuesOf(args, "--fractions").size();
  if (fractions == 0) {
    const auto step = ValuesOf(args, "--fraction-step");
    double s = 0.125;
    if (!step.empty()) {
      size_t used = 0;
      try {
        s = std::stod(step[0], &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != step[0].size() || !(s > 0 && s <= 1))
        throw Error(ErrorKind::kInvalidArgument,
                    "--fraction-step must be a number in (0, 1], got '" + step[0] + "'");
    }
    fractions = uint64_t(1.0 / s + 1e-9) + 1;
  }
  if (!CudaDeviceAvailable()) {
    std::printf("tandem-bench hybrid: skipped: the hybrid step needs a CUDA device\n");
    return 0;
  }
  const uint64_t formats = std::find(args.begin(), args.end(), "--fp32") != args.end() ? 2 : 1;
  const std::set<std::string> names(models.begin(), models.end());
  auto row = [&](const std::string& l) { return names.count(l.substr(0, l.find(' '))) > 0; };
  return RunSibling(program, args, models.size() * fractions * formats, row);
}

std::string CommandLine(int argc, char** argv) {
  std::string s = "tandem-bench";
  for (int i = 1; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  using namespace tandem::bench;
  tandem::tools::LineBufferStdout();
  CLI::App app{
      "tandem-bench: Tandem's throughput measurements, each against the limit "
      "measured beside it"};
  app.set_version_flag("--version", std::string("tandem-bench ") + tandem::kVersion);
  app.require_subcommand(0, 1);

  auto* pcie = app.add_subcommand("pcie", "pinned/pageable H2D, D2H and both at once (GPU)");
  size_t pcie_mib = 512;
  int pcie_reps = 5;
  std::string pcie_json;
  pcie->add_option("--mib", pcie_mib, "transfer size in MiB")->check(CLI::Range(1, 1000000));
  pcie->add_option("--reps", pcie_reps, "timed repetitions (median reported)")
      ->check(CLI::Range(1, 1000000));
  pcie->add_option("--json", pcie_json, "write the figures as JSON to this file");

  auto* cal =
      app.add_subcommand("calibrate",
                         "repeated host (and GPU) measurements with their spread -> a tandem-plan "
                         "profile");
  CalibrateOptions co;
  cal->add_option("--host-elements", co.host_elements, "elements per host measurement");
  cal->add_option("--gpu-elements", co.gpu_elements, "elements per GPU measurement");
  cal->add_option("--threads", co.threads, "host threads (0: all)");
  cal->add_option("--reps", co.reps, "timed repetitions inside one measurement (median)")
      ->check(CLI::Range(1, 1000000));
  cal->add_option("--repeats", co.repeats,
                  "measurements per figure: the profile takes the median, the report the "
                  "min / median / max (default 3)")
      ->check(CLI::Range(1, 1000000));
  cal->add_option("--max-spread", co.max_spread,
                  "warn when (max - min) / median over the repeats exceeds this (default 0.10)");
  cal->add_flag("--host-only", co.host_only, "measure the host only, even with a GPU");
  cal->add_option("--base", co.base,
                  "built-in profile for the figures not measured: h200 or grace-hopper "
                  "(default: grace-hopper on aarch64, h200 elsewhere)");
  cal->add_option("--ranks", co.ranks,
                  "also measure this many ranks of the node at once, each on its share of "
                  "the CPUs and, with a GPU per rank, its own GPU (the node's figures; 1 to "
                  "this process's CPUs)");
  cal->add_option("-o,--out", co.profile_path, "profile JSON to write (for tandem-plan)");
  cal->add_option("--json", co.json_path,
                  "also write a report JSON: every figure with min, median, max and spread");

  auto* kern = app.add_subcommand("kernels", "host and GPU kernels against their rooflines");
  bool quick = false;
  std::string out_dir;
  kern->add_flag("--quick", quick, "small sizes (64Mi host elements, 256Mi GPU elements)");
  kern->add_option("--out-dir", out_dir, "write host_kernels.json and gpu_kernels.json here");

  auto* hyb = app.add_subcommand("hybrid", "the whole step across offload fractions (GPU)");
  hyb->prefix_command();  // everything after "hybrid" goes to tandem-bench-hybrid, in order
  hyb->footer(
      "All arguments are passed to tandem-bench-hybrid (--models, --fractions, "
      "--steps, --fp32, --json ...).");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the usage error
    return rc == 0 ? 0 : kExitUsage;
  }

  const char* sub = *pcie ? "pcie" : *cal ? "calibrate" : *kern ? "kernels" : "hybrid";
  try {
    if (*pcie) return Pcie(pcie_mib, pcie_reps, pcie_json, CommandLine(argc, argv));
    if (*cal) {
      co.command = CommandLine(argc, argv);
      return Calibrate(co);
    }
    if (*kern) return Kernels(quick, out_dir);
    if (*hyb) return Hybrid(hyb->remaining());
  } catch (const tandem::Error& e) {
    // A bad argument or a missing program is found before any work: usage (2).
    std::fflush(stdout);
    std::fprintf(stderr, "tandem-bench %s: %s\n", sub, e.what());
    const bool usage = e.kind() == tandem::ErrorKind::kInvalidArgument ||
                       e.kind() == tandem::ErrorKind::kUnsupported;
    return usage ? kExitUsage : 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "tandem-bench %s: %s\n", sub, e.what());
    return 1;
  }
  std::printf("%s", app.help().c_str());
  return 0;
}
