// tandem-ckpt: command-line access to checkpoint files (docs/checkpoint_tool.md).
//
//   tandem-ckpt inspect FILE            manifest summary: tensors, formats, sizes, step
//   tandem-ckpt verify FILE             check every CRC; exit 0 good, 1 damaged, 2 usage/IO
//   tandem-ckpt export FILE OUT         fp32 master weights as safetensors
// Exit status for every command: 0 success, 1 the checkpoint is damaged, 2 usage or I/O.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "tandem/checkpoint.h"
#include "tandem/error.h"

namespace {

constexpr int kOk = 0, kDamaged = 1, kUsageOrIO = 2;

std::string Bytes(uint64_t n) {
  char buf[32];
  if (n >= (uint64_t{1} << 30)) snprintf(buf, sizeof buf, "%.2f GiB", n / 1073741824.0);
  else if (n >= (uint64_t{1} << 20)) snprintf(buf, sizeof buf, "%.2f MiB", n / 1048576.0);
  else if (n >= 1024) snprintf(buf, sizeof buf, "%.2f KiB", n / 1024.0);
  else snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(n));
  return buf;
}

int Inspect(const std::string& path) {
  const tandem::CheckpointInfo info = tandem::InspectCheckpoint(path);
  std::printf("file       %s (%s)\n", path.c_str(), Bytes(info.file_size).c_str());
  std::printf("version    %u\n", info.version);
  std::printf("algorithm  %s\n", tandem::Name(info.algo));
  std::printf("formats    %s\n", tandem::Name(info.formats).c_str());
  std::printf("step       %lld\n", static_cast<long long>(info.step));
  for (size_t g = 0; g < info.groups.size(); ++g) {
    const tandem::HyperParams& h = info.groups[g];
    std::printf("group %-4zu lr_scale=%g beta1=%g beta2=%g eps=%g weight_decay=%g momentum=%g "
                "dampening=%g nesterov=%d\n",
                g, h.lr_scale, h.beta1, h.beta2, h.eps, h.weight_decay, h.momentum, h.dampening,
                h.nesterov ? 1 : 0);
  }
  std::vector<uint64_t> stored(info.tensors.size()), raw(info.tensors.size());
  std::vector<std::string> kinds(info.tensors.size());
  for (const tandem::CheckpointSection& s : info.sections) {
    stored[s.tensor] += s.length;
    raw[s.tensor] += s.raw_length;
    kinds[s.tensor] += (kinds[s.tensor].empty() ? "" : ",") + s.kind_name +
                       (s.compression == "none" ? "" : "(z)");
  }
  std::printf("\n%5s  %-40s %14s %5s %5s %5s %12s %12s  %s\n", "#", "name", "numel", "param",
              "grad", "group", "stored", "raw", "sections");
  uint64_t total_stored = 0, total_raw = 0, total_numel = 0;
  for (size_t i = 0; i < info.tensors.size(); ++i) {
    const tandem::TensorSnapshot& t = info.tensors[i];
    std::printf("%5zu  %-40s %14llu %5s %5s %5u %12s %12s  %s\n", i, t.name.c_str(),
                static_cast<unsigned long long>(t.numel), tandem::Name(t.param_dtype),
                tandem::Name(t.grad_dtype), t.group, Bytes(stored[i]).c_str(),
                Bytes(raw[i]).c_str(), kinds[i].c_str());
    total_stored += stored[i];
    total_raw += raw[i];
    total_numel += t.numel;
  }
  std::printf("total: %zu tensors, %llu elements, %zu sections, %s stored, %s raw\n",
              info.tensors.size(), static_cast<unsigned long long>(total_numel),
              info.sections.size(), Bytes(total_stored).c_str(), Bytes(total_raw).c_str());
  return kOk;
}

int Verify(const std::string& path) {
  const tandem::VerifyReport r = tandem::VerifyCheckpoint(path);
  for (const std::string& p : r.problems) std::printf("DAMAGED: %s\n", p.c_str());
  if (r.ok) {
    std::printf("OK: %s: header, footer, manifest and %llu sections (%s) pass their CRC32C\n",
                path.c_str(), static_cast<unsigned long long>(r.sections_checked),
                Bytes(r.bytes_checked).c_str());
    return kOk;
  }
  std::printf("%s is damaged: %zu problem(s)\n", path.c_str(), r.problems.size());
  return kDamaged;
}

int Export(const std::string& path, const std::string& out) {
  const tandem::OptimizerSnapshot s = tandem::LoadCheckpoint(path);
  tandem::ExportSafetensorsMasters(s, out);
  uint64_t numel = 0;
  for (const auto& t : s.tensors) numel += t.numel;
  std::printf("wrote %s: %zu tensors, %llu fp32 master weights (from %s)\n", out.c_str(),
              s.tensors.size(), static_cast<unsigned long long>(numel),
              tandem::Name(s.formats.master));
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tandem-ckpt: inspect, verify and export Tandem optimizer checkpoints"};
  app.require_subcommand(1);
  std::string file, out;
  CLI::App* inspect = app.add_subcommand("inspect", "print the manifest: tensors, formats, sizes, step");
  inspect->add_option("FILE", file, "checkpoint file")->required();
  CLI::App* verify = app.add_subcommand("verify", "check every CRC (exit 0 good, 1 damaged, 2 usage/IO)");
  verify->add_option("FILE", file, "checkpoint file")->required();
  CLI::App* exp = app.add_subcommand("export", "write the fp32 master weights as safetensors");
  exp->add_option("FILE", file, "checkpoint file")->required();
  exp->add_option("OUT", out, "output .safetensors file")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the usage error
    return rc == 0 ? kOk : kUsageOrIO;
  }
  try {
    if (inspect->parsed()) return Inspect(file);
    if (verify->parsed()) return Verify(file);
    return Export(file, out);
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "tandem-ckpt: %s\n", e.what());
    return e.kind() == tandem::ErrorKind::kCorruption ? kDamaged : kUsageOrIO;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem-ckpt: %s\n", e.what());
    return kUsageOrIO;
  }
}
