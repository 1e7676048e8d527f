// Getting a span's next groups closer before they are used: the software prefetch of
// every array the kernel reads, a fixed distance ahead of the span loop. Hints only, never
// arithmetic: results do not depend on them. Relies on kernel_args.h (Ptrs, Ctx).
#pragma once

#include <cstddef>

#include "cpu_simd/kernel_args.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// Note [Software prefetch]: with a prefetch distance above 0 (Ctx::prefetch_groups, from
// HostKernelOptions::prefetch_groups) the span loop asks for the lines of every array it
// reads that distance ahead (prefetcht0: into L1 and L2, since every state array is read,
// modified and written back; prefetchnta made the kernels 30-40% slower on the H200
// host). The distance is a compile-time constant per case of PrefetchFor, so each
// prefetch is one instruction on a pointer the loop already holds. docs/host_kernels.md,
// "Prefetch and non-temporal stores".
TANDEM_SIMD_INLINE void Prefetch(const void* p) { __builtin_prefetch(p, 0, 3); }

// Prefetches the lines of kN elements of an array of kB-byte elements, d elements ahead
// of base (each line once when kN * kB is a multiple of 64).
template <size_t kN, size_t kB>
TANDEM_SIMD_INLINE void PrefetchLines(const void* base, size_t d) {
  const auto* b = static_cast<const unsigned char*>(base) + d * kB;
  if constexpr (kN * kB >= 64) {
    static_assert(kN * kB % 64 == 0);
    for (size_t off = 0; off < kN * kB; off += 64) Prefetch(b + off);
  } else {
    Prefetch(b);
  }
}

// Prefetches the kN elements that start d elements ahead of p, every array the kernel
// reads; one line of each scale array.
template <class Ops, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, size_t kN>
TANDEM_SIMD_INLINE void PrefetchAhead(const Ctx<Ops>& c, const Ptrs& p, size_t d) {
  if constexpr (GI == GradIo::kF32)
    PrefetchLines<kN, 4>(p.grad, d);
  else if constexpr (GI == GradIo::kBF16)
    PrefetchLines<kN, 2>(p.grad, d);
  else if (c.grad_size == 4)
    PrefetchLines<kN, 4>(p.grad, d);
  else
    PrefetchLines<kN, 2>(p.grad, d);
  if constexpr (MF == MasterFormat::kF32) PrefetchLines<kN, 4>(p.w_f32, d);
  if constexpr (MF != MasterFormat::kF32) PrefetchLines<kN, 2>(p.w_bf16, d);
  if constexpr (MF == MasterFormat::kBF16Ecc8) PrefetchLines<kN, 1>(p.ecc8, d);
  if constexpr (MF == MasterFormat::kBF16Ecc16) PrefetchLines<kN, 2>(p.ecc16, d);
  if constexpr (MOM == Moment::kF32) PrefetchLines<kN, 4>(p.m_f32, d);
  if constexpr (MOM == Moment::kQ8) {
    PrefetchLines<kN, 1>(p.m_codes, d);
    Prefetch(reinterpret_cast<const unsigned char*>(p.m_scale) + d / 16);
  }
  if constexpr (VAR == Moment::kF32) PrefetchLines<kN, 4>(p.v_f32, d);
  if constexpr (VAR == Moment::kQ8) {
    PrefetchLines<kN, 1>(p.v_codes, d);
    Prefetch(reinterpret_cast<const unsigned char*>(p.v_scale) + d / 16);
  }
}

// The kN elements c.prefetch_groups groups ahead (one of the distances Resolve allows,
// host_kernel_options.h).
template <class Ops, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI, size_t kN>
TANDEM_SIMD_INLINE void PrefetchFor(const Ctx<Ops>& c, const Ptrs& p) {
  constexpr size_t G = kQuantGroup;
  switch (c.prefetch_groups) {
    case 8: PrefetchAhead<Ops, MF, MOM, VAR, GI, kN>(c, p, 8 * G); break;
    case 16: PrefetchAhead<Ops, MF, MOM, VAR, GI, kN>(c, p, 16 * G); break;
    case 32: PrefetchAhead<Ops, MF, MOM, VAR, GI, kN>(c, p, 32 * G); break;
    case 64: PrefetchAhead<Ops, MF, MOM, VAR, GI, kN>(c, p, 64 * G); break;
    default: break;
  }
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
