#include "tools/toy_problem.h"

#include <cmath>
#include <random>

#include "engine/reference_step.h"
#include "engine/tensor_state.h"

namespace tandem::toy {
namespace {

// The sample rows of one minibatch: all rows for batch 0, else `batch` drawn with `seed`.
std::vector<size_t> Rows(size_t n, size_t batch, unsigned seed) {
  std::vector<size_t> rows;
  if (batch == 0 || batch >= n) {
    for (size_t r = 0; r < n; ++r) rows.push_back(r);
    return rows;
  }
  std::mt19937 rng(seed);
  for (size_t i = 0; i < batch; ++i) rows.push_back(rng() % n);
  return rows;
}

class LeastSquaresProblem : public Problem {
 public:
  LeastSquaresProblem(size_t dim, size_t samples, double cond_sqrt, unsigned seed)
      : d_(dim), n_(samples), a_(dim * samples), b_(samples) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> nd;
    std::vector<double> truth(d_);
    for (auto& x : truth) x = nd(rng);
    for (size_t r = 0; r < n_; ++r) {
      double dot = 0;
      for (size_t c = 0; c < d_; ++c) {
        const double scale = std::pow(cond_sqrt, -double(c) / double(d_ - 1));
        a_[r * d_ + c] = nd(rng) * scale;
        dot += a_[r * d_ + c] * truth[c];
      }
      b_[r] = dot + 0.5 * nd(rng);
    }
  }
  std::string name() const override { return "least-squares"; }
  size_t dim() const override { return d_; }
  double Loss(const std::vector<float>& w) const override {
    double s = 0;
    for (size_t r = 0; r < n_; ++r) {
      const double e = Residual(w, r);
      s += e * e;
    }
    return s / (2.0 * n_);
  }
  void Grad(const std::vector<float>& w, size_t batch, unsigned seed,
            std::vector<float>& g) const override {
    std::vector<double> acc(d_, 0.0);
    const std::vector<size_t> rows = Rows(n_, batch, seed);
    for (size_t r : rows) {
      const double e = Residual(w, r);
      for (size_t c = 0; c < d_; ++c) acc[c] += e * a_[r * d_ + c];
    }
    g.resize(d_);
    for (size_t c = 0; c < d_; ++c) g[c] = static_cast<float>(acc[c] / double(rows.size()));
  }
  std::vector<float> Init() const override { return std::vector<float>(d_, 0.0f); }

 private:
  double Residual(const std::vector<float>& w, size_t r) const {
    double dot = 0;
    for (size_t c = 0; c < d_; ++c) dot += a_[r * d_ + c] * w[c];
    return dot - b_[r];
  }
  size_t d_, n_;
  std::vector<double> a_, b_;
};

class LogisticProblem : public Problem {
 public:
  LogisticProblem(size_t dim, size_t samples, unsigned seed)
      : d_(dim), n_(samples), x_(dim * samples), y_(samples) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> nd;
    std::uniform_real_distribution<double> ud;
    std::vector<double> truth(d_);
    for (auto& t : truth) t = nd(rng) / std::sqrt(double(d_)) * 3.0;
    for (size_t r = 0; r < n_; ++r) {
      double dot = 0;
      for (size_t c = 0; c < d_; ++c) {
        x_[r * d_ + c] = nd(rng);
        dot += x_[r * d_ + c] * truth[c];
      }
      const double p = 1.0 / (1.0 + std::exp(-dot));
      y_[r] = ud(rng) < p ? 1.0 : -1.0;  // labels drawn from the model: noisy
    }
  }
  std::string name() const override { return "logistic"; }
  size_t dim() const override { return d_; }
  double Loss(const std::vector<float>& w) const override {
    double s = 0;
    for (size_t r = 0; r < n_; ++r) s += std::log1p(std::exp(-y_[r] * Dot(w, r)));
    return s / n_;
  }
  void Grad(const std::vector<float>& w, size_t batch, unsigned seed,
            std::vector<float>& g) const override {
    std::vector<double> acc(d_, 0.0);
    const std::vector<size_t> rows = Rows(n_, batch, seed);
    for (size_t r : rows) {
      const double z = y_[r] * Dot(w, r);
      const double coef = -y_[r] / (1.0 + std::exp(z));
      for (size_t c = 0; c < d_; ++c) acc[c] += coef * x_[r * d_ + c];
    }
    g.resize(d_);
    for (size_t c = 0; c < d_; ++c) g[c] = static_cast<float>(acc[c] / double(rows.size()));
  }
  std::vector<float> Init() const override { return std::vector<float>(d_, 0.0f); }

 private:
  double Dot(const std::vector<float>& w, size_t r) const {
    double dot = 0;
    for (size_t c = 0; c < d_; ++c) dot += x_[r * d_ + c] * w[c];
    return dot;
  }
  size_t d_, n_;
  std::vector<double> x_, y_;
};

}  // namespace

std::unique_ptr<Problem> LeastSquares(size_t dim, size_t samples, double cond_sqrt,
                                      unsigned seed) {
  return std::make_unique<LeastSquaresProblem>(dim, samples, cond_sqrt, seed);
}
std::unique_ptr<Problem> Logistic(size_t dim, size_t samples, unsigned seed) {
  return std::make_unique<LogisticProblem>(dim, samples, seed);
}

double Train(const Problem& p, const RunConfig& cfg) {
  const size_t n = p.dim();
  std::vector<float> w = p.Init(), g;
  TensorState st(cfg.algo, cfg.hyper, cfg.formats, w.data(), n);
  for (int t = 1; t <= cfg.steps; ++t) {
    for (size_t i = 0; i < n; ++i) w[i] = st.Master(i);
    p.Grad(w, cfg.batch, 1000u + static_cast<unsigned>(t), g);
    const StepScalars s = ComputeStepScalars(cfg.algo, cfg.hyper, cfg.lr, t, 1.0);
    ReferenceStep(s, st.Span(0, n, g.data(), DType::kF32));
  }
  for (size_t i = 0; i < n; ++i) w[i] = st.Master(i);
  return p.Loss(w);
}

}  // namespace tandem::toy
