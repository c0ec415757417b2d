// Per-CTA event timestamps for latency studies (compile-time: -DFLASHVERIFY_TRACE; compiled out otherwise,
// so the measured kernels are unchanged). Thread 0 of each CTA stores (%globaltimer, clock64) pairs for
// up to kTraceEvents events in a device buffer the dispatcher allocates on the first eager call; the
// library writes the buffer of the last launch to $FV_TRACE_OUT at exit (scripts/trace-summary reads it).
// Verify CTAs take records [0, kTraceBlocks), combine blocks [kTraceBlocks, 2 kTraceBlocks); blocks past
// kTraceBlocks in either kernel are not recorded.
#pragma once

#include <cstdint>

namespace fv {

constexpr int kTraceBlocks = 8192;
constexpr int kTraceEvents = 15;
constexpr int kTraceWords = 32;  // a record: smid, tag, then (globaltimer, clock64) per event

#if defined(FLASHVERIFY_TRACE)
// region: 0 verify, 1 combine; block: the block's index within its kernel
__device__ __forceinline__ void trace_event(uint64_t* t, int region, int64_t block, int ev, uint64_t tag = 0) {
  if (t == nullptr || threadIdx.x != 0 || block >= kTraceBlocks || ev >= kTraceEvents) return;
  block += int64_t(region) * kTraceBlocks;
  uint64_t g;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
  const uint64_t c = clock64();
  uint64_t* r = t + block * kTraceWords;
  if (ev == 0) {
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    r[0] = sm;
    r[1] = tag;
    for (int e = 1; e < kTraceEvents; ++e) r[2 + 2 * e] = r[3 + 2 * e] = 0;  // events of an earlier launch
  }
  if (region == 0 && ev == 2)  // a verify CTA's next request segment: its step events start afresh
    for (int e = 3; e < kTraceEvents; ++e) r[2 + 2 * e] = r[3 + 2 * e] = 0;
  r[2 + 2 * ev] = g;
  r[3 + 2 * ev] = c;
}
#define FV_TRACE(BLOCK, EV) trace_event(p.trace, 0, (BLOCK), (EV))
#define FV_TRACE_TAG(BLOCK, EV, TAG) trace_event(p.trace, 0, (BLOCK), (EV), (TAG))
#define FV_TRACE_COMBINE(EV) trace_event(p.trace, 1, blockIdx.x, (EV))
#else
#define FV_TRACE(BLOCK, EV) ((void)0)
#define FV_TRACE_TAG(BLOCK, EV, TAG) ((void)0)
#define FV_TRACE_COMBINE(EV) ((void)0)
#endif

}  // namespace fv
