// tandem-bench's subcommands, one function each; main.cc parses the command line.
// Each returns the process exit status: 0 done (or skipped for want of a GPU, said on
// stdout), 1 a measurement failed, 2 this build cannot run it (no CUDA).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::bench {

// Exit status of a GPU subcommand in a build without CUDA.
inline constexpr int kExitNoCuda = 2;

struct CalibrateOptions {
  uint64_t host_elements = 64ull << 20, gpu_elements = 512ull << 20;
  int threads = 0;           // host threads, 0: all
  int reps = 5;              // timed repetitions inside one measurement (median)
  int repeats = 3;           // whole measurements per figure (min / median / max)
  double max_spread = 0.10;  // warn above this (max - min) / median
  bool host_only = false;    // skip GPU and PCIe even with a device
  // Ranks of one node measured at once as well (node_calibrate.h): > 1 adds the profile's
  // "node" figures and host.dram_gbps.
  int ranks = 1;
  std::string profile_path = "tandem-profile.json";
  std::string json_path;  // the report with spreads; empty: none
  std::string command;    // the command line, recorded in the report
};
int Calibrate(const CalibrateOptions& o);

// "Intel(R) Xeon(R) ..." from /proc/cpuinfo, or "unknown CPU".
std::string CpuName();
// UTC now as 2026-11-24T09:30:00Z.
std::string UtcNow();
// Writes `text` to `path`; throws Error(kIO) naming the file on failure.
void WriteTextFile(const std::string& path, const std::string& text);

}  // namespace tandem::bench
