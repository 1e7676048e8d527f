// tandem-bench's subcommands, one function each; main.cc parses the command line.
// Each returns the process exit status: 0 done (or skipped for want of a GPU, said on
// stdout), 1 a measurement failed, 2 this build cannot run it (no CUDA). Each checks every
// argument before any work and throws Error(kInvalidArgument) naming the bad one, or
// Error(kUnsupported) for a program it needs that is not installed; main turns both into
// exit status 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::bench {

// Exit status of a GPU subcommand in a build without CUDA, and of a bad argument.
inline constexpr int kExitNoCuda = 2;
inline constexpr int kExitUsage = 2;

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
  // The built-in profile (planner::BuiltinProfile) that supplies the figures not measured
  // (the GPU and its link with --host-only or without a GPU); empty:
  // DefaultCalibrationBase().
  std::string base;
};
// The built-in profile a calibration starts from on this host: "grace-hopper" on aarch64
// (a Grace host's GPU is linked by NVLink-C2C), "h200" elsewhere.
std::string DefaultCalibrationBase();
// Throws Error(kInvalidArgument) naming the first bad option: a --base that is not a
// built-in profile, counts below 1, --threads outside [0, MaxHostThreads()] (the
// optimizer's limit, with tandem.torch's message), host sizes beyond this machine's
// memory, a negative --max-spread, and outputs that cannot be written or name the same
// file.
void CheckCalibrateOptions(const CalibrateOptions& o);
// Checks (CheckCalibrateOptions), measures and writes the profile and the report.
int Calibrate(const CalibrateOptions& o);

// "Intel(R) Xeon(R) ..." from /proc/cpuinfo, or "unknown CPU".
std::string CpuName();
// UTC now as 2026-11-24T09:30:00Z.
std::string UtcNow();
// The machine's physical memory in bytes (0 if unknown).
uint64_t HostMemoryBytes();
// Throws Error(kInvalidArgument) when `count` x `bytes_each` exceeds HostMemoryBytes(),
// naming the option `what`, the bytes and `why` they are needed.
void CheckFitsHostMemory(const char* what, uint64_t count, double bytes_each, const char* why);

}  // namespace tandem::bench
