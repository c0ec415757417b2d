// The split-KV tensor-core tree-verify kernel.
//
// One CTA owns (m_tile, partition, kv_head). Its rows are the queries that share kv_head, packed
// token-major: row r of the request is (draft token r / group, q head kv_head * group + r % group), so
// one K/V tile in shared memory serves every q head of the group and every draft token: the prefix is
// read once per KV head (once per m_tile when group * N exceeds the tile; those CTAs are adjacent in
// the grid and run together, so the repeats hit L2).
//
// The batch's key steps (each request: its prefix then its own draft tokens, bn keys a step) are cut
// into `parts` contiguous partitions of equal cost by the prepare kernel (schedule.cuh). A CTA walks the
// request segments of its partition: for each it loads the request's Q tile, streams the segment's
// K (and V) tiles through a cp.async pipeline, gathering prefix rows through the slot indices in place,
// and keeps an online softmax. A request served by one partition gets its output written here;
// otherwise every partition writes a normalised partial (o, lse) and combine.cuh merges them.
//
// Per step: S = Q K^T on a WM x WN warp grid (S_MT x 16 rows x bn/WN keys a warp: S_MT is 1, and 2 in the
// fp8 32-row tiles, whose S grid is one warp row), row max exchanged through shared
// memory, P = exp2(S - m) written to shared memory as 16-bit, then O += P V on a WOM x WON warp grid
// where each warp owns a block of O's columns (MLA's 64 x 512 fp32 accumulator does not fit one warp).
// Three barriers per step. The draft block applies the ancestor mask; the prefix is masked only by a
// sliding window. SGLang's score modifiers (logit cap, xai temperature, window, KV scales) take a second
// scoring path selected by a uniform flag, so the plain path's instructions are unchanged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <cuda_runtime.h>

#include "flashverify/flashverify.h"
#include "../common.h"
#include "../partition.h"
#include "../plan.h"
#include "../smem_layout.h"
#include "../tile_config.h"
#include "mma.cuh"
#include "params.cuh"
#include "row_epilogue.cuh"
#include "trace.cuh"

namespace fv {

// FLASHVERIFY_SMEM_CARVEOUT=0..100 (benchmarks: how the L1 share of a multiprocessor's on-chip memory matters) sets
// each verify kernel's preferred shared-memory carveout, in percent; unset (or out of range): the driver's choice.
inline int smem_carveout_env() {
  static const int v = env_int_in("FLASHVERIFY_SMEM_CARVEOUT", 0, 100, -1);
  return v;
}

// Launches `kernel` (any verify kernel: one VerifyParams argument) with `smem` bytes of dynamic shared memory, raising
// its limit first. The limit is a host-side attribute, not a stream operation: legal while a graph is being captured.
template <class Kernel>
cudaError_t launch_with_smem(Kernel kernel, dim3 grid, int threads, std::size_t smem, const VerifyParams& p,
                             cudaStream_t stream) {
  // (a failed attribute call also sets the thread's last error: cleared here, as after a failed combine launch, so that
  // the next unrelated cudaGetLastError, e.g. PyTorch's after its own kernel, does not report it)
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err == cudaSuccess)
    if (const int carveout = smem_carveout_env(); carveout >= 0)
      err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return err;
  }
  kernel<<<grid, threads, smem, stream>>>(p);
  return cudaGetLastError();
}

// swizzle (the mma.sync tiles' chunk placement) and fp8_half (KV8's 8-byte copies): smem_layout.h

// The swizzle seen from one lane of an ldmatrix: the lane always addresses rows with the same low bits
// (its row is a multiple of 8 plus a lane-fixed part) and chunk `c + hi` for an even, compile-time `c`
// and a lane-fixed hi in {0, 1}. The XOR then only depends on (c mod G) / 2, so the four possible
// byte offsets are computed once and every ldmatrix address becomes base + immediate.
template <int CHUNKS>
struct LaneSwizzle {
  static constexpr int G = CHUNKS >= 8 ? 8 : CHUNKS;
  uint32_t off[G / 2];
  __device__ __forceinline__ LaneSwizzle(int row, int hi) {
    int bits;
    if constexpr (CHUNKS >= 8) bits = row & 7;
    else if constexpr (CHUNKS == 4) bits = (row >> 1) & 3;
    else bits = (row >> 2) & 1;
    const int y = hi ^ bits;
#pragma unroll
    for (int k = 0; k < G / 2; ++k) off[k] = static_cast<uint32_t>(((2 * k) ^ y) * 16);
  }
  // byte offset, within its row, of chunk c + hi (c even)
  __device__ __forceinline__ uint32_t operator()(int c) const { return (c / G) * G * 16 + off[(c % G) / 2]; }
};

// How the CTA's threads cover a ROWS x CHUNKS tile with 16-byte copies: TPR threads per row (8, or
// FORCED_TPR), each taking every TPR-th chunk; the thread block covers RP rows per pass.
template <int ROWS, int CHUNKS, int THREADS, int FORCED_TPR = 0>
struct TileCopy {
  static constexpr int TPR = FORCED_TPR > 0 ? FORCED_TPR : (ROWS * 8 >= THREADS) ? 8 : THREADS / ROWS;
  static constexpr int RP = THREADS / TPR;
  static constexpr int PASSES = ROWS / RP;
  static constexpr int CPT = CHUNKS / TPR;
  static_assert(CHUNKS % TPR == 0, "chunks per row must be a multiple of threads per row");
  static_assert(ROWS % RP == 0 && PASSES >= 1, "rows must be a multiple of rows per pass");
};

// tanh(x) = 1 - 2 / (e^(2x) + 1), clamped where it is +-1 in float (no inf / inf)
__device__ __forceinline__ float tanh_clamped(float x) {
  x = fminf(fmaxf(x, -15.f), 15.f);
  return 1.f - __fdividef(2.f, __expf(2.f * x) + 1.f);
}

// MODS: the kernel with SGLang's score modifiers (a separate instantiation, so that the plain kernel's
// registers and instructions are untouched)
// KV8: the KV pools hold fp8 e4m3 bytes (prefix rows copied 8 bytes a chunk into one half of their 16-byte slot,
// fp8_half, then widened in place by the thread that copied them, before the step's first barrier)
// NARROW: the fp8 32-row tiles without kF16 and kWide below (64-key compact steps in the model's dtype: the tiles as
// they were before v18), for small batches (verify_kernel_narrow; plan.cpp)
template <int CFG, class T, bool MODS, bool KV8, bool NARROW = false>
struct Verify {
  static constexpr TileConfig C = kTileConfigs[CFG];
  static constexpr int BM = C.bm, BN = C.bn, DQK = C.dqk, DV = C.dv;
  static constexpr int STAGES = C.stages;
  // fp8 tiles that widen in registers (kFrag8, below) take an O grid of 32-column warp tiles: each warp
  // widens the V columns it multiplies, so fewer warp rows means fewer conversions of the same V bytes
  // (128-thread tiles only: the 256-thread tiles run at their 128-register cap, where the widening spilled
  // and GQA 8/1 batch 1 measured 27.6 us against 24.6 with the shared-memory widening)
  static constexpr bool kFrag8Shape = KV8 && !C.v_in_k && C.wm * C.wn == 4 && C.bn / C.wn == 32 && C.dqk >= 128 &&
                                      C.dv >= 128 && C.dv % 32 == 0 && (C.wm * C.wn) % (C.dv / 32) == 0;
  static constexpr int WOM = kFrag8Shape ? C.wm * C.wn / (C.dv / 32) : C.wom;
  static constexpr int WON = kFrag8Shape ? C.dv / 32 : C.won;
  // ... and an S grid of one warp row: each warp owns all BM rows (S_MT m-tiles) x BN / 4 keys, so every K
  // fragment it widens serves S_MT MMAs (with 16-row S warps each K byte is widened by every warp row). The
  // row statistics then have 4 partial maxima a row; the partial sums reuse their space (l_part aliases
  // red_max: the maxima are dead once every warp has passed the last step's barrier B).
  static constexpr int WM = kFrag8Shape ? 1 : C.wm, WN = kFrag8Shape ? C.wm * C.wn : C.wn;
  static constexpr bool V_IN_K = C.v_in_k;
  static constexpr int THREADS = C.threads();
  static constexpr int QCH = DQK / 8, VCH = DV / 8, PCH = BN / 8;
  // S warp tile: S_MT x 16 rows x SN keys
  static constexpr int S_MT = BM / (16 * WM), SN = BN / WN, S_NT = SN / 8;
  static constexpr bool kStatsAlias = kFrag8Shape;  // l_part shares red_max's space
  static_assert((kStatsAlias ? WN + 2 : 2 * WN + 2) * BM * 4 <= C.stat_bytes(), "row statistics fit");
  static_assert(kStatsAlias || WN == C.wn, "the other tiles keep the configuration's S grid");
  // O warp tile: OM rows x ON columns
  static constexpr int OM = BM / WOM, O_MT = OM / 16, ON = DV / WON, O_NT = ON / 8;
  static_assert(BM % (16 * WM) == 0, "an S warp owns S_MT 16-row m tiles");
  static_assert(WM * WN == WOM * WON, "both warp grids use every warp");
  static_assert(SN % 8 == 0 && OM % 16 == 0 && ON % 16 == 0 && BN % 16 == 0, "tile shapes");
  static_assert(DQK % 16 == 0 && STAGES >= 2, "tile shapes");
  // V rows are either the K tile's rows (MLA) or a tile of their own
  static constexpr int VROW_CHUNKS = V_IN_K ? QCH : VCH;

  using QCopy = TileCopy<BM, QCH, THREADS>;
  // kFrag8 tiles: 4 threads a key row, so that a thread's row address (slot lookup, 64-bit pool offsets)
  // serves 2 fp8 chunks of K and 2 of V a step instead of 1 and 1: half the rows per thread
  static constexpr int KV_TPR = kFrag8Shape ? 4 : 0;
  using KCopy = TileCopy<BN, QCH, THREADS, KV_TPR>;
  using VCopy = TileCopy<BN, VCH, THREADS, KV_TPR>;
  static_assert(V_IN_K || (int(KCopy::TPR) == int(VCopy::TPR)), "K and V copies share the row mapping");
  // the in-register fp8 path (kFrag8: the KV8 choices below)
  static constexpr int QCH8 = DQK / 16, VCH8 = DV / 16;  // 16-byte chunks of an fp8 row
  static constexpr bool kFrag8 = kFrag8Shape && S_NT == 2 && S_MT == 2 && QCH8 >= 8 && VCH8 >= 8 &&
                                 QCH8 % KCopy::TPR == 0 && VCH8 % VCopy::TPR == 0 && ON % 32 == 0;
  // kF16: bf16-model kFrag8 tiles multiply their compact steps in fp16 (TM): K and V bytes widen with the hardware
  // e4m3x2 -> f16x2 conversion (3 instructions a 4-byte word; the bf16 route takes 8), Q is converted to fp16 once
  // a segment with a power-of-two scale (permute_q_f16: exact, bf16's 8 significant bits fit fp16's 11), P is
  // fp16 (in [0, 1]: v_scale is not folded into it but applied to the output, and draft keys count 1 / v_scale).
  // Steps with draft keys stay in bf16.
  // (sm_89+ only: before sm_89 the e4m3 -> f16 conversion is emulated, and bf16's bit moves are shorter)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  static constexpr bool kF16 = false;
#else
  static constexpr bool kF16 = kFrag8 && !NARROW && std::is_same<T, __nv_bfloat16>::value;
#endif
  using TM = typename std::conditional<kF16, __half, T>::type;  // compact steps' operand type
  // kWide: kFrag8 tiles whose compact steps multiply in fp16 take wide compact steps (2 BN keys: compact_step). An S
  // warp owns SNW = 2 SN keys (NT n-tiles) and P rows hold 2 BN keys (PCHW chunks) in the current stage's K space.
  // H200 (v18, GQA 32/8 N=8 B=16, interleaved x3): fp16 model 497-500 us against 512-517 with 64-key compact
  // steps; bf16 products 569-575 against 551-555 (slower: bf16 widens with 8 instructions a word, fp16 with 3).
  // H200 (v19): at small batches the wide steps lose (GQA 32/8 N=8 P=32K b1: 66-70 us against 50-52 with 64-key steps;
  // even at B=8, ahead from B=16): NARROW keeps 64-key steps there (plan.cpp).
  static constexpr bool kWide = kFrag8 && !NARROW && std::is_same<TM, __half>::value;
  static constexpr int SNW = kWide ? 2 * SN : SN, NT = SNW / 8, PCHW = kWide ? 2 * PCH : PCH;
  static_assert(!kWide || (!V_IN_K && C.k_stage_bytes() >= std::size_t(BM) * PCHW * 16), "P fits the K stage");

  // KV8 choices (bench/NOTES.md, v8):
  // - pairs (opt-in, p.kv8_pairs: FLASHVERIFY_FP8_PAIRS=1 and pool strides multiples of 16 bytes): in
  //   128-thread tiles (room below their 255-register cap) whose threads take an even number of chunks a
  //   row, a thread copies 16 fp8 bytes (two chunks) with one 16-byte cp.async into the second chunk's slot
  //   and widens them into both slots; otherwise 8 bytes a chunk go into one half of the chunk's own slot
  //   (fp8_half). Measured 1.4% slower than the 8-byte copies on GQA 32/8 B=16 (so off by default); in the
  //   128-register GQA tiles they raised spills from ~36 to ~80 bytes, so those never use them.
  // - early widening (compute-bound MLA tiles): the next step's rows are widened in the middle of this
  //   step's P V product, so that the conversion overlaps the tensor cores instead of sitting between the
  //   copy's arrival and the step's first barrier.
  // - unrolled widening where the register budget allows it (128-thread tiles of the GQA kind).
  // - in-register widening (kFrag8: the GQA tiles whose S warps hold 2 m-tiles x 2 key n-tiles and whose fp8 rows split
  //   evenly over the copying threads): a step of prefix keys only ("compact" step) keeps the fp8 bytes in
  //   shared memory, rows of DQK (DV) bytes copied 16 bytes at a time, and the fragment loads widen them in
  //   registers: K fragments are read with ldmatrix as if the bytes were 16-bit pairs (a lane gets 4 bytes of
  //   one key row: 4 consecutive d), V fragments with ldmatrix.trans (a lane gets a 2 x 2 block: 2 keys x 2
  //   consecutive d). Both become MMA operands with two conversions (e4m3x4_frag: pairs (x0, x2), (x1, x3)) if
  //   the S product's k order is permuted within every 16 d (Q is permuted once in shared memory: slot 2t <-
  //   d 4t, 2t+1 <- 4t+2, 2t+8 <- 4t+1, 2t+9 <- 4t+3) and the O accumulator's columns are split into
  //   even-d and odd-d n-tiles (tile 2s holds d 16s + 2n, tile 2s+1 d 16s + 2n + 1). No widening pass, no
  //   shared-memory write-back, no conversion between the copy's arrival and the step's barrier. The step that
  //   reaches the draft tokens (bf16 / fp16 rows) is widened in shared memory as before and read with plain
  //   loads in the same permuted orders.
  //   kWide (fp16 models): compact steps are wide (compact_step): two planned steps of fp8 rows fill one stage's
  //   16-bit space, so one iteration (three barriers, the row statistics, the rescale) covers 2 BN keys; each S
  //   warp owns SNW = 2 SN keys, and P (BM x 2 BN) goes to the stage's K space once S is done (barrier A). An odd
  //   prefix step left over at a segment's end or start takes the 16-bit path, in the wide layout: only warps 0
  //   and 1 hold its keys. (Halving the per-step chain gained 3%: the tile is bound mostly by its per-key
  //   instruction stream; bench/NOTES.md, fp8 paragraph.)
  // (only the fp8 fragment path computes S_MT > 1 m-tiles a warp: the other S paths fill acc[0])
  static_assert(S_MT == 1 || kFrag8, "S_MT > 1 needs the kFrag8 S path");
  using KCopy8 = TileCopy<BN, kFrag8 ? QCH8 : QCH, THREADS, KV_TPR>;
  using VCopy8 = TileCopy<BN, kFrag8 ? VCH8 : VCH, THREADS, KV_TPR>;
  static_assert(!kFrag8 || (int(KCopy8::TPR) == int(KCopy::TPR) && int(VCopy8::TPR) == int(KCopy::TPR)),
                "compact fp8 copies use the row mapping of fetch_rows");
  static constexpr bool kFp8Pairs =
      KV8 && !kFrag8 && KCopy::CPT % 2 == 0 && (V_IN_K || VCopy::CPT % 2 == 0) && THREADS <= 128;
  static constexpr bool kWidenEarly = KV8 && V_IN_K;
  static constexpr bool kWidenUnroll = KV8 && !V_IN_K && THREADS <= 128;

  // shared memory layout (bytes)
  static constexpr uint32_t OFF_Q = 0;
  static constexpr uint32_t OFF_K = OFF_Q + C.q_bytes();
  static constexpr uint32_t OFF_V = OFF_K + STAGES * C.k_stage_bytes();
  static constexpr uint32_t OFF_P = OFF_V + STAGES * C.v_stage_bytes();
  static constexpr uint32_t OFF_STATS = OFF_P + C.p_bytes();
  static constexpr uint32_t SMEM = C.smem_bytes();

  // What one request segment needs to know.
  struct Seg {
    int b, n, plen, len;  // request, draft tokens, prefix length, prefix + draft
    int64_t qo0, kv0;     // first q row, first kv_indices entry
    int64_t mask0;        // byte mask read in place (p.bytes_direct): the request's block and its
    int woff;             //   window offset
    int k_begin, k_end;   // key steps of this segment
    int rows;             // group * n
  };

  // Raw index values of the rows this thread copies in a future step, loaded one step early so that
  // the dependent address arithmetic does not stall the issue of the copies.
  // kWide: a compact step spans two planned steps (compact_step), so a thread's rows of two steps are loaded.
  static constexpr int kRowPasses = KCopy::PASSES * (kWide ? 2 : 1);
  struct RowIdx {
    int64_t raw[kRowPasses];
  };

  // the raw index value of prefix key `pos` of request segment `s`: its page (page table) or its slot; 0 past the prefix
  __device__ __forceinline__ static int64_t row_index(const VerifyParams& p, const Seg& s, int pos) {
    int64_t raw = 0;
    if (pos < s.plen) {
      if (p.paged) raw = p.page_table[int64_t(s.b) * p.page_table_stride + pos / p.page_size];
      else raw = load_index(p.kv_indices, s.kv0 + pos, p.kv_indices_i64);
    }
    return raw;
  }

  __device__ static void fetch_rows(const VerifyParams& p, const Seg& s, int step, RowIdx& ri) {
    const int r0 = threadIdx.x / KCopy::TPR;
#pragma unroll
    for (int pass = 0; pass < kRowPasses; ++pass) ri.raw[pass] = row_index(p, s, step * BN + r0 + pass * KCopy::RP);
  }

  // compact (kFrag8, a step of prefix keys only; kWide: two steps): the fp8 rows are copied as they are, DQK (DV)
  // bytes a row (kWide: 2 BN rows in the stage's 16-bit space)
  __device__ static void issue_rows(const VerifyParams& p, const Seg& s, int step, const RowIdx& ri, int hk,
                                    uint8_t* smem, int stage, bool compact) {
    const int r0 = threadIdx.x / KCopy::TPR, c0 = threadIdx.x % KCopy::TPR;
    const uint32_t k_base = smem_addr(smem + OFF_K + stage * C.k_stage_bytes());
    const uint32_t v_base = smem_addr(smem + OFF_V + stage * C.v_stage_bytes());
#pragma unroll
    for (int pass = 0; pass < kRowPasses; ++pass) {
      if (pass >= KCopy::PASSES && !(kWide && compact)) break;
      const int row = r0 + pass * KCopy::RP;
      const int pos = step * BN + row;
      const T* ksrc = static_cast<const T*>(p.k_pool);  // any valid address when zero-filling
      const T* vsrc = static_cast<const T*>(p.v_pool);
      const uint8_t* k8 = nullptr;  // KV8: the prefix row's fp8 bytes
      const uint8_t* v8 = nullptr;
      int bytes = 0;
      if (pos < s.plen) {
        const int64_t slot = p.paged ? ri.raw[pass] * p.page_size + pos % p.page_size : ri.raw[pass];
        if constexpr (KV8) {
          k8 = static_cast<const uint8_t*>(p.k_pool) + slot * p.k_pool_stride_slot + hk * p.k_pool_stride_head;
          v8 = static_cast<const uint8_t*>(p.v_pool) + slot * p.v_pool_stride_slot + hk * p.v_pool_stride_head;
        } else {
          ksrc = static_cast<const T*>(p.k_pool) + slot * p.k_pool_stride_slot + hk * p.k_pool_stride_head;
          vsrc = static_cast<const T*>(p.v_pool) + slot * p.v_pool_stride_slot + hk * p.v_pool_stride_head;
        }
        bytes = 16;
      } else if (pos < s.len) {
        const int64_t tok = s.qo0 + (pos - s.plen);
        ksrc = static_cast<const T*>(p.k_draft) + tok * p.k_draft_stride_token + hk * p.k_draft_stride_head;
        vsrc = static_cast<const T*>(p.v_draft) + tok * p.v_draft_stride_token + hk * p.v_draft_stride_head;
        bytes = 16;
      }
      if (kFrag8 && compact) {
        auto copy16 = [&](uint32_t dst, const uint8_t* src) {
          if (p.kv8_a16) {
            cp_async_16(dst, src, 16);
          } else {
            cp_async_8(dst, src, 8);
            cp_async_8(dst + 8, src + 8, 8);
          }
        };
#pragma unroll
        for (int c = 0; c < KCopy8::CPT; ++c) {
          const int chunk = c0 + c * KCopy8::TPR;
          copy16(k_base + swizzle<QCH8>(row, chunk), k8 + chunk * 16);
        }
#pragma unroll
        for (int c = 0; c < VCopy8::CPT; ++c) {
          const int chunk = c0 + c * VCopy8::TPR;
          copy16(v_base + swizzle<VCH8>(row, chunk), v8 + chunk * 16);
        }
        continue;
      }
      if (KV8 && k8 != nullptr && kFp8Pairs && p.kv8_pairs) {
#pragma unroll
        for (int c = 0; c < KCopy::CPT / 2; ++c) {
          const int pair = c0 + c * KCopy::TPR;
          cp_async_16(k_base + swizzle<QCH>(row, 2 * pair + 1), k8 + pair * 16, 16);
        }
        if constexpr (!V_IN_K) {
#pragma unroll
          for (int c = 0; c < VCopy::CPT / 2; ++c) {
            const int pair = c0 + c * VCopy::TPR;
            cp_async_16(v_base + swizzle<VCH>(row, 2 * pair + 1), v8 + pair * 16, 16);
          }
        }
        continue;
      }
      if (KV8 && k8 != nullptr) {
#pragma unroll
        for (int c = 0; c < KCopy::CPT; ++c) {
          const int chunk = c0 + c * KCopy::TPR;
          cp_async_8(k_base + swizzle<QCH>(row, chunk) + fp8_half(row, c0), k8 + chunk * 8, 8);
        }
        if constexpr (!V_IN_K) {
#pragma unroll
          for (int c = 0; c < VCopy::CPT; ++c) {
            const int chunk = c0 + c * VCopy::TPR;
            cp_async_8(v_base + swizzle<VCH>(row, chunk) + fp8_half(row, c0), v8 + chunk * 8, 8);
          }
        }
        continue;
      }
#pragma unroll
      for (int c = 0; c < KCopy::CPT; ++c) {
        const int chunk = c0 + c * KCopy::TPR;
        cp_async_16(k_base + swizzle<QCH>(row, chunk), ksrc + chunk * 8, bytes);
      }
      if constexpr (!V_IN_K) {
#pragma unroll
        for (int c = 0; c < VCopy::CPT; ++c) {
          const int chunk = c0 + c * VCopy::TPR;
          cp_async_16(v_base + swizzle<VCH>(row, chunk), vsrc + chunk * 8, bytes);
        }
      }
    }
  }

  // KV8: widen the fp8 prefix rows this thread copied into `stage` for `step` (its own cp.async groups for
  // the stage are complete; no other thread touches these slots) to T, in place. PASS_LO..PASS_HI-1: the
  // row passes to widen (early widening spreads them over the P V product).
  __device__ static void widen_fp8(const VerifyParams& p, const Seg& s, int step, uint8_t* smem, int stage,
                                   int pass_lo = 0, int pass_hi = KCopy::PASSES) {
    const int r0 = threadIdx.x / KCopy::TPR, c0 = threadIdx.x % KCopy::TPR;
    uint8_t* kb = smem + OFF_K + stage * C.k_stage_bytes();
    uint8_t* vb = smem + OFF_V + stage * C.v_stage_bytes();
    // 8 fp8 bytes at `src` -> 8 values of T (16 bytes) at `dst`
    auto widen8 = [](uint2 w, uint8_t* dst) {
      uint4 o;
      e4m3x4_to<T>(w.x, o.x, o.y);
      e4m3x4_to<T>(w.y, o.z, o.w);
      *reinterpret_cast<uint4*>(dst) = o;
    };
    // two chunks copied as one 16-byte pair into the second chunk's slot
    auto widen_pair = [](uint8_t* first, uint8_t* second) {
      uint4 lo, hi;
      e4m3x16_to<T>(*reinterpret_cast<const uint4*>(second), lo, hi);
      *reinterpret_cast<uint4*>(first) = lo;
      *reinterpret_cast<uint4*>(second) = hi;
    };
    auto widen_half = [&](uint8_t* slot, int row) {
      widen8(*reinterpret_cast<const uint2*>(slot + fp8_half(row, c0)), slot);
    };
#pragma unroll 1
    for (int pass = pass_lo; pass < pass_hi; ++pass) {
      const int row = r0 + pass * KCopy::RP;
      if (step * BN + row >= s.plen) continue;
      bool pairs = false;
      if constexpr (kFp8Pairs) pairs = p.kv8_pairs;
      if (pairs) {
        // unrolled where the register budget allows it
        constexpr int KU = kWidenUnroll ? KCopy::CPT / 2 : 1, VU = kWidenUnroll ? VCopy::CPT / 2 : 1;
#pragma unroll KU
        for (int c = 0; c < KCopy::CPT / 2; ++c) {
          const int pair = c0 + c * KCopy::TPR;
          widen_pair(kb + swizzle<QCH>(row, 2 * pair), kb + swizzle<QCH>(row, 2 * pair + 1));
        }
        if constexpr (!V_IN_K) {
#pragma unroll VU
          for (int c = 0; c < VCopy::CPT / 2; ++c) {
            const int pair = c0 + c * VCopy::TPR;
            widen_pair(vb + swizzle<VCH>(row, 2 * pair), vb + swizzle<VCH>(row, 2 * pair + 1));
          }
        }
      } else {
        // not unrolled: the widening is a few instructions a chunk, and unrolled it costs registers the
        // accumulators need
#pragma unroll 1
        for (int c = 0; c < KCopy::CPT; ++c) widen_half(kb + swizzle<QCH>(row, c0 + c * KCopy::TPR), row);
        if constexpr (!V_IN_K) {
#pragma unroll 1
          for (int c = 0; c < VCopy::CPT; ++c) widen_half(vb + swizzle<VCH>(row, c0 + c * VCopy::TPR), row);
        }
      }
    }
  }

  // kFrag8: Q is copied a 16-element group (two chunks) a thread, so that each thread can permute the groups
  // it copied as soon as its own copies have landed (permute_q)
  static constexpr int QGROUPS = BM * QCH / 2;
  static_assert(!kFrag8 || QGROUPS % THREADS == 0, "Q groups per thread");
  __device__ static const T* q_row_src(const VerifyParams& p, const Seg& s, int m_tile, int hk, int row, int& bytes) {
    const int r = m_tile * BM + row;
    const T* src = static_cast<const T*>(p.q);
    bytes = 0;
    if (r < s.rows) {
      const int i = r / p.group, j = r - i * p.group;
      src += (s.qo0 + i) * p.q_stride_token + int64_t(hk * p.group + j) * p.q_stride_head;
      bytes = 16;
    }
    return src;
  }

  __device__ static void load_q(const VerifyParams& p, const Seg& s, int m_tile, int hk, uint8_t* smem) {
    const int r0 = threadIdx.x / QCopy::TPR, c0 = threadIdx.x % QCopy::TPR;
    const uint32_t q_base = smem_addr(smem + OFF_Q);
    if constexpr (kFrag8) {
#pragma unroll
      for (int i = 0; i < QGROUPS / THREADS; ++i) {
        const int gi = threadIdx.x + i * THREADS, row = gi / (QCH / 2), grp = gi % (QCH / 2);
        int bytes;
        const T* src = q_row_src(p, s, m_tile, hk, row, bytes);
        cp_async_16(q_base + swizzle<QCH>(row, 2 * grp), src + 16 * grp, bytes);
        cp_async_16(q_base + swizzle<QCH>(row, 2 * grp + 1), src + 16 * grp + 8, bytes);
      }
    } else {
#pragma unroll
      for (int pass = 0; pass < QCopy::PASSES; ++pass) {
        const int row = r0 + pass * QCopy::RP;
        int bytes;
        const T* src = q_row_src(p, s, m_tile, hk, row, bytes);
#pragma unroll
        for (int c = 0; c < QCopy::CPT; ++c) {
          const int chunk = c0 + c * QCopy::TPR;
          cp_async_16(q_base + swizzle<QCH>(row, chunk), src + chunk * 8, bytes);
        }
      }
    }
  }

  // kFrag8: permute the Q groups this thread copied (its copies have landed) into the S product's k order:
  // within every 16 d, slot pair t (slots 2t, 2t+1) <- (d 4t, 4t+2), slot pair 4 + t <- (d 4t+1, 4t+3)
  __device__ static void permute_q(uint8_t* smem) {
#pragma unroll
    for (int i = 0; i < QGROUPS / THREADS; ++i) {
      const int gi = threadIdx.x + i * THREADS, row = gi / (QCH / 2), grp = gi % (QCH / 2);
      uint4* lo = reinterpret_cast<uint4*>(smem + OFF_Q + swizzle<QCH>(row, 2 * grp));
      uint4* hi = reinterpret_cast<uint4*>(smem + OFF_Q + swizzle<QCH>(row, 2 * grp + 1));
      const uint4 x = *lo, y = *hi;
      *lo = make_uint4(prmt(x.x, x.y, 0x5410u), prmt(x.z, x.w, 0x5410u), prmt(y.x, y.y, 0x5410u), prmt(y.z, y.w, 0x5410u));
      *hi = make_uint4(prmt(x.x, x.y, 0x7632u), prmt(x.z, x.w, 0x7632u), prmt(y.x, y.y, 0x7632u), prmt(y.z, y.w, 0x7632u));
    }
  }

  // kF16: permute Q as permute_q does and convert it to fp16 scaled by 2^-e, e chosen so that the tile's largest
  // finite |q| lands in [2^14, 2^15): every value within 2^28 of it converts exactly (bf16's 8 significant bits fit
  // fp16's 11), smaller ones round into fp16's subnormals. Returns 2^e, the factor the scores take. One extra
  // barrier (the tile-wide maximum, through `red`: red_max, free at a segment's start and written again only after
  // the step's barrier W).
  __device__ static float permute_q_f16(uint8_t* smem, float* red) {
    permute_q(smem);  // (the groups this thread copied, as every step below)
    // the 16-byte chunks of this thread's groups: 2 a group
    auto chunk = [smem](int i, int c) {
      const int gi = threadIdx.x + i * THREADS, row = gi / (QCH / 2), grp = gi % (QCH / 2);
      return reinterpret_cast<uint4*>(smem + OFF_Q + swizzle<QCH>(row, 2 * grp + c));
    };
    auto fin = [](float v) { return fabsf(v) <= 3.4e38f ? fabsf(v) : 0.f; };  // (an inf must not scale the others)
    float mx = 0.f;
#pragma unroll
    for (int i = 0; i < QGROUPS / THREADS; ++i)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const uint4 x = *chunk(i, c);
        for (uint32_t w : {x.x, x.y, x.z, x.w})
          mx = fmaxf(mx, fmaxf(fin(__uint_as_float(w << 16)), fin(__uint_as_float(w & 0xffff0000u))));
      }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = mx;
    __syncthreads();
    float m = 0.f;
#pragma unroll
    for (int w = 0; w < THREADS / 32; ++w) m = fmaxf(m, red[w]);
    const int e = m > 0.f ? min(max(ilogbf(m) - 14, -110), 114) : 0;
    const float down = ldexpf(1.f, -e);
    auto cvt = [down](uint32_t w) {  // a bf16 pair -> the fp16 pair of its values x 2^-e
      const __half2 h = __floats2half2_rn(__uint_as_float(w << 16) * down, __uint_as_float(w & 0xffff0000u) * down);
      return *reinterpret_cast<const uint32_t*>(&h);
    };
#pragma unroll
    for (int i = 0; i < QGROUPS / THREADS; ++i)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        uint4* q = chunk(i, c);
        const uint4 x = *q;
        *q = make_uint4(cvt(x.x), cvt(x.y), cvt(x.z), cvt(x.w));
      }
    return ldexpf(1.f, e);
  }

  // MODS: may a step take the uniform prefix scale? All its keys are prefix keys (not `tail`), no sliding window hides
  // any of them from any row of the tile (rows hold drafts <= tok_max), and there is no cap or temperature.
  __device__ static bool uniform_step(const VerifyParams& p, const Seg& s, int step, bool tail, int tok_max) {
    if (tail || p.logit_cap > 0.f || p.xai_len > 0) return false;
    return p.window <= 0 || step * BN >= s.plen + tok_max - p.window;
  }

  // kFrag8: is `step` a step of prefix keys only (its rows are copied compact, as fp8 bytes)? kWide: does the
  // iteration at `step` take steps `step` and `step + 1` together (2 BN keys), both of prefix keys only and both in
  // the segment? Otherwise an iteration takes one step (16-bit rows: fp8 prefix rows widened in shared memory, or
  // draft rows).
  __device__ static bool compact_step(const Seg& s, int step) {
    if constexpr (kWide) return step + 1 < s.k_end && (step + 2) * BN <= s.plen;
    return kFrag8 && (step + 1) * BN <= s.plen;
  }
  // kWide: the first step of the iteration after the one at `step`
  __device__ static int next_step(const Seg& s, int step) { return step + (compact_step(s, step) ? 2 : 1); }

  // Is draft j visible to draft i of the segment's request? (i, j < n)
  __device__ static bool tree_visible(const VerifyParams& p, const Seg& s, int i, int j) {
    if (p.mask_kind == FV_MASK_CAUSAL) return j <= i;
    if (p.bytes_direct) {
      // rows off_b + P_b + N_b wide: past 2^31 bytes with a large window offset, so formed in 64 bits
      const int64_t cols = int64_t(s.woff) + s.plen;
      return __ldg(p.custom_mask + s.mask0 + int64_t(i) * (cols + s.n) + cols + j) != 0;
    }
    // user bits are indexed by the global q row; converted bits by (request, draft)
    const int64_t row = p.mask_kind == FV_MASK_BITS ? s.qo0 + i : int64_t(s.b) * p.max_draft + i;
    const uint32_t word = __ldg(p.mask_bits + row * p.mask_bits_stride + (j >> 5));
    return (word >> (j & 31)) & 1u;
  }

  // The output pair `nt` of a row half (two adjacent columns: x, y) and its column within the warp's ON
  // columns. Natural layout: n-tile nt, columns 8nt + 2t4, +1. kFrag8: n-tiles 2sc / 2sc + 1 hold the even /
  // odd d of chunk sc, so a lane holds d 16sc + 4t4 .. +3: pair nt = 2sc + par is d 16sc + 4t4 + 2par, +1.
  // (Natural: the column is returned without 2t4, which the callers keep in their base offset, as the
  // natural kernels' code had it before kFrag8: the same SASS.)
  __device__ __forceinline__ static int out_pair(const float (&om)[O_NT][4], int nt, int half, int t4, float& x,
                                                  float& y) {
    if constexpr (kFrag8) {
      const int sc2 = nt & ~1, par = nt & 1;
      x = om[sc2][2 * half + par];
      y = om[sc2 + 1][2 * half + par];
      return 8 * sc2 + 4 * t4 + 2 * par;
    } else {
      x = om[nt][2 * half];
      y = om[nt][2 * half + 1];
      return 8 * nt;
    }
  }
  // the part of a lane's output column that out_pair leaves to the caller's base offset
  static constexpr int out_lane_col(int t4) { return kFrag8 ? 0 : 2 * t4; }

  __device__ static void run_segment(const VerifyParams& p, const Seg& s, int m_tile, int hk, int split,
                                     int num_splits, int slot0, uint8_t* smem) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t4 = lane % 4;
    float* red_max = reinterpret_cast<float*>(smem + OFF_STATS);  // [WN][BM]
    float* l_part = kStatsAlias ? red_max : red_max + WN * BM;     // [WN][BM]
    float* alpha_s = l_part + WN * BM;                              // [BM]
    float* m_fin = alpha_s + BM;                                    // [BM]
    const uint32_t q_base = smem_addr(smem + OFF_Q);
    const uint32_t p_base = smem_addr(smem + OFF_P);

    __syncthreads();  // the previous segment is done with every shared buffer

    // ---- prologue: Q tile + the first STAGES-1 key steps, each its own cp.async group
    load_q(p, s, m_tile, hk, smem);
    RowIdx ri;
    // kWide: fstep is the first step of the next iteration whose rows are to be issued (the other tiles take one
    // step an iteration: the step STAGES - 1 ahead, written as such, which keeps their machine code as it was)
    int fstep = s.k_begin;
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
      const int fs = kWide ? fstep : s.k_begin + st;
      if (fs < s.k_end) {
        fetch_rows(p, s, fs, ri);
        issue_rows(p, s, fs, ri, hk, smem, st, compact_step(s, fs));
      }
      cp_async_commit();
      if constexpr (kWide) fstep = next_step(s, fstep);
    }
    if ((kWide ? fstep : s.k_begin + STAGES - 1) < s.k_end)
      fetch_rows(p, s, kWide ? fstep : s.k_begin + STAGES - 1, ri);  // (a named value here moved 33 kernels' code)
    FV_TRACE(trace_block(), 2);

    // ---- S-warp identity and the draft tokens of its rows (for the tree mask): rows (wm * S_MT + mt) * 16 +
    // g + 8h, h = 0 (accumulator elements 0, 1) and 1 (elements 2, 3)
    const int wm = warp / WN, wn = warp % WN;
    int srow[S_MT][2], tok[S_MT][2];
    float m_run[S_MT][2], l_run[S_MT][2], rowmul[S_MT][2];
#pragma unroll
    for (int mt = 0; mt < S_MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        srow[mt][h] = (wm * S_MT + mt) * 16 + g + 8 * h;
        tok[mt][h] = (m_tile * BM + srow[mt][h]) / p.group;
        m_run[mt][h] = -INFINITY;
        l_run[mt][h] = 0.f;
        // general scoring path (MODS): per-row factor = xai temperature x log2(e)
        rowmul[mt][h] = kLog2e;
        if (MODS && p.xai_len > 0) {
          const int qpos = s.plen + tok[mt][h];
          if (qpos > p.xai_len)
            rowmul[mt][h] *= log2f(static_cast<float>(qpos)) * (1.f / log2f(static_cast<float>(p.xai_len)));
        }
      }
    // the last draft token any row of this tile holds (for the window test of whole steps)
    const int tok_max = min(s.n - 1, (m_tile * BM + BM - 1) / p.group);

    // ---- O-warp identity and its accumulator
    const int om = warp / WON, on = warp % WON;

    // ---- per-lane ldmatrix addressing, fixed for the segment
    // S: A = Q rows wm*16 + (lane & 15), chunk 2kk + (lane >> 4); B = K rows wn*SN + (lane & 7) + 8*(lane >> 4),
    //    chunk 2kk + ((lane >> 3) & 1)
    const int q_row = wm * S_MT * 16 + (lane & 15), k_row = wn * SN + (lane & 7) + ((lane >> 4) << 3);
    const uint32_t q_row_off = q_row * QCH * 16, k_row_off = k_row * QCH * 16;
    const LaneSwizzle<QCH> q_swz(q_row, lane >> 4), k_swz(k_row, (lane >> 3) & 1);
    // P V: A = P rows om*OM + (lane & 15), chunk 2ks + (lane >> 4); B = V rows (lane & 7) + 8*((lane >> 3) & 1),
    //      chunk on*ON/8 + 2np + (lane >> 4)
    const int p_row = om * OM + (lane & 15), v_row = (lane & 7) + (((lane >> 3) & 1) << 3);
    const uint32_t p_row_off = p_row * PCHW * 16, v_row_off = v_row * VROW_CHUNKS * 16;
    const LaneSwizzle<PCHW> p_swz(p_row, lane >> 4);
    uint32_t v_col_off[O_NT / 2];
#pragma unroll
    for (int np = 0; np < O_NT / 2; ++np) {
      const int chunk = (on * ON) / 8 + 2 * np + (lane >> 4);
      v_col_off[np] = swizzle<VROW_CHUNKS>(v_row, chunk) - v_row * VROW_CHUNKS * 16;
    }
    // kFrag8, compact steps: K lane L reads key rows wn*SNW + 16h + (L & 15) (n-tile 2h + ((L >> 3) & 1); h = 0
    // unless kWide), 16-byte chunk 2kk2 + (L >> 4) of the fp8 row; V lanes read the fp8 rows v_row, chunks
    // on*ON/16 + 2cp + (lane >> 4)
    const int k8_row = wn * SNW + (lane & 15);
    const uint32_t k8_row_off = k8_row * QCH8 * 16;
    const int k8_x = (k8_row & 7) ^ (lane >> 4);  // swizzle<QCH8>(k8_row, c + (lane >> 4)) = (c ^ k8_x) * 16, c even
    const uint32_t v8_row_off = v_row * VCH8 * 16;
    uint32_t v8_col_off[kFrag8 ? ON / 32 : 1];
#pragma unroll
    for (int cp = 0; cp < (kFrag8 ? ON / 32 : 1); ++cp)
      v8_col_off[cp] = swizzle<VCH8>(v_row, on * ON / 16 + 2 * cp + (lane >> 4)) - v8_row_off;
    float o[O_MT][O_NT][4];
#pragma unroll
    for (int mt = 0; mt < O_MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < O_NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mt][nt][e] = 0.f;

    // kF16: the factor the scores take for Q's fp16 scaling (permute_q_f16); the output's v_scale and the draft
    // keys' 1 / v_scale (a |v_scale| below 2^-100 counts as 2^-100: 1 / v_scale must stay finite)
    float qx = 1.f;
    const float vs_out =
        kF16 && MODS ? (fabsf(p.v_scale) >= 0x1p-100f ? p.v_scale : copysignf(0x1p-100f, p.v_scale)) : 1.f;
    const float inv_vs = kF16 && MODS ? 1.f / vs_out : 1.f;
    for (int step = s.k_begin, iter = 0; step < s.k_end; step = kWide ? next_step(s, step) : step + 1, ++iter) {
      const int it = kWide ? iter : step - s.k_begin;  // iterations (a wide step takes one stage)
      const int stage = it % STAGES;
      const bool compact = compact_step(s, step);
      cp_async_wait<STAGES - 2>();
      // (early widening: the previous step widened this one, except for the segment's first step)
      if constexpr (kFrag8) {
        if (it == 0) {
          if constexpr (kF16) qx = permute_q_f16(smem, red_max);
          else permute_q(smem);
        }
        if (!compact) widen_fp8(p, s, step, smem, stage);
      } else if constexpr (KV8) {
        if (!kWidenEarly || it == 0) widen_fp8(p, s, step, smem, stage);
      }
      __syncthreads();  // (W) step's tiles visible to all; every warp finished the previous step's P V
      if (it < 10) FV_TRACE(trace_block(), 3 + it);

      // Refill the stage the previous step used, first thing (issuing MLA's refill after its S MMAs was
      // measured 5% slower: bench/NOTES.md v4)
      {
        const int next = kWide ? fstep : step + STAGES - 1;
        if (next < s.k_end) issue_rows(p, s, next, ri, hk, smem, (it + STAGES - 1) % STAGES, compact_step(s, next));
        cp_async_commit();
        if constexpr (kWide) fstep = next_step(s, fstep);
        const int after = kWide ? fstep : next + 1;
        if (after < s.k_end) fetch_rows(p, s, after, ri);
      }

      const uint32_t k_base = smem_addr(smem + OFF_K + stage * C.k_stage_bytes());
      // (kWide: P goes to this stage's K space, free once every warp has passed barrier A)
      const uint32_t pb = kWide ? k_base : p_base;
      // ---- S = Q K^T for this warp's S_MT x 16 x SN tile. Fragments for k-step kk+1 are loaded before the MMAs
      // of step kk (the asm statements keep source order, so the pipelining is written out here).
      float acc[S_MT][NT][4];
#pragma unroll
      for (int mt = 0; mt < S_MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;
      const uint32_t qa = q_base + q_row_off;
      if (kFrag8 && compact) {
        // fp8 K fragments: one ldmatrix gives a lane 4 bytes (d 16kk + 4t4 .. +3) of its key row for two n-tiles
        // and two k-steps (matrices: n-tile 2h / 2h + 1 of k-step 2kk2, then of 2kk2 + 1; h: the 16-key half of
        // the warp's keys); each is widened in registers into the permuted k order of Q and serves both m-tiles
        const uint32_t kb8 = k_base + k8_row_off;
        constexpr int KH = NT >= 2 ? NT / 2 : 1;  // 16-key halves of a warp's keys (kWide: 2)
        uint32_t a[2][2][S_MT][4], kr[2][KH][4];
        auto load = [&](int kk2, int buf) {
#pragma unroll
          for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int mt = 0; mt < S_MT; ++mt) ldmatrix_x4(a[buf][j][mt], qa + mt * 16 * QCH * 16 + q_swz(2 * (2 * kk2 + j)));
#pragma unroll
          for (int h = 0; h < KH; ++h) ldmatrix_x4(kr[buf][h], kb8 + h * 16 * QCH8 * 16 + (((2 * kk2) ^ k8_x) << 4));
        };
        load(0, 0);
#pragma unroll
        for (int kk2 = 0; kk2 < DQK / 32; ++kk2) {
          if (kk2 + 1 < DQK / 32) load(kk2 + 1, (kk2 + 1) & 1);
#pragma unroll
          for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
              uint32_t b0, b1;
              e4m3x4_frag<TM>(kr[kk2 & 1][nt >> 1][2 * j + (nt & 1)], b0, b1);
#pragma unroll
              for (int mt = 0; mt < S_MT; ++mt) mma_16816<TM>(acc[mt][nt], a[kk2 & 1][j][mt], b0, b1);
            }
        }
      } else if (kFrag8) {
        // a 16-bit step of an fp8 tile: K rows in T (prefix rows widened in shared memory), read in Q's permuted
        // k order: d 16kk + 4t4 .. +3 of key row g with one 8-byte load. kWide: only warps 0 and 1 hold keys of it
        // (the warps' S tiles are laid out for wide steps); the others' keys are masked below.
        const uint8_t* kt = smem + OFF_K + stage * C.k_stage_bytes();
#pragma unroll 1
        for (int kk = 0; kk < (!kWide || wn * SNW < BN ? DQK / 16 : 0); ++kk) {
          uint32_t a[S_MT][4];  // (LaneSwizzle takes compile-time chunks only: a runtime index would put it in local memory)
#pragma unroll
          for (int mt = 0; mt < S_MT; ++mt) {
            ldmatrix_x4(a[mt], q_base + swizzle<QCH>(q_row + mt * 16, 2 * kk + (lane >> 4)));
            if constexpr (kF16) {  // Q is fp16 (x 2^-e) in shared memory: back to bf16 pairs, exactly
#pragma unroll
              for (int r = 0; r < 4; ++r) {
                const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&a[mt][r]));
                a[mt][r] = pack2<T>(f.x, f.y);
              }
            }
          }
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int row = wn * SNW + nt * 8 + g;
            const uint2 w = *reinterpret_cast<const uint2*>(kt + swizzle<QCH>(row, 2 * kk + (t4 >> 1)) + (t4 & 1) * 8);
            const uint32_t b0 = prmt(w.x, w.y, 0x5410u), b1 = prmt(w.x, w.y, 0x7632u);
#pragma unroll
            for (int mt = 0; mt < S_MT; ++mt) mma_16816<T>(acc[mt][nt], a[mt], b0, b1);
          }
        }
      } else {
        const uint32_t kb = k_base + k_row_off;
        uint32_t a[2][4], b[2][S_NT][2];
        auto load = [&](int kk, int buf) {
          ldmatrix_x4(a[buf], qa + q_swz(2 * kk));
#pragma unroll
          for (int np = 0; np < S_NT / 2; ++np) {
            uint32_t r[4];
            ldmatrix_x4(r, kb + np * 16 * QCH * 16 + k_swz(2 * kk));
            b[buf][2 * np][0] = r[0];
            b[buf][2 * np][1] = r[1];
            b[buf][2 * np + 1][0] = r[2];
            b[buf][2 * np + 1][1] = r[3];
          }
          if constexpr (S_NT % 2 == 1) {
            uint32_t r[2];
            ldmatrix_x2(r, kb + (S_NT - 1) * 8 * QCH * 16 + k_swz(2 * kk));
            b[buf][S_NT - 1][0] = r[0];
            b[buf][S_NT - 1][1] = r[1];
          }
        };
        load(0, 0);
#pragma unroll
        for (int kk = 0; kk < DQK / 16; ++kk) {
          if (kk + 1 < DQK / 16) load(kk + 1, (kk + 1) & 1);
#pragma unroll
          for (int nt = 0; nt < S_NT; ++nt) mma_16816<T>(acc[0][nt], a[kk & 1], b[kk & 1][nt][0], b[kk & 1][nt][1]);
        }
      }


      // ---- scale; mask keys past the request and draft keys outside the tree
      const int key0 = step * BN + wn * SNW;
      // this step reaches the draft tokens or the end of the request (kWide: or it is a 16-bit step, whose S
      // tiles hold keys of the next step too: keys from key_end on are masked)
      const bool tail = (step + 1) * BN > s.plen || (kWide && !compact);
      const bool all_prefix = !tail;
      const int key_end = kWide && !compact ? min(s.len, (step + 1) * BN) : s.len;
      float mx[S_MT][2];
#pragma unroll
      for (int mt = 0; mt < S_MT; ++mt) mx[mt][0] = mx[mt][1] = -INFINITY;
      if (MODS ? uniform_step(p, s, step, tail, tok_max) : !tail) {
        // a step of prefix keys only, and (MODS) no window boundary, cap or temperature: one uniform scale
        // (MODS: k_scale folded in), no per-element tests. Written as its own branch: with the tail test
        // inside the element loop the compiler kept the position arithmetic in the hot path (bench/NOTES.md
        // v8).
        const float scale = (MODS ? p.scale_log2_prefix : p.scale_log2) * (kF16 ? qx : 1.f);
#pragma unroll
        for (int mt = 0; mt < S_MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][nt][e] *= scale;
            mx[mt][0] = fmaxf(mx[mt][0], fmaxf(acc[mt][nt][0], acc[mt][nt][1]));
            mx[mt][1] = fmaxf(mx[mt][1], fmaxf(acc[mt][nt][2], acc[mt][nt][3]));
          }
      } else if (!MODS) {
        // the step that reaches the draft tokens or the end of the request
#pragma unroll
        for (int mt = 0; mt < S_MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              float v = acc[mt][nt][e] * (p.scale_log2 * (kF16 ? qx : 1.f));
              const int pos = key0 + nt * 8 + 2 * t4 + (e & 1);
              const int tk = tok[mt][e >> 1];
              if (pos >= key_end) v = -INFINITY;
              else if (pos >= s.plen && (tk >= s.n || !tree_visible(p, s, tk, pos - s.plen))) v = -INFINITY;
              acc[mt][nt][e] = v;
            }
            mx[mt][0] = fmaxf(mx[mt][0], fmaxf(acc[mt][nt][0], acc[mt][nt][1]));
            mx[mt][1] = fmaxf(mx[mt][1], fmaxf(acc[mt][nt][2], acc[mt][nt][3]));
          }
      } else {
        // SGLang's order: s = sm_scale (x k_scale for the prefix) q.k, cap, temperature; then the masks
        // (tree, sliding window: token i at position P + i sees prefix key p iff P + i <= p + W and
        // draft j iff i <= j + W)
#pragma unroll
        for (int mt = 0; mt < S_MT; ++mt)
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int pos = key0 + nt * 8 + 2 * t4 + (e & 1);
              const int tk = tok[mt][e >> 1];
              const bool pre = pos < s.plen;
              float v = acc[mt][nt][e] * ((pre ? p.scale_nat_prefix : p.scale_nat) * (kF16 ? qx : 1.f));
              if (p.logit_cap > 0.f) v = p.logit_cap * tanh_clamped(v * p.inv_logit_cap);
              v *= rowmul[mt][e >> 1];
              if (pos >= key_end) {
                v = -INFINITY;
              } else if (pre) {
                if (p.window > 0 && s.plen + tk > pos + p.window) v = -INFINITY;
              } else {
                const int j = pos - s.plen;
                if (tk >= s.n || !tree_visible(p, s, tk, j) || (p.window > 0 && tk > j + p.window)) v = -INFINITY;
              }
              acc[mt][nt][e] = v;
            }
            mx[mt][0] = fmaxf(mx[mt][0], fmaxf(acc[mt][nt][0], acc[mt][nt][1]));
            mx[mt][1] = fmaxf(mx[mt][1], fmaxf(acc[mt][nt][2], acc[mt][nt][3]));
          }
      }
#pragma unroll
      for (int mt = 0; mt < S_MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          mx[mt][h] = fmaxf(mx[mt][h], __shfl_xor_sync(0xffffffffu, mx[mt][h], 1));
          mx[mt][h] = fmaxf(mx[mt][h], __shfl_xor_sync(0xffffffffu, mx[mt][h], 2));
        }
      if (t4 == 0) {
#pragma unroll
        for (int mt = 0; mt < S_MT; ++mt)
#pragma unroll
          for (int h = 0; h < 2; ++h) red_max[wn * BM + srow[mt][h]] = mx[mt][h];
      }
      __syncthreads();  // (A) partial row maxima of every S warp are in shared memory

      // ---- online softmax: new running max, P = exp2(S - m) to shared memory, rescale factor
#pragma unroll
      for (int mt = 0; mt < S_MT; ++mt) {
        float m_new[2], use[2], alpha[2], sum[2] = {0.f, 0.f};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          m_new[h] = m_run[mt][h];
#pragma unroll
          for (int w = 0; w < WN; ++w) m_new[h] = fmaxf(m_new[h], red_max[w * BM + srow[mt][h]]);
          // a row that has seen only masked keys keeps m = -inf; exp2(-inf - 0) = 0 keeps its P at 0
          use[h] = m_new[h] == -INFINITY ? 0.f : m_new[h];
          alpha[h] = m_new[h] == -INFINITY ? 1.f : exp2f(m_run[mt][h] - m_new[h]);
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          float p0 = exp2_ftz(acc[mt][nt][0] - use[0]), p1 = exp2_ftz(acc[mt][nt][1] - use[0]);
          float p2 = exp2_ftz(acc[mt][nt][2] - use[1]), p3 = exp2_ftz(acc[mt][nt][3] - use[1]);
          sum[0] += p0 + p1;
          sum[1] += p2 + p3;
          if (MODS && p.v_scale != 1.f) {
            // prefix values count v_scale times: folded into P (the row sums above stay unscaled). kF16: the output
            // takes v_scale (vs_out) and draft values count 1 / v_scale here, so that fp16 P stays within [0, 1]
            const int pos0 = key0 + nt * 8 + 2 * t4;
            if constexpr (kF16) {
              if (!(all_prefix || pos0 < s.plen)) { p0 *= inv_vs; p2 *= inv_vs; }
              if (!(all_prefix || pos0 + 1 < s.plen)) { p1 *= inv_vs; p3 *= inv_vs; }
            } else if constexpr (std::is_same<T, __half>::value) {
              // fp16 models: P is fp16, and v_scale alone could take it out of fp16's range (Inf from |v_scale| =
              // 65520, subnormals at 1e-4): prefix P takes v_scale 2^-sigma, draft P 2^-sigma, the output 2^sigma
              // (VerifyParams::f16_p_prefix, f16_p_draft, f16_out; dispatch.cu)
              const float f0 = all_prefix || pos0 < s.plen ? p.f16_p_prefix : p.f16_p_draft;
              const float f1 = all_prefix || pos0 + 1 < s.plen ? p.f16_p_prefix : p.f16_p_draft;
              p0 *= f0; p2 *= f0;
              p1 *= f1; p3 *= f1;
            } else {
              if (all_prefix || pos0 < s.plen) { p0 *= p.v_scale; p2 *= p.v_scale; }
              if (all_prefix || pos0 + 1 < s.plen) { p1 *= p.v_scale; p3 *= p.v_scale; }
            }
          }
          const int chunk = (wn * SNW + nt * 8) / 8;
          const uint32_t off_in_chunk = 4 * t4;  // two 16-bit values per thread
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(pb + swizzle<PCHW>(srow[mt][0], chunk) + off_in_chunk),
                       "r"(kF16 && compact ? pack2<TM>(p0, p1) : pack2<T>(p0, p1)));
          asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(pb + swizzle<PCHW>(srow[mt][1], chunk) + off_in_chunk),
                       "r"(kF16 && compact ? pack2<TM>(p2, p3) : pack2<T>(p2, p3)));
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          l_run[mt][h] = l_run[mt][h] * alpha[h] + sum[h];
          m_run[mt][h] = m_new[h];
          if (wn == 0 && t4 == 0) alpha_s[srow[mt][h]] = alpha[h];
        }
      }
      __syncthreads();  // (B) P and the rescale factors are in shared memory

      // ---- O = O * alpha + P V for this warp's OM x ON block
      const uint32_t v_base =
          V_IN_K ? k_base : smem_addr(smem + OFF_V + stage * C.v_stage_bytes());
      {
        // once a row's running max has settled its rescale factor is exactly 1: skip the O_MT x O_NT x 4
        // multiplies (15% of a step's instructions for MLA) when no row of this warp needs them
        float al[O_MT][2];
        bool rescale = false;
#pragma unroll
        for (int mt = 0; mt < O_MT; ++mt) {
          al[mt][0] = alpha_s[om * OM + mt * 16 + g];
          al[mt][1] = alpha_s[om * OM + mt * 16 + g + 8];
          rescale |= al[mt][0] != 1.f || al[mt][1] != 1.f;
        }
        if (__any_sync(0xffffffffu, rescale)) {
#pragma unroll
          for (int mt = 0; mt < O_MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < O_NT; ++nt) {
              o[mt][nt][0] *= al[mt][0];
              o[mt][nt][1] *= al[mt][0];
              o[mt][nt][2] *= al[mt][1];
              o[mt][nt][3] *= al[mt][1];
            }
        }
      }
      constexpr int KS = BN / 16, KSW = kWide ? 2 * KS : KS;  // k-steps of a step, of a wide step
      auto load_p = [&](uint32_t (&a)[O_MT][4], int ks) {
#pragma unroll
        for (int mt = 0; mt < O_MT; ++mt) ldmatrix_x4(a[mt], pb + p_row_off + mt * 16 * PCHW * 16 + p_swz(2 * ks));
      };
      if (kFrag8 && compact) {
        // fp8 V fragments: one ldmatrix.trans gives a lane, for 2 chunks of 16 d, the 2 x 2 blocks (keys 2t4,
        // 2t4+1 and 2t4+8, 2t4+9) x (d 2g, 2g+1); widened, they are the B operands of the even-d and the
        // odd-d n-tile of each chunk. A (P) fragments one k-step ahead, B one chunk pair ahead.
        constexpr int CP = ON / 32;
        uint32_t a[2][O_MT][4], vr[2][4];
        auto load_v = [&](int idx, int buf) {
          const int ks = idx / CP, cp = idx % CP;
          ldmatrix_x4_trans(vr[buf], v_base + v8_row_off + ks * 16 * VCH8 * 16 + v8_col_off[cp]);
        };
        load_p(a[0], 0);
        load_v(0, 0);
#pragma unroll
        for (int ks = 0; ks < KSW; ++ks) {
          if (ks + 1 < KSW) load_p(a[(ks + 1) & 1], ks + 1);
#pragma unroll
          for (int cp = 0; cp < CP; ++cp) {
            const int idx = ks * CP + cp;
            if (idx + 1 < KSW * CP) load_v(idx + 1, (idx + 1) & 1);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              uint32_t e0, o0, e1, o1;
              e4m3x4_frag<TM>(vr[idx & 1][2 * j], e0, o0);
              e4m3x4_frag<TM>(vr[idx & 1][2 * j + 1], e1, o1);
              const int sc = 2 * cp + j;  // chunk of the warp's columns: n-tiles 2sc (even d), 2sc + 1 (odd d)
#pragma unroll
              for (int mt = 0; mt < O_MT; ++mt) {
                mma_16816<TM>(o[mt][2 * sc], a[ks & 1][mt], e0, e1);
                mma_16816<TM>(o[mt][2 * sc + 1], a[ks & 1][mt], o0, o1);
              }
            }
          }
        }
      } else if (kFrag8) {
        // a 16-bit step of an fp8 tile: V rows in T, read into the even-d / odd-d n-tiles with 4-byte loads of
        // (d 2g, 2g+1) from the keys 2t4, 2t4+1, 2t4+8, 2t4+9
        const uint8_t* vt = smem + OFF_V + stage * C.v_stage_bytes();
#pragma unroll 1
        for (int ks = 0; ks < KS; ++ks) {
          uint32_t a[O_MT][4];
#pragma unroll
          for (int mt = 0; mt < O_MT; ++mt)
            ldmatrix_x4(a[mt], pb + swizzle<PCHW>(p_row + mt * 16, 2 * ks + (lane >> 4)));
#pragma unroll
          for (int sc = 0; sc < ON / 16; ++sc) {
            const int col = on * ON + 16 * sc + 2 * g, key = ks * 16 + 2 * t4;
            auto ld = [&](int k) {
              return *reinterpret_cast<const uint32_t*>(vt + swizzle<VCH>(k, col / 8) + (col % 8) * 2);
            };
            const uint32_t w0 = ld(key), w1 = ld(key + 1), w2 = ld(key + 8), w3 = ld(key + 9);
#pragma unroll
            for (int mt = 0; mt < O_MT; ++mt) {
              mma_16816<T>(o[mt][2 * sc], a[mt], prmt(w0, w1, 0x5410u), prmt(w2, w3, 0x5410u));
              mma_16816<T>(o[mt][2 * sc + 1], a[mt], prmt(w0, w1, 0x7632u), prmt(w2, w3, 0x7632u));
            }
          }
        }
      } else {
        // A (P) fragments one k-step ahead, B (V) fragments one column pair ahead
        constexpr int NP = O_NT / 2;
        uint32_t a[2][O_MT][4], bv[2][4];
        auto load_a = [&](int ks, int buf) { load_p(a[buf], ks); };
        auto load_b = [&](int idx, int buf) {
          const int ks = idx / NP, np = idx % NP;
          ldmatrix_x4_trans(bv[buf], v_base + v_row_off + ks * 16 * VROW_CHUNKS * 16 + v_col_off[np]);
        };
        load_a(0, 0);
        load_b(0, 0);
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          if (ks + 1 < KS) load_a(ks + 1, (ks + 1) & 1);
#pragma unroll
          for (int np = 0; np < NP; ++np) {
            const int idx = ks * NP + np;
            if (idx + 1 < KS * NP) load_b(idx + 1, (idx + 1) & 1);
#pragma unroll
            for (int mt = 0; mt < O_MT; ++mt) {
              mma_16816<T>(o[mt][2 * np], a[ks & 1][mt], bv[idx & 1][0], bv[idx & 1][1]);
              mma_16816<T>(o[mt][2 * np + 1], a[ks & 1][mt], bv[idx & 1][2], bv[idx & 1][3]);
            }
          }
          if constexpr (kWidenEarly) {
            // widen the next step's rows while this k-step's MMAs run: row pass q after k-step q * KS / PASSES
            // (the next step's cp.async group is the oldest one still pending)
            if (step + 1 < s.k_end) {
              if (ks == 0) cp_async_wait<STAGES - 2>();
#pragma unroll
              for (int q = 0; q < KCopy::PASSES; ++q)
                if (ks == q * KS / KCopy::PASSES) widen_fp8(p, s, step + 1, smem, (it + 1) % STAGES, q, q + 1);
            }
          }
        }
      }
    }

    // ---- epilogue: combine the S warps' partial row sums, normalise, write (kStatsAlias: l_part is red_max's
    // space, free since every warp passed the last step's barrier B)
#pragma unroll
    for (int mt = 0; mt < S_MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float l = l_run[mt][h];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        if (t4 == 0) {
          l_part[wn * BM + srow[mt][h]] = l;
          if (wn == 0) m_fin[srow[mt][h]] = m_run[mt][h];
        }
      }
    __syncthreads();
    FV_TRACE(trace_block(), 13);

    const bool final_out = num_splits == 1;
#pragma unroll
    for (int mt = 0; mt < O_MT; ++mt) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = om * OM + mt * 16 + g + 8 * half;
        const int r = m_tile * BM + row;
        if (r >= s.rows) continue;
        float l = 0.f;
#pragma unroll
        for (int w = 0; w < WN; ++w) l += l_part[w * BM + row];
        float m = m_fin[row];
        const int i = r / p.group, j = r - i * p.group;
        const int h = hk * p.group + j;
        float inv = l > 0.f ? 1.f / l : 0.f;
        // a sink joins the denominator once: here when the request is not split, else in the combine
        if (final_out && p.sinks != nullptr && l > 0.f) join_sink(p.sinks[h] * kLog2e, m, l, inv);
        if constexpr (kF16) inv *= vs_out;  // (kF16: prefix values' v_scale, kept out of P)
        // (fp16 models: the 2^sigma the P factors left out; 1 where v_scale is 1 or in [2^-2, 2^15))
        if constexpr (MODS && std::is_same<T, __half>::value) inv *= p.f16_out;
        const int64_t tok = s.qo0 + i;
        const float lse2 = lse_log2(m, l);
        if (final_out) {
          const int64_t base = tok * p.out_stride_token + int64_t(h) * p.out_stride_head + on * ON + out_lane_col(t4);
#pragma unroll
          for (int nt = 0; nt < O_NT; ++nt) {
            float x, y;
            const int col = out_pair(o[mt], nt, half, t4, x, y);
            x *= inv;
            y *= inv;
            store_out2<T>(p, base, col, x, y);
          }
          if (p.lse != nullptr && on == 0 && t4 == 0)
            p.lse[tok * p.lse_stride_token + h] = l > 0.f ? lse2 * kLn2 : -INFINITY;
        } else {
          const int64_t prow = part_row(p, slot0 + split, i, h);
          float* dst = p.part_o + prow * DV + on * ON + out_lane_col(t4);
#pragma unroll
          for (int nt = 0; nt < O_NT; ++nt) {
            float x, y;
            const int col = out_pair(o[mt], nt, half, t4, x, y);
            *reinterpret_cast<float2*>(dst + col) = make_float2(x * inv, y * inv);
          }
          if (on == 0 && t4 == 0) p.part_lse[prow] = lse2;
        }
      }
    }
    FV_TRACE(trace_block(), 14);
  }

  // Request b's segment of the planned key steps [k_begin, k_end)
  __device__ __forceinline__ static Seg make_seg(const VerifyParams& p, int b, int k_begin, int k_end) {
    Seg s;
    s.b = b;
    s.qo0 = load_index(p.qo_indptr, b, p.qo_i64);
    s.n = static_cast<int>(load_index(p.qo_indptr, b + 1, p.qo_i64) - s.qo0);
    s.kv0 = load_index(p.kv_indptr, b, p.kv_indptr_i64);
    s.plen = static_cast<int>(load_index(p.kv_indptr, b + 1, p.kv_indptr_i64) - s.kv0);
    s.len = s.plen + s.n;
    s.rows = s.n * p.group;
    s.mask0 = 0;
    s.woff = 0;
    if (p.bytes_direct) {
      s.mask0 = load_index(p.mask_indptr, b, p.mask_indptr_i64);
      s.woff = p.window_kv_offsets != nullptr ? p.window_kv_offsets[b] : 0;
    }
    // a sliding window hides the first steps of a long prefix; the planner did not count them
    const int skip = window_skip_steps(s.plen, p.window, BN);
    s.k_begin = k_begin + skip;
    s.k_end = k_end + skip;
    return s;
  }

  // the CTA's trace record (trace.cuh)
  __device__ __forceinline__ static int64_t trace_block() {
    return blockIdx.x + int64_t(gridDim.x) * (blockIdx.y + int64_t(gridDim.y) * blockIdx.z);
  }

  // The prepare kernel's plan (schedule.cuh), computed by one warp for a batch of at most
  // kInlinePlanMaxBatch requests into `sp` (SchedLayout order), with the same partition.h functions.
  __device__ static void plan_inline(const VerifyParams& p, int32_t* sp) {
    const int lane = threadIdx.x;  // warp 0
    const int B = p.batch;
    int cost = 0;
    if (lane < B) {
      const int64_t n = load_index(p.qo_indptr, lane + 1, p.qo_i64) - load_index(p.qo_indptr, lane, p.qo_i64);
      const int64_t plen =
          load_index(p.kv_indptr, lane + 1, p.kv_indptr_i64) - load_index(p.kv_indptr, lane, p.kv_indptr_i64);
      cost = request_cost(n, plen - int64_t(window_skip_steps(plen, p.window, p.block_n)) * p.block_n, p.block_n,
                          p.overhead);
    }
    int inc = cost;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, inc, o);
      if (lane >= o) inc += x;
    }
    const int total = __shfl_sync(0xffffffffu, inc, 31);
    const int parts = effective_parts(p.num_parts, total, p.min_part_cost);
    int32_t* cum = sp + SchedLayout::cum(B);
    if (lane == 0) {
      sp[0] = parts;
      sp[1] = total;
      cum[0] = 0;
    }
    if (lane < B) cum[lane + 1] = inc;
    __syncwarp();
    int fp = 0, ns = 0;
    if (lane < B) request_splits(cum[lane], cum[lane + 1], p.overhead, parts, total, &fp, &ns);
    const int slots = ns > 1 ? ns : 0;
    int sinc = slots;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, sinc, o);
      if (lane >= o) sinc += x;
    }
    if (lane < B) {
      sp[SchedLayout::first_part(B) + lane] = fp;
      sp[SchedLayout::num_splits(B) + lane] = ns;
      sp[SchedLayout::slot_offset(B) + lane] = sinc - slots;
    }
  }

  // The CTA's request segments of the plan (the prepare kernel's, or planned here for batches of at most
  // kInlinePlanMaxBatch), each with this CTA's split index, the request's split count and its first partial
  // slot: body(seg, m_tile, hk, split, num_splits, slot0). Segments with no queries in this CTA's row tile are
  // skipped.
  // Shared by this tile's run() and the Hopper kernel's (verify_wg.cuh).
  static constexpr int kInlineSchedWords = SchedLayout::words(kInlinePlanMaxBatch);
  static_assert(sizeof(int32_t) * kInlineSchedWords <= kVerifyStaticSmem, "tile_config.h: kVerifyStaticSmem");
  template <class Body>
  __device__ __forceinline__ static void for_each_planned_segment(const VerifyParams& p, Body&& body) {
    __shared__ int32_t inline_sched[kInlineSchedWords];
    for_each_planned_segment(p, body, inline_sched);
  }
  // the same with the inline plan's shared buffer given (kInlineSchedWords words): where one kernel walks the plan
  // in two places (the Hopper kernel's producer and compute warpgroups), both must read the one plan warp 0 wrote
  template <class Body>
  __device__ __forceinline__ static void for_each_planned_segment(const VerifyParams& p, Body&& body,
                                                                  int32_t* inline_sched) {
    const int m_tile = blockIdx.x, part = blockIdx.y, hk = blockIdx.z;
    FV_TRACE_TAG(trace_block(), 0, part);
    // the combine kernel (a programmatic dependent launch on sm_90+) may be scheduled once every CTA of this
    // grid has started; it waits for the grid to complete before it reads anything
    pdl_launch_dependents();
    static_assert(kInlinePlanMaxBatch <= 32, "one warp plans");
    const int32_t* sched = p.sched;
    if (p.inline_plan) {
      if (threadIdx.x < 32) plan_inline(p, inline_sched);
      __syncthreads();
      // one CTA publishes the plan for the combine kernel (which runs after this grid)
      if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0)
        for (int w = threadIdx.x; w < SchedLayout::words(p.batch); w += blockDim.x) p.sched[w] = inline_sched[w];
      sched = inline_sched;
    }
    FV_TRACE(trace_block(), 1);
    const int parts = sched[0];
    const int64_t total = sched[1];
    if (part >= parts || total == 0) return;
    const int32_t* cum = sched + SchedLayout::cum(p.batch);
    const int32_t* first_part = sched + SchedLayout::first_part(p.batch);
    const int32_t* num_splits = sched + SchedLayout::num_splits(p.batch);
    const int32_t* slot_off = sched + SchedLayout::slot_offset(p.batch);
    for_each_segment(part, parts, total, cum, p.batch, p.overhead, [&](int b, int k_begin, int k_end) {
      const Seg s = make_seg(p, b, k_begin, k_end);
      if (m_tile * BM >= s.rows) return;  // this row tile has no queries in request b
      body(s, m_tile, hk, part - first_part[b], num_splits[b], slot_off[b]);
    });
  }

  __device__ static void run(const VerifyParams& p, uint8_t* smem) {
    for_each_planned_segment(p, [&](const Seg& s, int m_tile, int hk, int split, int num_splits, int slot0) {
      run_segment(p, s, m_tile, hk, split, num_splits, slot0, smem);
    });
  }
};

template <int CFG, class T, bool MODS, bool KV8>
__global__ void __launch_bounds__(kTileConfigs[CFG].threads(), kTileConfigs[CFG].min_blocks_per_sm)
    verify_kernel(const __grid_constant__ VerifyParams p) {
  extern __shared__ __align__(128) uint8_t smem[];
#if defined(__CUDA_ARCH__)
  if constexpr (kTileConfigs[CFG].large_smem) {
    // the large-tile configuration exists for sm_90 / sm_100 only (227 KB of shared memory)
#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200
    Verify<CFG, T, MODS, KV8>::run(p, smem);
#else
    __trap();
#endif
  } else {
    Verify<CFG, T, MODS, KV8>::run(p, smem);
  }
#endif
}

// The fp8 32-row tiles with 64-key compact steps in the model's dtype (Verify's NARROW; launched by
// launch_verify_narrow, chosen by the planner: plan.cpp). A kernel of its own, so that the other kernels keep their names.
template <int CFG, class T>
__global__ void __launch_bounds__(kTileConfigs[CFG].threads(), kTileConfigs[CFG].min_blocks_per_sm)
    verify_kernel_narrow(const __grid_constant__ VerifyParams p) {
  static_assert(has_fp8_narrow_kernel(CFG), "tile_config.h lists the configurations with a narrow fp8 kernel");
  extern __shared__ __align__(128) uint8_t smem[];
#if defined(__CUDA_ARCH__)
  if constexpr (kTileConfigs[CFG].large_smem) {
#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200
    Verify<CFG, T, true, true, true>::run(p, smem);
#else
    __trap();
#endif
  } else {
    Verify<CFG, T, true, true, true>::run(p, smem);
  }
#endif
}

}  // namespace fv
