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

// Note [Labels never overlap]
// Every text goes through Labels, which estimates its box generously (kCharWidth em per
// character, from one em above the baseline to 0.3 em below) and places it at the first
// of its candidate positions whose box is inside the canvas and clear of every box placed
// before. Fixed texts (titles, ticks, axis names) are laid out not to collide and are
// placed first; a label that finds no room is dropped (the bottleneck of a sweep point)
// or moved to a line of its own under the chart (budget and recommendation labels), so
// nothing is ever drawn over another label. render_test.cc checks it with its own,
// smaller estimate.
constexpr double kCharWidth = 0.62;  // em per character; sans-serif averages about 0.55
constexpr double kWidth = 900, kHeight = 800;

struct Box {
  double x0, y0, x1, y1;
  bool Overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

size_t Glyphs(const std::string& s) {  // UTF-8 code points
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

struct Spot {
  double x, y;
  const char* anchor;  // "start", "middle", "end"
};

class Labels {
 public:
  explicit Labels(std::string* out) : out_(out) {}

  static Box BoxOf(const Spot& at, double size, const std::string& text, bool bold = false) {
    const double w = Glyphs(text) * size * (bold ? kCharWidth + 0.06 : kCharWidth);
    const double x0 = at.anchor[0] == 's' ? at.x : at.anchor[0] == 'm' ? at.x - w / 2 : at.x - w;
    return {x0 - 1, at.y - size - 1, x0 + w + 1, at.y + 0.3 * size + 1};
  }

  // Places `text` at the first free spot; false (nothing drawn) if none is free.
  bool Place(const std::vector<Spot>& spots, double size, const std::string& text,
             const std::string& attrs = "", bool bold = false) {
    for (const Spot& at : spots) {
      const Box b = BoxOf(at, size, text, bold);
      if (b.x0 < 0 || b.y0 < 0 || b.x1 > kWidth || b.y1 > kHeight) continue;
      bool free = true;
      for (const Box& o : placed_) free = free && !b.Overlaps(o);
      if (!free) continue;
      placed_.push_back(b);
      *out_ += "<text x='" + Fmt("%.1f", at.x) + "' y='" + Fmt("%.1f", at.y) + "' text-anchor='" +
               at.anchor + "' font-size='" + Fmt("%g", size) + "'" +
               (bold ? " font-weight='bold'" : "") + attrs + ">" + Escape(text) + "</text>\n";
      return true;
    }
    return false;
  }
  // A text rotated by -90 degrees about (x, y), centred there.
  void PlaceVertical(double x, double y, double size, const std::string& text) {
    const double w = Glyphs(text) * size * kCharWidth;
    placed_.push_back({x - size - 1, y - w / 2 - 1, x + 0.3 * size + 1, y + w / 2 + 1});
    *out_ += "<text transform='translate(" + Fmt("%.1f", x) + "," + Fmt("%.1f", y) +
             ") rotate(-90)' text-anchor='middle' font-size='" + Fmt("%g", size) + "'>" +
             Escape(text) + "</text>\n";
  }

 private:
  std::string* out_;
  std::vector<Box> placed_;
};

// `text` cut to fit `width` pixels at `size` (with "..." where cut).
std::string Fit(const std::string& text, double size, double width) {
  const size_t max = static_cast<size_t>(width / (size * kCharWidth));
  if (Glyphs(text) <= max) return text;
  if (max <= 3) return "";
  std::string out;
  size_t n = 0;
  for (unsigned char c : text) {
    if ((c & 0xC0) != 0x80 && ++n > max - 3) break;
    out += static_cast<char>(c);
  }
  return out + "...";
}

struct Panel {
  double x0, y0, w, h;  // plot area in pixels
  double ymax, ystep;
  double X(double f) const { return x0 + f * w; }
  double Y(double v) const { return y0 + h - v / ymax * h; }
};

void Axes(std::string* s, Labels* labels, const Panel& p, const std::string& title,
          const std::string& ylabel) {
  *s += "<rect x='" + Fmt("%.1f", p.x0) + "' y='" + Fmt("%.1f", p.y0) + "' width='" +
        Fmt("%.1f", p.w) + "' height='" + Fmt("%.1f", p.h) + "' fill='none' stroke='#333'/>\n";
  labels->Place({{p.x0 + p.w / 2, p.y0 - 10, "middle"}}, 15, title, "", true);
  for (int i = 0; i <= 4; ++i) {
    const double f = i / 4.0;
    *s += "<line x1='" + Fmt("%.1f", p.X(f)) + "' y1='" + Fmt("%.1f", p.y0 + p.h) + "' x2='" +
          Fmt("%.1f", p.X(f)) + "' y2='" + Fmt("%.1f", p.y0 + p.h + 5) + "' stroke='#333'/>\n";
    labels->Place({{p.X(f), p.y0 + p.h + 19, "middle"}}, 12, Fmt("%.2f", f));
  }
  for (double v = 0; v <= p.ymax * 1.0001; v += p.ystep) {
    *s += "<line x1='" + Fmt("%.1f", p.x0) + "' y1='" + Fmt("%.1f", p.Y(v)) + "' x2='" +
          Fmt("%.1f", p.x0 + p.w) + "' y2='" + Fmt("%.1f", p.Y(v)) + "' stroke='#ddd'/>\n";
    labels->Place({{p.x0 - 6, p.Y(v) + 4, "end"}}, 12, Fmt("%g", v));
  }
  labels->Place({{p.x0 + p.w / 2, p.y0 + p.h + 38, "middle"}}, 13, "offload fraction");
  labels->PlaceVertical(p.x0 - 64, p.y0 + p.h / 2, 13, ylabel);
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

std::string Fill(const char* color) { return std::string(" fill='") + color + "'"; }

// Labels that found no room near their line: one line each under the chart.
struct Overflow {
  double y = kHeight - 42;
  void Place(Labels* labels, const std::string& text, const char* color) {
    for (; y < kHeight - 20; y += 14)
      if (labels->Place({{kWidth / 2, y, "middle"}}, 11, Fit(text, 11, kWidth - 20), Fill(color))) {
        y += 14;
        return;
      }
  }
};

void HLine(std::string* s, Labels* labels, Overflow* overflow, const Panel& p, double v,
           const char* color, const std::string& label) {
  *s += "<line x1='" + Fmt("%.1f", p.x0) + "' y1='" + Fmt("%.1f", p.Y(v)) + "' x2='" +
        Fmt("%.1f", p.x0 + p.w) + "' y2='" + Fmt("%.1f", p.Y(v)) + "' stroke='" + color +
        "' stroke-width='1.5' stroke-dasharray='6,4'/>\n";
  const double y = p.Y(v), r = p.x0 + p.w - 4, l = p.x0 + 4, m = p.x0 + p.w / 2;
  if (!labels->Place({{r, y - 4, "end"},
                      {r, y + 15, "end"},
                      {l, y - 4, "start"},
                      {l, y + 15, "start"},
                      {m, y - 4, "middle"},
                      {m, y + 15, "middle"}},
                     12, label, Fill(color)))
    overflow->Place(labels, label, color);
}

void VLine(std::string* s, Labels* labels, Overflow* overflow, const Panel& p, double f,
           const std::string& label) {
  *s += "<line x1='" + Fmt("%.1f", p.X(f)) + "' y1='" + Fmt("%.1f", p.y0) + "' x2='" +
        Fmt("%.1f", p.X(f)) + "' y2='" + Fmt("%.1f", p.y0 + p.h) +
        "' stroke='#2a2' stroke-width='1.5'/>\n";
  std::vector<Spot> spots;
  for (double dy = 14; dy < p.h - 4; dy += 16) {
    spots.push_back({p.X(f) + 4, p.y0 + dy, "start"});
    spots.push_back({p.X(f) - 4, p.y0 + dy, "end"});
  }
  if (!labels->Place(spots, 12, label, Fill("#2a2"))) overflow->Place(labels, label, "#2a2");
}

}  // namespace

std::string PlanToSvg(const PlanResult& plan) {
  const PlanInputs& in = plan.inputs;
  const double gib = 1073741824.0;
  const char* kGpu = "#1f77b4";
  const char* kHost = "#ff7f0e";
  const char* kTime = "#9467bd";
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='" + Fmt("%g", kWidth) +
                  "' height='" + Fmt("%g", kHeight) + "' viewBox='0 0 " + Fmt("%g", kWidth) + " " +
                  Fmt("%g", kHeight) + "' font-family='sans-serif'>\n" +
                  "<rect width='100%' height='100%' fill='white'/>\n";
  Labels labels(&s);
  const double full = kWidth - 20;
  labels.Place(
      {{kWidth / 2, 22, "middle"}}, 16,
      Fit("tandem-plan: " + in.model.name + ", " + Name(in.algorithm) + " " + Name(in.formats) +
              (in.fsdp2 ? ", FSDP2 over " + std::to_string(plan.shard_size) + " ranks" : ""),
          16, full));
  std::string headroom =
      in.gpu_headroom_fraction > 0 ? Fmt("%g%%", in.gpu_headroom_fraction * 100) : std::string();
  if (in.gpu_headroom_bytes > 0)
    headroom += (headroom.empty() ? "" : " + ") + Fmt("%.1f GiB", ToGiB(in.gpu_headroom_bytes));
  if (headroom.empty()) headroom = "none";
  const bool eager = in.activation_shape.attention == Attention::kEager ||
                     (plan.activation_model == ActivationModel::kTransformers &&
                      in.model.transformer.eager_attention);
  const std::string act =
      in.activation_bytes_given          ? "given"
      : in.activation_shape.seq_len == 0 ? "none"
      : std::string(plan.activation_model == ActivationModel::kTransformers
                        ? "estimated as transformers runs it, "
                        : "estimated, ") +
            (eager ? "eager attention" : "FlashAttention-style");
  labels.Place(
      {{kWidth / 2, 42, "middle"}}, 12,
      Fit("GPU " + Fmt("%.1f GiB", ToGiB(in.gpu_budget)) + ", " +
              Fmt("%.1f GiB", ToGiB(plan.usable_gpu_bytes)) + " usable (headroom " + headroom +
              "); activations " + Fmt("%.1f GiB", ToGiB(plan.activation_bytes)) + " (" + act + ")",
          12, full));
  labels.Place({{kWidth / 2 - 10, 62, "end"}}, 12,
               in.fsdp2 ? "GPU memory, per rank (rank 0)" : "GPU memory, per GPU", Fill(kGpu));
  labels.Place({{kWidth / 2 + 10, 62, "start"}}, 12, "host memory, per node", Fill(kHost));
  labels.Place({{kWidth / 2, kHeight - 8, "middle"}}, 12,
               Fit((plan.feasible ? "fits" : "does not fit") + std::string("; profile: ") +
                       in.profile.machine,
                   12, full));

  // The scale covers the data and the GPU budget; the host budget only when it is not
  // far above them (a 2 TiB host line would flatten every curve), else it is named.
  double peak = ToGiB(in.gpu_budget);
  for (const FractionPoint& p : plan.sweep)
    peak = std::max({peak, ToGiB(p.gpu.total()), ToGiB(p.host_node_bytes)});
  const bool host_on_scale = ToGiB(in.host_budget) <= 2 * peak;
  if (host_on_scale) peak = std::max(peak, ToGiB(in.host_budget));
  Panel mem{90, 100, 700, 250, 0, 0};
  NiceAxis(peak * 1.05, &mem.ymax, &mem.ystep);
  double tmax = 0;
  for (const FractionPoint& p : plan.sweep) tmax = std::max(tmax, p.time.step_ms);
  Panel time{90, 450, 700, 250, 0, 0};
  NiceAxis(tmax * 1.05, &time.ymax, &time.ystep);
  Axes(&s, &labels, mem, "Memory vs offload fraction", "GiB");
  Axes(&s, &labels, time,
       "Predicted optimizer step time vs offload fraction (offload_compute " +
           OffloadComputeName(in.offload_compute) + ")",
       "step time (ms)");

  Overflow overflow;
  HLine(&s, &labels, &overflow, mem, ToGiB(in.gpu_budget), kGpu,
        "GPU budget " + Fmt("%.1f GiB", ToGiB(in.gpu_budget)));
  if (plan.usable_gpu_bytes != in.gpu_budget)
    HLine(
        &s, &labels, &overflow, mem, ToGiB(plan.usable_gpu_bytes), kGpu,
        "usable " + Fmt("%.1f GiB", ToGiB(plan.usable_gpu_bytes)) + " (headroom " + headroom + ")");
  const std::string host_label = "host budget " + Fmt("%.0f GiB", ToGiB(in.host_budget));
  if (host_on_scale) {
    HLine(&s, &labels, &overflow, mem, ToGiB(in.host_budget), kHost, host_label);
  } else if (!labels.Place({{mem.x0 + mem.w - 4, mem.y0 + 14, "end"},
                            {mem.x0 + mem.w - 4, mem.y0 + 30, "end"},
                            {mem.x0 + 4, mem.y0 + 14, "start"}},
                           12, host_label + " (above the scale)", Fill(kHost))) {
    overflow.Place(&labels, host_label + " (above the scale)", kHost);
  }
  Polyline(
      &s, mem, plan.sweep, [&](const FractionPoint& p) { return p.gpu.total() / gib; }, kGpu);
  Polyline(
      &s, mem, plan.sweep, [&](const FractionPoint& p) { return p.host_node_bytes / gib; }, kHost);
  Polyline(
      &s, time, plan.sweep, [](const FractionPoint& p) { return p.time.step_ms; }, kTime);
  if (plan.feasible) {
    const std::string label = "recommended " + Fmt("%.4f", plan.recommended.fraction);
    VLine(&s, &labels, &overflow, mem, plan.recommended.fraction, label);
    const StepTime& t = plan.recommended.time;
    VLine(&s, &labels, &overflow, time, plan.recommended.fraction,
          t.streamed > 0 ? label + Fmt(", GPU computes %.2f", t.split.share) + " (" +
                               t.split.bound() + "-bound)"
                         : label);
  }
  // The bottleneck of each sweep point, where there is room (the text report has all).
  for (const FractionPoint& p : plan.sweep) {
    const double x = time.X(p.fraction), y = time.Y(p.time.step_ms);
    labels.Place({{x, y - 7, "middle"}, {x, y + 16, "middle"}}, 9, Name(p.time.bottleneck),
                 Fill("#555"));
  }
  s += "</svg>\n";
  return s;
}

}  // namespace tandem::planner
