#include "tandem/compute_split.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "tandem/error.h"

namespace tandem {
namespace {

bool Positive(double x) { return std::isfinite(x) && x > 0; }

// One term of the model as a + b * share (ms).
struct Line {
  double a, b;
  double at(double x) const { return a + b * x; }
};

void Lines(const ComputeSplitInput& in, const MachineRates& r, Line out[4]) {
  const double n = static_cast<double>(in.offloaded);
  // ms for `bytes` at `gbps`: bytes / (gbps * 1e9) * 1e3.
  auto ms = [](double bytes, double gbps) { return bytes / (gbps * 1e6); };
  out[0] = {ms(in.grad_bytes * n, r.d2h_gbps), ms((in.stream_bytes - in.grad_bytes) * n, r.d2h_gbps)};
  out[1] = {ms(in.param_bytes * n, r.h2d_gbps),
            ms((in.stream_bytes - in.param_bytes) * n, r.h2d_gbps)};
  out[2] = {n / (r.host_gparams * 1e6), -n / (r.host_gparams * 1e6)};
  out[3] = {static_cast<double>(in.hot) / (r.gpu_gparams * 1e6), n / (r.gpu_gparams * 1e6)};
}

}  // namespace

bool MachineRates::valid() const {
  return Positive(h2d_gbps) && Positive(d2h_gbps) && Positive(host_gparams) &&
         Positive(gpu_gparams);
}

const char* ComputeSplit::bound() const {
  const double m = std::max({down_ms, up_ms, host_ms, gpu_ms});
  if (m == down_ms) return "d2h";
  if (m == up_ms) return "h2d";
  if (m == host_ms) return "host";
  return "gpu";
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
  Line l[4];
  Lines(in, rates, l);
  ComputeSplit s;
  s.share = share;
  s.down_ms = l[0].at(share);
  s.up_ms = l[1].at(share);
  s.host_ms = l[2].at(share);
  s.gpu_ms = l[3].at(share);
  s.step_ms = std::max({s.down_ms, s.up_ms, s.host_ms, s.gpu_ms});
  return s;
}

ComputeSplit ChooseSplit(const ComputeSplitInput& in, const MachineRates& rates) {
  ComputeSplit best = PredictSplit(in, rates, 0.0);
  if (in.offloaded == 0) return best;
  Line l[4];
  Lines(in, rates, l);
  std::vector<double> candidates = {1.0};
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j)
      if (l[i].b != l[j].b) {
        const double x = (l[j].a - l[i].a) / (l[i].b - l[j].b);
        if (x > 0.0 && x < 1.0) candidates.push_back(x);
      }
  std::sort(candidates.begin(), candidates.end());
  for (double x : candidates) {
    const ComputeSplit s = PredictSplit(in, rates, x);
    if (s.step_ms < best.step_ms * (1 - 1e-12)) best = s;
  }
  return best;
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
