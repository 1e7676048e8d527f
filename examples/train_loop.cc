// A complete training-loop integration of tandem::HybridOptimizer, compiled and run in CI.
//
// It trains a tiny linear model y = W x on synthetic data. With a CUDA device the
// parameters and gradients live on the GPU and half of the optimizer state is offloaded to
// the host; without one, the same code runs in host mode. The forward/backward here is a
// plain CPU loop standing in for your framework: what matters is how the optimizer is
// created, stepped, inspected and checkpointed.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "tandem/error.h"
#include "tandem/optimizer.h"

#if TANDEM_HAS_CUDA
#include <cuda_runtime.h>
#endif

int main() {
  using namespace tandem;
  const int in = 64, out = 48, batch = 256;
  std::mt19937 rng(0);
  std::normal_distribution<float> nd;
  std::vector<float> truth(out * in), w(out * in, 0.0f), b(out, 0.0f);
  for (float& t : truth) t = nd(rng) * 0.3f;
  std::vector<float> gw(w.size()), gb(b.size());

  // 1. Describe the tensors: name, size, dtypes, where the parameter and its gradient live.
  [[maybe_unused]] const bool gpu = CudaDeviceAvailable();  // (unused without CUDA)
  void *dw = w.data(), *db = b.data(), *dgw = gw.data(), *dgb = gb.data();
#if TANDEM_HAS_CUDA
  if (gpu) {
    cudaMalloc(&dw, w.size() * 4);
    cudaMalloc(&db, b.size() * 4);
    cudaMalloc(&dgw, gw.size() * 4);
    cudaMalloc(&dgb, gb.size() * 4);
    cudaMemcpy(dw, w.data(), w.size() * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(db, b.data(), b.size() * 4, cudaMemcpyHostToDevice);
  }
#endif
  std::vector<TensorSpec> specs = {
      {"linear.weight", w.size(), DType::kF32, DType::kF32, dw, dgw, 0},
      {"linear.bias", b.size(), DType::kF32, DType::kF32, db, dgb, 1},
  };

  // 2. Configure: AdamW, no decay on the bias, quantized state, half of it on the host.
  OptimizerConfig cfg;
  cfg.algorithm = Algorithm::kAdamW;
  HyperParams decay, no_decay;
  decay.weight_decay = 0.01;
  cfg.groups = {decay, no_decay};
  cfg.formats = {MasterFormat::kBF16Ecc16, MomentFormat::kQ8, MomentFormat::kQ8};
  // The 1-D bias keeps f32 moments (sharded, its q8 groups of 32 could be split); the
  // weight uses the configured formats above (docs/user_guide.md, per-tensor formats).
  specs[1].formats = StateFormats{MasterFormat::kBF16Ecc16, MomentFormat::kF32, MomentFormat::kF32};
  cfg.offload_fraction = 0.5;
  cfg.chunk_elements = 512;

  try {
    HybridOptimizer opt(specs, cfg);
    std::printf("mode: %s, %llu of %llu elements offloaded\n",
                opt.mode() == ExecutionMode::kGpu ? "GPU" : "host",
                (unsigned long long)opt.placement().offloaded,
                (unsigned long long)opt.placement().total);

    // 3. Train: forward/backward (here on the CPU), then one Step per iteration.
    double loss = 0;
    for (int it = 1; it <= 300; ++it) {
#if TANDEM_HAS_CUDA
      if (gpu) {
        cudaMemcpy(w.data(), dw, w.size() * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(b.data(), db, b.size() * 4, cudaMemcpyDeviceToHost);
      }
#endif
      std::fill(gw.begin(), gw.end(), 0.0f);
      std::fill(gb.begin(), gb.end(), 0.0f);
      loss = 0;
      std::vector<float> x(in);
      for (int s = 0; s < batch; ++s) {
        for (float& v : x) v = nd(rng);
        for (int o = 0; o < out; ++o) {
          float y = b[o], t = 0;
          for (int i = 0; i < in; ++i) {
            y += w[o * in + i] * x[i];
            t += truth[o * in + i] * x[i];
          }
          const float e = y - t;
          loss += 0.5 * e * e / batch;
          for (int i = 0; i < in; ++i) gw[o * in + i] += e * x[i] / batch;
          gb[o] += e / batch;
        }
      }
#if TANDEM_HAS_CUDA
      if (gpu) {
        cudaMemcpy(dgw, gw.data(), gw.size() * 4, cudaMemcpyHostToDevice);
        cudaMemcpy(dgb, gb.data(), gb.size() * 4, cudaMemcpyHostToDevice);
      }
#endif
      const double lr = 0.02 * std::min(1.0, it / 20.0);  // warm-up schedule
      const StepResult r = opt.Step(lr, {.max_grad_norm = 10.0});
      if (!r.applied) std::printf("step %d skipped: non-finite gradient\n", it);
      if (it % 100 == 0) std::printf("step %3d loss %.5f grad-norm %.4f\n", it, loss, r.grad_norm);
    }

    // 4. Inspect: memory by category, stage times of the last step.
    const MemoryReport m = opt.memory();
    const StageTimes t = opt.last_step_times();
    std::printf("memory: device %llu B, host %llu B; last step %.3f ms (host update %.3f ms)\n",
                (unsigned long long)m.device.total(), (unsigned long long)m.host.total(),
                t.step_ms, t.host_update_ms);

    // 5. Snapshot the state (tandem/checkpoint.h writes it to disk) and restore it.
    const OptimizerSnapshot snap = opt.Snapshot();
    opt.Restore(snap);
    std::printf("snapshot: %zu tensors at step %lld\n", snap.tensors.size(),
                (long long)snap.step);
    if (loss > 0.05) {
      std::printf("did not converge: loss %.4f\n", loss);
      return 1;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
#if TANDEM_HAS_CUDA
  if (gpu) {
    cudaFree(dw);
    cudaFree(db);
    cudaFree(dgw);
    cudaFree(dgb);
  }
#endif
  return 0;
}
