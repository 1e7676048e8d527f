#include "tandem/compute_split.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tandem/error.h"

namespace tandem {
namespace {

bool Positive(double x) { return std::isfinite(x) && x > 0; }

// ms for `bytes` at `gbps`: bytes / (gbps * 1e9) * 1e3.
double Ms(double bytes, double gbps) { return bytes / (gbps * 1e6); }

}  // namespace

bool MachineRates::valid() const {
  return Positive(h2d_gbps) && Positive(d2h_gbps) && Positive(host_gparams) &&
         Positive(gpu_gparams);
}

const char* ComputeSplit::bound() const {
  if (gpu_ms >= stream_ms + host_path_ms) return "gpu";
  if (host_path_ms == 0) return "stream";
  if (stream_ms > 0) return "stream+host";
  return host_path_ms == host_ms ? "host" : (down_ms >= up_ms ? "d2h" : "h2d");
}

ComputeSplit PredictSplit(const ComputeSplitInput& in, const MachineRates& rates, double share) {
  if (!rates.valid()) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "machine rates must be finite and > 0: h2d %g GB/s, d2h %g GB/s, host %g "
                  "Gparam/s, gpu %g Gparam/s",
                  rates.h2d_gbps, rates.d2h_gbps, rates.host_gparams, rates.gpu_gparams);
    throw Error(ErrorKind::kInvalidArgument, buf);
  }
  if (!(share >= 0.0 && share <= 1.0))
    throw Error(ErrorKind::kInvalidArgument,
                "compute share must be in [0, 1], got " + std::to_string(share));
  const double n = static_cast<double>(in.offloaded);
  const double streamed = share * n, host = n - streamed;
  ComputeSplit s;
  s.share = share;
  const double down_s = Ms(in.stream_bytes * streamed, rates.d2h_gbps);
  const double up_s = Ms((in.stream_bytes + in.stream_grad_bytes) * streamed, rates.h2d_gbps);
  const double down_h = Ms(in.grad_bytes * host, rates.d2h_gbps);
  const double up_h = Ms(in.param_bytes * host, rates.h2d_gbps);
  s.down_ms = down_s + down_h;
  s.up_ms = up_s + up_h;
  s.host_ms = host / (rates.host_gparams * 1e6);
  if (in.chunk_elements > 0 && host > 0)
    s.host_ms += std::ceil(host / static_cast<double>(in.chunk_elements)) * kHostChunkMs;
  s.gpu_ms = (static_cast<double>(in.hot) + streamed) / (rates.gpu_gparams * 1e6);
  s.stream_ms = std::max(down_s, up_s);
  s.host_path_ms = std::max({down_h, up_h, s.host_ms});
  s.step_ms = std::max(s.gpu_ms, s.stream_ms + s.host_path_ms);
  return s;
}

ComputeSplit ChooseSplit(const ComputeSplitInput& in, const MachineRates& rates) {
  ComputeSplit best = PredictSplit(in, rates, 0.0);
  if (in.offloaded == 0) return best;
  constexpr int kGrid = 1024;
  int at = 0;
  for (int i = 1; i <= kGrid; ++i) {
    const ComputeSplit s = PredictSplit(in, rates, static_cast<double>(i) / kGrid);
    if (s.step_ms < best.step_ms * (1 - 1e-12)) {
      best = s;
      at = i;
    }
  }
  // Convex: the minimum lies within one grid step of the best grid point; refine there.
  double lo = std::max(0, at - 1) / double(kGrid), hi = std::min(kGrid, at + 1) / double(kGrid);
  for (int it = 0; it < 60; ++it) {
    const double a = lo + (hi - lo) / 3, b = hi - (hi - lo) / 3;
    if (PredictSplit(in, rates, a).step_ms <= PredictSplit(in, rates, b).step_ms)
      hi = b;
    else
      lo = a;
  }
  const ComputeSplit refined = PredictSplit(in, rates, lo);
  if (refined.step_ms < best.step_ms * (1 - 1e-12)) best = refined;
  return best;
}

double HostRateUnderDma(double kernel_gparams, double kernel_bytes, double grad_bytes,
                        double param_bytes) {
  if (!(kernel_bytes > 0))
    throw Error(ErrorKind::kInvalidArgument,
                "host rate under DMA: the kernel's bytes per element must be > 0, got " +
                    std::to_string(kernel_bytes));
  return kernel_gparams / (1.0 + (grad_bytes + param_bytes) / kernel_bytes);
}

double ParseOffloadCompute(const std::string& text) {
  if (text == "auto") return kOffloadComputeAuto;
  if (text == "host") return 0.0;
  if (text == "gpu") return 1.0;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || !(v >= 0.0 && v <= 1.0))
    throw Error(ErrorKind::kInvalidArgument,
                "offload_compute must be \"auto\", \"host\", \"gpu\" or a share in [0, 1], "
                "got \"" + text + "\"");
  return v;
}

std::string OffloadComputeName(double value) {
  if (value == kOffloadComputeAuto) return "auto";
  if (value == 0.0) return "host";
  if (value == 1.0) return "gpu";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", value);
  return buf;
}

}  // namespace tandem
