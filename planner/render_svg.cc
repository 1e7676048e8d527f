// The plan as a hand-written SVG chart: memory (GPU, host) against the offload fraction
// with both budget lines, and the predicted step time against the fraction.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "tandem/planner.h"

namespace tandem::planner {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Fmt(const char* fmt, double a) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, a);
  return b;
}

// A "nice" axis maximum and tick step covering [0, v].
void NiceAxis(double v, double* top, double* step) {
  if (!(v > 0)) v = 1;
  const double raw = v / 5;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double n = raw / mag;
  *step = (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * mag;
  *top = std::ceil(v / *step) * *step;
}

struct Panel {
  double x0, y0, w, h;  // plot area in pixels
  double ymax, ystep;
  double X(double f) const { return x0 + f * w; }
  double Y(double v) const { return y0 + h - v / ymax * h; }
};

void Axes(std::string* s, const Panel& p, const std::string& title, const std::string& ylabel) {
  *s += "<rect x='" + Fmt("%.1f", p.x0) + "' y='" + Fmt("%.1f", p.y0) + "' width='" +
        Fmt("%.1f", p.w) + "' height='" + Fmt("%.1f", p.h) + "' fill='none' stroke='#333'/>\n";
  *s += "<text x='" + Fmt("%.1f", p.x0 + p.w / 2) + "' y='" + Fmt("%.1f", p.y0 - 10) +
        "' text-anchor='middle' font-size='15' font-weight='bold'>" + Escape(title) + "</text>\n";
  for (int i = 0; i <= 4; ++i) {
    const double f = i / 4.0;
    *s += "<line x1='" + Fmt("%.1f", p.X(f)) + "' y1='" + Fmt("%.1f", p.y0 + p.h) + "' x2='" +
          Fmt("%.1f", p.X(f)) + "' y2='" + Fmt("%.1f", p.y0 + p.h + 5) + "' stroke='#333'/>\n";
    *s += "<text x='" + Fmt("%.1f", p.X(f)) + "' y='" + Fmt("%.1f", p.y0 + p.h + 19) +
          "' text-anchor='middle' font-size='12'>" + Fmt("%.2f", f) + "</text>\n";
  }
  for (double v = 0; v <= p.ymax * 1.0001; v += p.ystep) {
    *s += "<line x1='" + Fmt("%.1f", p.x0) + "' y1='" + Fmt("%.1f", p.Y(v)) + "' x2='" +
          Fmt("%.1f", p.x0 + p.w) + "' y2='" + Fmt("%.1f", p.Y(v)) + "' stroke='#ddd'/>\n";
    *s += "<text x='" + Fmt("%.1f", p.x0 - 6) + "' y='" + Fmt("%.1f", p.Y(v) + 4) +
          "' text-anchor='end' font-size='12'>" + Fmt("%g", v) + "</text>\n";
  }
  *s += "<text x='" + Fmt("%.1f", p.x0 + p.w / 2) + "' y='" + Fmt("%.1f", p.y0 + p.h + 38) +
        "' text-anchor='middle' font-size='13'>offload fraction</text>\n";
  *s += "<text transform='translate(" + Fmt("%.1f", p.x0 - 50) + "," + Fmt("%.1f", p.y0 + p.h / 2) +
        ") rotate(-90)' text-anchor='middle' font-size='13'>" + Escape(ylabel) + "</text>\n";
}

void Polyline(std::string* s, const Panel& p, const std::vector<FractionPoint>& pts,
              const std::function<double(const FractionPoint&)>& y, const char* color) {
  *s += "<polyline fill='none' stroke='" + std::string(color) + "' stroke-width='2' points='";
  for (const FractionPoint& q : pts) *s += Fmt("%.1f,", p.X(q.fraction)) + Fmt("%.1f ", p.Y(y(q)));
  *s += "'/>\n";
  for (const FractionPoint& q : pts)
    *s += "<circle cx='" + Fmt("%.1f", p.X(q.fraction)) + "' cy='" + Fmt("%.1f", p.Y(y(q))) +
          "' r='3' fill='" + color + "'/>\n";
}

void HLine(std::string* s, const Panel& p, double v, const char* color, const std::string& label) {
  *s += "<line x1='" + Fmt("%.1f", p.x0) + "' y1='" + Fmt("%.1f", p.Y(v)) + "' x2='" +
        Fmt("%.1f", p.x0 + p.w) + "' y2='" + Fmt("%.1f", p.Y(v)) + "' stroke='" + color +
        "' stroke-width='1.5' stroke-dasharray='6,4'/>\n";
  *s += "<text x='" + Fmt("%.1f", p.x0 + p.w - 4) + "' y='" + Fmt("%.1f", p.Y(v) - 4) +
        "' text-anchor='end' font-size='12' fill='" + color + "'>" + Escape(label) + "</text>\n";
}

void VLine(std::string* s, const Panel& p, double f, const std::string& label) {
  *s += "<line x1='" + Fmt("%.1f", p.X(f)) + "' y1='" + Fmt("%.1f", p.y0) + "' x2='" +
        Fmt("%.1f", p.X(f)) + "' y2='" + Fmt("%.1f", p.y0 + p.h) +
        "' stroke='#2a2' stroke-width='1.5'/>\n";
  *s += "<text x='" + Fmt("%.1f", p.X(f) + 4) + "' y='" + Fmt("%.1f", p.y0 + 14) +
        "' font-size='12' fill='#2a2'>" + Escape(label) + "</text>\n";
}

}  // namespace

std::string PlanToSvg(const PlanResult& plan) {
  const PlanInputs& in = plan.inputs;
  const double gib = 1073741824.0;
  const char* kGpu = "#1f77b4";
  const char* kHost = "#ff7f0e";
  const char* kTime = "#9467bd";
  std::string s =
      "<svg xmlns='http://www.w3.org/2000/svg' width='900' height='760' "
      "viewBox='0 0 900 760' font-family='sans-serif'>\n"
      "<rect width='900' height='760' fill='white'/>\n";
  s +=
      "<text x='450' y='24' text-anchor='middle' font-size='16'>" +
      Escape("tandem-plan: " + in.model.name + ", " + Name(in.algorithm) + " " + Name(in.formats)) +
      "</text>\n";

  // The scale covers the data and the GPU budget; the host budget only when it is not
  // far above them (a 2 TiB host line would flatten every curve), else it is named.
  double peak = ToGiB(in.gpu_budget);
  for (const FractionPoint& p : plan.sweep)
    peak = std::max({peak, ToGiB(p.gpu.total()), ToGiB(p.host_node_bytes)});
  const bool host_on_scale = ToGiB(in.host_budget) <= 2 * peak;
  if (host_on_scale) peak = std::max(peak, ToGiB(in.host_budget));
  Panel mem{90, 70, 700, 260, 0, 0};
  NiceAxis(peak * 1.05, &mem.ymax, &mem.ystep);
  Axes(&s, mem, "Memory vs offload fraction", "GiB");
  HLine(&s, mem, ToGiB(in.gpu_budget), kGpu, "GPU budget " + Fmt("%.0f GiB", ToGiB(in.gpu_budget)));
  const std::string host_label = "host budget " + Fmt("%.0f GiB", ToGiB(in.host_budget));
  if (host_on_scale) {
    HLine(&s, mem, ToGiB(in.host_budget), kHost, host_label);
  } else {
    s += "<text x='" + Fmt("%.1f", mem.x0 + mem.w - 4) + "' y='" + Fmt("%.1f", mem.y0 + 14) +
         "' text-anchor='end' font-size='12' fill='" + kHost + "'>" + host_label +
         " (above the scale)</text>\n";
  }
  Polyline(
      &s, mem, plan.sweep, [&](const FractionPoint& p) { return p.gpu.total() / gib; }, kGpu);
  Polyline(
      &s, mem, plan.sweep, [&](const FractionPoint& p) { return p.host_node_bytes / gib; }, kHost);
  // Legend.
  s +=
      "<text x='800' y='90' font-size='12' fill='" + std::string(kGpu) + "'>GPU (per GPU)</text>\n";
  s += "<text x='800' y='108' font-size='12' fill='" + std::string(kHost) +
       "'>host (per node)</text>\n";

  double tmax = 0;
  for (const FractionPoint& p : plan.sweep) tmax = std::max(tmax, p.time.step_ms);
  Panel time{90, 430, 700, 260, 0, 0};
  NiceAxis(tmax * 1.05, &time.ymax, &time.ystep);
  Axes(&s, time, "Predicted optimizer step time vs offload fraction", "step time (ms)");
  Polyline(
      &s, time, plan.sweep, [](const FractionPoint& p) { return p.time.step_ms; }, kTime);
  for (const FractionPoint& p : plan.sweep)
    s += "<text x='" + Fmt("%.1f", time.X(p.fraction)) + "' y='" +
         Fmt("%.1f", time.Y(p.time.step_ms) - 7) +
         "' text-anchor='middle' font-size='9' fill='#555'>" + Name(p.time.bottleneck) +
         "</text>\n";
  if (plan.feasible) {
    const std::string label = "recommended " + Fmt("%.4f", plan.recommended.fraction);
    VLine(&s, mem, plan.recommended.fraction, label);
    VLine(&s, time, plan.recommended.fraction, label);
  }
  s += "<text x='450' y='750' text-anchor='middle' font-size='12'>" +
       Escape((plan.feasible ? "fits" : "does not fit") + std::string("; profile: ") +
              in.profile.machine) +
       "</text>\n";
  s += "</svg>\n";
  return s;
}

}  // namespace tandem::planner
