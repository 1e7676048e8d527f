// Small deterministic training problems used by the convergence tests and the demo:
// an ill-conditioned least-squares fit and a logistic regression, both with noise so
// that their minimum loss is well above zero.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tandem/types.h"

namespace tandem::toy {

class Problem {
 public:
  virtual ~Problem() = default;
  virtual std::string name() const = 0;
  virtual size_t dim() const = 0;
  virtual double Loss(const std::vector<float>& w) const = 0;
  // Gradient at w of the loss over `batch` samples drawn with `seed` (batch 0: all
  // samples), computed in double and rounded to fp32.
  virtual void Grad(const std::vector<float>& w, size_t batch, unsigned seed,
                    std::vector<float>& g) const = 0;
  virtual std::vector<float> Init() const = 0;
};

// dim features, samples rows; column scales fall geometrically from 1 to 1/cond_sqrt.
std::unique_ptr<Problem> LeastSquares(size_t dim, size_t samples, double cond_sqrt,
                                      unsigned seed);
std::unique_ptr<Problem> Logistic(size_t dim, size_t samples, unsigned seed);

struct RunConfig {
  Algorithm algo = Algorithm::kAdamW;
  HyperParams hyper;
  StateFormats formats;
  double lr = 1e-2;
  int steps = 300;
  size_t batch = 32;  // minibatch size; 0 = full batch
};

// Trains with the scalar reference step and returns the final loss.
double Train(const Problem& p, const RunConfig& cfg);

}  // namespace tandem::toy
