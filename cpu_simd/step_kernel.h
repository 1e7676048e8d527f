// The host step kernel's span loop, written once against xsimd::batch<float, Arch> and
// the small per-ISA loader/storer layer `Ops` (ops_avx512.h, ops_avx2.h, ops_sse.h,
// ops_neon.h, ops_sve.h): the span's full groups one or two at a time (group_step.h,
// pairing.h) with the software prefetch ahead of them (prefetch.h), then its partial last
// group. Relies on those layers for all per-element work and memory access;
// kernel_dispatch.h maps a span to its instantiation, and kernel_<isa>.cc compiles it per
// ISA (kernel_args.h says how).
//
// A span's partial last group is copied into zero-padded group buffers, stepped by the
// same code and copied back (the padding is zero state with a zero gradient: it never
// changes the group max).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu_simd/group_io.h"
#include "cpu_simd/group_step.h"
#include "cpu_simd/kernel_args.h"
#include "cpu_simd/pairing.h"
#include "cpu_simd/prefetch.h"
#include "cpu_simd/span_kernels.h"

namespace tandem::cpu::TANDEM_ISA_NS {

// Note [Non-temporal parameter stores]: the parameter copy is a write-only stream; with
// ordinary stores each of its lines is first read (read-for-ownership), 2 extra bytes per
// element for a bf16 parameter. Streaming stores skip that read. They are used only when
// the parameter is 64-byte aligned (then every store is aligned), not aliased with the
// master, and not fp16; an sfence at the end of the span orders them before the caller
// (or the TBB join) publishes the result. The aarch64 Ops (ops_neon.h, ops_sve.h) write
// this stream with ordinary stores (Arm cores detect a write-only stream themselves: write
// streaming mode) and need no fence.
template <class Ops, Algo A, MasterFormat MF, Moment MOM, Moment VAR, GradIo GI = GradIo::kRuntime,
          ParamIo PI = ParamIo::kRuntime>
void RunSpan(const StepScalars& s, const StepSpan& sp, const SpanTuning& tuning) {
  const Ctx<Ops> c(s, sp, tuning.prefetch_groups, tuning.nt_param);
  Ptrs p{static_cast<const unsigned char*>(sp.grad),
         static_cast<unsigned char*>(sp.param),
         sp.master.f32,
         sp.master.bf16,
         sp.master.ecc8,
         sp.master.ecc16,
         MOM == Moment::kNone ? nullptr : sp.m.f32,
         MOM == Moment::kNone ? nullptr : sp.m.codes,
         MOM == Moment::kNone ? nullptr : sp.m.scales,
         VAR == Moment::kNone ? nullptr : sp.v.f32,
         VAR == Moment::kNone ? nullptr : sp.v.codes,
         VAR == Moment::kNone ? nullptr : sp.v.scales};
  const size_t full = sp.n / kQuantGroup;
  const size_t pf = static_cast<size_t>(c.prefetch_groups);
  size_t gi = 0;
  if constexpr (kPairedTails<Ops, MOM, VAR>) {
    // Note [Two groups per iteration] (pairing.h), as the options ask.
    const bool paired = PairsGroups<Ops, MOM, VAR>(tuning);
    for (; paired && gi + 2 <= full; gi += 2) {
      if (pf != 0 && gi + pf + 1 < full) PrefetchFor<Ops, MF, MOM, VAR, GI, 2 * kQuantGroup>(c, p);
      StepTwoGroups<Ops, A, MF, MOM, VAR, GI, PI>(c, p);
      Advance<MF, MOM, VAR, GI, PI>(p, c.grad_size, c.param_size);
      Advance<MF, MOM, VAR, GI, PI>(p, c.grad_size, c.param_size);
    }
  }
  for (; gi < full; ++gi) {
    if (pf != 0 && gi + pf < full) PrefetchFor<Ops, MF, MOM, VAR, GI, kQuantGroup>(c, p);
    StepGroup<Ops, A, MF, MOM, VAR, GI, PI>(c, p);
    Advance<MF, MOM, VAR, GI, PI>(p, c.grad_size, c.param_size);
  }
  if (c.nt_param) StreamFence();
  const size_t len = sp.n - full * kQuantGroup;
  if (len == 0) return;

  // The partial last group: zero-padded copies, the same group code, copy back.
  constexpr size_t G = kQuantGroup;
  alignas(64) unsigned char grad[G * 4] = {}, param[G * 4] = {};
  alignas(64) float w_f32[G] = {}, m_f32[G] = {}, v_f32[G] = {};
  alignas(64) uint16_t w_bf16[G] = {};
  alignas(64) int8_t ecc8[G] = {};
  alignas(64) int16_t ecc16[G] = {};
  alignas(64) uint8_t m_codes[G] = {}, v_codes[G] = {};
  uint16_t m_scale = 0, v_scale = 0;
  CopyIf(grad, p.grad, len * c.grad_size);
  CopyIf(w_f32, p.w_f32, len * 4);
  CopyIf(w_bf16, p.w_bf16, len * 2);
  CopyIf(ecc8, p.ecc8, len);
  CopyIf(ecc16, p.ecc16, len * 2);
  CopyIf(m_f32, p.m_f32, len * 4);
  CopyIf(m_codes, p.m_codes, len);
  CopyIf(&m_scale, p.m_scale, 2);
  CopyIf(v_f32, p.v_f32, len * 4);
  CopyIf(v_codes, p.v_codes, len);
  CopyIf(&v_scale, p.v_scale, 2);
  const Ptrs t{grad,
               p.param ? param : nullptr,
               p.w_f32 ? w_f32 : nullptr,
               p.w_bf16 ? w_bf16 : nullptr,
               p.ecc8 ? ecc8 : nullptr,
               p.ecc16 ? ecc16 : nullptr,
               p.m_f32 ? m_f32 : nullptr,
               p.m_codes ? m_codes : nullptr,
               p.m_scale ? &m_scale : nullptr,
               p.v_f32 ? v_f32 : nullptr,
               p.v_codes ? v_codes : nullptr,
               p.v_scale ? &v_scale : nullptr};
  Ctx<Ops> ct = c;
  ct.nt_param = false;  // the tail buffers are on the stack, unaligned for streaming
  StepGroup<Ops, A, MF, MOM, VAR, GradIo::kRuntime, ParamIo::kRuntime>(ct, t);
  CopyIf(p.param, t.param, len * c.param_size);
  CopyIf(p.w_f32, t.w_f32, len * 4);
  CopyIf(p.w_bf16, t.w_bf16, len * 2);
  CopyIf(p.ecc8, t.ecc8, len);
  CopyIf(p.ecc16, t.ecc16, len * 2);
  CopyIf(p.m_f32, t.m_f32, len * 4);
  CopyIf(p.m_codes, t.m_codes, len);
  CopyIf(p.m_scale, t.m_scale, 2);
  CopyIf(p.v_f32, t.v_f32, len * 4);
  CopyIf(p.v_codes, t.v_codes, len);
  CopyIf(p.v_scale, t.v_scale, 2);
}

}  // namespace tandem::cpu::TANDEM_ISA_NS
