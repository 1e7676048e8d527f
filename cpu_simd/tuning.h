// Internal tuning knobs of the host kernels, for the benchmark. They change speed only,
// never results (Note [Same ops, same order] in step_kernel.h).
#pragma once

namespace tandem::cpu {

// Software prefetch distance in quantization groups (Note [Software prefetch],
// step_kernel.h): 0 (off), 8, 16, 32 or 64; SetPrefetchGroups rounds any other positive
// value up to the next of these (64 at most). Default: see docs/host_kernels.md
// ("Prefetch and non-temporal stores"); the environment variable TANDEM_PREFETCH_GROUPS
// overrides the default at the first call. Thread-safe.
int PrefetchGroups();
void SetPrefetchGroups(int groups);

// Non-temporal stores for the parameter write-back (Note [Non-temporal parameter stores]
// in step_kernel.h). Environment variable TANDEM_NT_PARAM=0/1 overrides the default at
// the first call. Thread-safe.
bool NtParamStores();
void SetNtParamStores(bool on);

// Note [Two groups per iteration] (step_kernel.h), AVX-512 q8 kernels: 0 = one group per
// iteration everywhere; 1 (default) = two groups for every q8 kernel; 2 = two groups for
// kernels without a q8 variance (Lion, SGD), one for AdamW. On the dev box pairing made
// Lion/SGD ecc8 7% faster in cache and AdamW ecc8 2% slower; on the H200 host (16
// threads, 256 Mi elements) AdamW ecc8/q8/q8 ran 10.49 Gparam/s paired against 9.68
// unpaired (+8%), hence 1. Environment variable TANDEM_PAIRED_GROUPS overrides the
// default at the first call. Thread-safe.
int PairedGroups();
void SetPairedGroups(int mode);

// Note [VBMI momentum decode] (ops_avx512vbmi.h): on CPUs with AVX512-VBMI, the AVX-512
// kernels of spans with a q8 momentum decode its codes 64 at a time by byte-table lookups
// (the same bits). VbmiDecode() is true when the CPU has AVX-512 and VBMI and the decode is
// enabled (default: enabled; environment variable TANDEM_VBMI_DECODE=0 disables it at the
// first call). SetVbmiDecode(false) forces the plain AVX-512 path (tests, benchmark);
// SetVbmiDecode(true) re-enables it where the CPU has VBMI. Thread-safe.
bool VbmiDecode();
void SetVbmiDecode(bool on);

}  // namespace tandem::cpu
