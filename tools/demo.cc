// tandem-demo: steps the toy problems with every algorithm and state format using the
// scalar reference step, and prints the loss reached and the bytes per parameter.
// `tandem-demo --version` prints the version and exits.
#include <cstdio>
#include <cstring>

#include "tandem/types.h"
#include "tandem/version.h"
#include "tools/toy_problem.h"

int main(int argc, char** argv) {
  using namespace tandem;
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("tandem-demo %s\n", TANDEM_VERSION_STRING);
    return 0;
  }
  if (argc > 1) {
    std::fprintf(stderr, "usage: tandem-demo [--version]\n");
    return 2;
  }
  auto lsq = toy::LeastSquares(100, 400, 10.0, 3);
  auto logi = toy::Logistic(100, 400, 5);
  struct Algo {
    Algorithm algo;
    double lr;
    HyperParams h;
  };
  HyperParams lion;
  lion.beta2 = 0.99;
  HyperParams sgd;
  sgd.momentum = 0.9;
  const Algo algos[] = {{Algorithm::kAdamW, 2e-2, {}}, {Algorithm::kLion, 3e-3, lion},
                        {Algorithm::kSGD, 5e-2, sgd}};
  const StateFormats formats[] = {
      {MasterFormat::kF32, MomentFormat::kF32, MomentFormat::kF32},
      {MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kQ8},
      {MasterFormat::kBF16Ecc8, MomentFormat::kQ8, MomentFormat::kQ8},
      {MasterFormat::kBF16, MomentFormat::kQ8, MomentFormat::kQ8},
  };
  std::printf(
      "Tandem demo: every algorithm and state format trains two toy problems for 400 steps\n"
      "with the scalar reference step (CPU). The two loss columns are the training loss\n"
      "after the 400 steps (lower is better); compare each row with its algorithm's\n"
      "f32/f32/f32 row, the same update in full precision.\n\n");
  std::printf("%-6s %-32s %13s %19s %14s\n", "algo", "formats", "state B/param",
              "least-squares loss", "logistic loss");
  for (const Algo& a : algos) {
    for (StateFormats f : formats) {
      if (!HasVariance(a.algo)) f.variance = MomentFormat::kF32;
      toy::RunConfig cfg{a.algo, a.h, f, a.lr, 400};
      const double bytes = double(StateBytes(a.algo, a.h, f, 1 << 20)) / double(1 << 20);
      std::printf("%-6s %-32s %13.4f %19.6f %14.6f\n", Name(a.algo), Name(f).c_str(), bytes,
                  toy::Train(*lsq, cfg), toy::Train(*logi, cfg));
    }
  }
  std::printf(
      "\nstate B/param: the optimizer state's bytes per parameter: master (the bf16 weight\n"
      "included) + moments + their group scales.\n");
  return 0;
}
