// tandem-ckpt: command-line access to checkpoint files (docs/checkpoint_tool.md).
//
//   tandem-ckpt inspect FILE            manifest summary: tensors, shapes, steps, formats
//   tandem-ckpt verify FILE             every check of a load; exit 0 good, 1 damaged
//   tandem-ckpt export FILE OUT         fp32 master weights as safetensors
//   tandem-ckpt to-torch FILE OUT       the state in the torch layout (torch_layout.h)
//   tandem-ckpt from-torch IN OUT ...   a torch-layout file to a checkpoint
//   tandem-ckpt --version
// Exit status for every command: 0 success, 1 the checkpoint is damaged, 2 usage or I/O.
// Options are checked first, whether or not the input will need them; then the output:
// one that is the input (the same path, a hard link or a symlink to it) is refused before
// anything is read or written, and from-torch keeps an existing OUT unless --force; every
// output is written whole or not at all (temporary file, fsync, rename). inspect and
// verify list the temporaries that interrupted saves left beside the file.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/atomic_file.h"
#include "checkpoint/format.h"
#include "tandem/checkpoint.h"
#include "tandem/error.h"
#include "tandem/version.h"
#include "tools/ckpt/torch_layout.h"
#include "tools/common/output_file.h"

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

std::string ShapeText(const tandem::TensorSnapshot& t) {
  const std::vector<uint64_t> dims = t.shape.empty() ? std::vector<uint64_t>{t.numel} : t.shape;
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(dims[i]);
  }
  s += ']';
  return s;
}

// The metadata on one line: its size and up to 100 bytes, control characters escaped.
std::string MetadataText(const std::string& m) {
  std::string s = std::to_string(m.size()) + " bytes";
  if (m.empty()) return s;
  s += ": ";
  for (size_t i = 0; i < m.size() && i < 100; ++i) {
    const unsigned char c = static_cast<unsigned char>(m[i]);
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\x%02x", c);
      s += buf;
    } else {
      s += static_cast<char>(c);
    }
  }
  return m.size() > 100 ? s + "..." : s;
}

// True when the file at `path` begins with a checkpoint header's magic.
bool StartsLikeACheckpoint(const std::string& path) {
  char magic[sizeof tandem::ckpt::kHeaderMagic] = {};
  std::ifstream f(path, std::ios::binary);
  return f.read(magic, sizeof magic) &&
         std::memcmp(magic, tandem::ckpt::kHeaderMagic, sizeof magic) == 0;
}

// Prints one line per temporary an interrupted save left beside `path`: its own
// (ckpt::TemporaryPath(path), whatever it holds) and any other "*.tmp" in the same
// directory that begins like a checkpoint.
void ListStrayTemporaries(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string own = tandem::ckpt::TemporaryPath(path);
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : ".";
  std::vector<std::pair<std::string, std::string>> found;  // (temporary, file it was for)
  std::error_code ec;
  if (fs::exists(fs::symlink_status(own, ec))) found.emplace_back(own, path);
  std::vector<fs::path> others;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() == ".tmp" && p.filename() != fs::path(own).filename() &&
        it->is_regular_file(ec) && StartsLikeACheckpoint(p.string()))
      others.push_back(p);
  }
  std::sort(others.begin(), others.end());
  for (const fs::path& p : others) found.emplace_back(p.string(), (dir / p.stem()).string());
  for (const auto& [tmp, target] : found) {
    struct stat st {};
    const std::string size =
        ::lstat(tmp.c_str(), &st) == 0 ? Bytes(static_cast<uint64_t>(st.st_size)) : "?";
    std::printf(
        "stray temporary: %s (%s): left by a save of %s that did not finish; the next "
        "save to %s removes it, or delete it\n",
        tmp.c_str(), size.c_str(), target.c_str(), target.c_str());
  }
}

int Inspect(const std::string& path) {
  const tandem::CheckpointInfo info = tandem::InspectCheckpoint(path);
  std::printf("file       %s (%s)\n", path.c_str(), Bytes(info.file_size).c_str());
  std::printf("version    %u\n", info.version);
  std::printf("algorithm  %s\n", tandem::Name(info.algo));
  std::printf("formats    %s\n", tandem::Name(info.formats).c_str());
  std::printf("step       %lld\n", static_cast<long long>(info.step));
  std::printf("metadata   %s\n", MetadataText(info.metadata).c_str());
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
  std::printf("\n%5s  %-40s %-20s %10s %14s %5s %5s %5s %12s %12s  %s\n", "#", "name", "shape",
              "step", "numel", "param", "grad", "group", "stored", "raw", "sections");
  uint64_t total_stored = 0, total_raw = 0, total_numel = 0;
  for (size_t i = 0; i < info.tensors.size(); ++i) {
    const tandem::TensorSnapshot& t = info.tensors[i];
    std::printf("%5zu  %-40s %-20s %10lld %14llu %5s %5s %5u %12s %12s  %s\n", i, t.name.c_str(),
                ShapeText(t).c_str(), static_cast<long long>(t.step),
                static_cast<unsigned long long>(t.numel), tandem::Name(t.param_dtype),
                tandem::Name(t.grad_dtype), t.group, Bytes(stored[i]).c_str(),
                Bytes(raw[i]).c_str(), kinds[i].c_str());
    total_stored += stored[i];
    total_raw += raw[i];
    total_numel += t.numel;
  }
  // Tensors with formats of their own (version 3 files; TensorSpec::formats).
  for (size_t i = 0; i < info.tensors.size(); ++i)
    if (!(info.tensors[i].formats == info.formats))
      std::printf("formats of tensor %zu ('%s'): %s\n", i, info.tensors[i].name.c_str(),
                  tandem::Name(info.tensors[i].formats).c_str());
  std::printf("total: %zu tensors, %llu elements, %zu sections, %s stored, %s raw\n",
              info.tensors.size(), static_cast<unsigned long long>(total_numel),
              info.sections.size(), Bytes(total_stored).c_str(), Bytes(total_raw).c_str());
  return kOk;
}

int Verify(const std::string& path) {
  const tandem::VerifyReport r = tandem::VerifyCheckpoint(path);
  for (const std::string& p : r.problems) std::printf("DAMAGED: %s\n", p.c_str());
  if (r.ok) {
    std::printf("OK: %s: header, footer, manifest and %llu sections (%s) pass their CRC32C "
                "and the state checks\n",
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

int ToTorch(const std::string& path, const std::string& out) {
  const tandem::OptimizerSnapshot s = tandem::LoadCheckpoint(path);
  tandem::tool::WriteTorchState(s, out);
  std::printf("wrote %s: %zu parameters of %s state (from %s), step %lld\n", out.c_str(),
              s.tensors.size(), tandem::Name(s.algo), tandem::Name(s.formats).c_str(),
              static_cast<long long>(s.step));
  return kOk;
}

int FromTorch(const std::string& in, const std::string& out, const tandem::StateFormats& to,
              const tandem::tool::TorchDefaults& d) {
  const tandem::OptimizerSnapshot f32 = tandem::tool::ReadTorchState(in, d);
  const tandem::OptimizerSnapshot s = tandem::ConvertSnapshot(f32, to);
  tandem::SaveCheckpoint(s, out);
  std::printf("wrote %s: %zu parameters of %s state, %s, step %lld\n", out.c_str(),
              s.tensors.size(), tandem::Name(s.algo), tandem::Name(s.formats).c_str(),
              static_cast<long long>(s.step));
  return kOk;
}

// The hyper-parameter options of from-torch, each by its own rule: the algorithm's when it
// is given, else every algorithm's that uses it (AdamW's for lr_scale, betas, eps and
// weight_decay, SGD's for momentum, dampening and nesterov), so that a bad value is
// refused whatever the file holds. Throws Error(kInvalidArgument) naming the option.
void CheckHyperOptions(const std::optional<tandem::Algorithm>& algorithm,
                       const tandem::HyperParams& hp) {
  const char* where = "from-torch options";
  if (algorithm) {
    tandem::ValidateHyperParams(*algorithm, hp, where);
    return;
  }
  tandem::ValidateHyperParams(tandem::Algorithm::kAdamW, hp, where);
  tandem::ValidateHyperParams(tandem::Algorithm::kSGD, hp, where);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tandem-ckpt: inspect, verify, export and convert Tandem optimizer checkpoints"};
  app.set_version_flag("--version", std::string("tandem-ckpt ") + TANDEM_VERSION_STRING);
  app.require_subcommand(1);
  std::string file, out;
  CLI::App* inspect = app.add_subcommand("inspect", "print the manifest: tensors, formats, sizes, step");
  inspect->add_option("FILE", file, "checkpoint file")->required();
  CLI::App* verify = app.add_subcommand("verify", "check every CRC (exit 0 good, 1 damaged, 2 usage/IO)");
  verify->add_option("FILE", file, "checkpoint file")->required();
  CLI::App* exp = app.add_subcommand("export", "write the fp32 master weights as safetensors");
  exp->add_option("FILE", file, "checkpoint file")->required();
  exp->add_option("OUT", out, "output .safetensors file")->required();
  CLI::App* to_torch = app.add_subcommand(
      "to-torch", "write the whole state, decoded to fp32, in the torch.optim layout as safetensors");
  to_torch->add_option("FILE", file, "checkpoint file")->required();
  to_torch->add_option("OUT", out, "output .safetensors file")->required();
  CLI::App* from_torch = app.add_subcommand(
      "from-torch", "make a checkpoint from a torch.optim-layout safetensors file");
  std::string algorithm, master = "f32", momentum = "f32", variance = "f32";
  std::string param_dtype = "f32", grad_dtype = "f32";
  tandem::HyperParams hp;
  from_torch->add_option("IN", file, "input .safetensors file (torch layout)")->required();
  from_torch->add_option("OUT", out, "output checkpoint file")->required();
  from_torch->add_option("--algorithm", algorithm,
                         "adamw, adam, lion or sgd (required if the file has no tandem_algorithm)");
  from_torch->add_option("--master", master, "master format: f32, bf16, bf16+ecc8, bf16+ecc16")
      ->capture_default_str();
  from_torch->add_option("--momentum", momentum, "momentum format: f32 or q8")->capture_default_str();
  from_torch->add_option("--variance", variance, "variance format: f32 or q8 (Adam only)")
      ->capture_default_str();
  const char* kNoGroups = "; used when the file has no tandem_groups";
  from_torch->add_option("--lr-scale", hp.lr_scale, std::string("lr_scale") + kNoGroups)->capture_default_str();
  from_torch->add_option("--beta1", hp.beta1, std::string("beta1") + kNoGroups)->capture_default_str();
  from_torch->add_option("--beta2", hp.beta2, std::string("beta2") + kNoGroups)->capture_default_str();
  from_torch->add_option("--eps", hp.eps, std::string("eps") + kNoGroups)->capture_default_str();
  from_torch->add_option("--weight-decay", hp.weight_decay, std::string("weight_decay") + kNoGroups)
      ->capture_default_str();
  from_torch->add_option("--sgd-momentum", hp.momentum, std::string("SGD momentum") + kNoGroups)
      ->capture_default_str();
  from_torch->add_option("--dampening", hp.dampening, std::string("SGD dampening") + kNoGroups)
      ->capture_default_str();
  from_torch->add_flag("--nesterov", hp.nesterov, std::string("SGD Nesterov") + kNoGroups);
  from_torch->add_option("--param-dtype", param_dtype,
                         "parameter dtype when the file has no tandem_param_dtypes")->capture_default_str();
  from_torch->add_option("--grad-dtype", grad_dtype,
                         "gradient dtype when the file has no tandem_grad_dtypes")->capture_default_str();
  bool force = false;
  from_torch->add_flag("--force", force, "replace OUT if it exists");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the usage error
    return rc == 0 ? kOk : kUsageOrIO;
  }
  try {
    if (inspect->parsed() || verify->parsed()) ListStrayTemporaries(file);
    if (inspect->parsed()) return Inspect(file);
    if (verify->parsed()) return Verify(file);
    tandem::StateFormats to;
    tandem::tool::TorchDefaults d;
    if (from_torch->parsed()) {
      // Every option first, whether or not the file will need it (they apply where the
      // file has no tandem_algorithm or tandem_groups), then the output, then the input.
      try {
        to = {tandem::ParseMasterFormat(master), tandem::ParseMomentFormat(momentum),
              tandem::ParseMomentFormat(variance)};
        if (!algorithm.empty()) d.algorithm = tandem::ParseAlgorithm(algorithm);
        d.param_dtype = tandem::ParseDType(param_dtype);
        d.grad_dtype = tandem::ParseDType(grad_dtype);
        CheckHyperOptions(d.algorithm, hp);
      } catch (const tandem::Error& e) {
        std::fprintf(stderr, "tandem-ckpt from-torch: %s\n", e.what());
        return kUsageOrIO;
      }
      d.hyper = hp;
    }
    // Every output is checked before any input is read.
    tandem::tools::CheckOutputFile("OUT", out, {{from_torch->parsed() ? "IN" : "FILE", file}});
    if (exp->parsed()) return Export(file, out);
    if (to_torch->parsed()) return ToTorch(file, out);
    if (!force && std::filesystem::exists(out)) {
      std::fprintf(stderr,
                   "tandem-ckpt from-torch: OUT '%s' exists; pass --force to replace it "
                   "(nothing written)\n",
                   out.c_str());
      return kUsageOrIO;
    }
    return FromTorch(file, out, to, d);
  } catch (const tandem::Error& e) {
    std::fprintf(stderr, "tandem-ckpt: %s\n", e.what());
    return e.kind() == tandem::ErrorKind::kCorruption ? kDamaged : kUsageOrIO;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tandem-ckpt: %s\n", e.what());
    return kUsageOrIO;
  }
}
