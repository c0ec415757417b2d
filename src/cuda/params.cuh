// The flat parameter block of the fast kernel family (prepare, verify, combine), passed by value as a
// __grid_constant__. Pointers carry their shape; strides are in elements; the softmax scale is
// pre-multiplied by log2(e) on the host.
#pragma once

#include <cstdint>

namespace fv {

struct VerifyParams {
  const void* q;        // [T, Hq, Dqk]
  int64_t q_stride_token, q_stride_head;
  const void* k_draft;  // [T, Hkv, Dqk]
  int64_t k_draft_stride_token, k_draft_stride_head;
  const void* v_draft;  // [T, Hkv, Dv]
  int64_t v_draft_stride_token, v_draft_stride_head;
  const void* k_pool;   // [num_slots, Hkv, Dqk]
  int64_t k_pool_stride_slot, k_pool_stride_head;
  const void* v_pool;   // [num_slots, Hkv, Dv]
  int64_t v_pool_stride_slot, v_pool_stride_head;
  void* out;            // [T, Hq, Dv] in out dtype
  int64_t out_stride_token, out_stride_head;
  float* lse;           // [T, Hq] natural log, optional
  int64_t lse_stride_token;

  const void* qo_indptr;   // [B + 1]
  const void* kv_indptr;   // [B + 1]
  const void* kv_indices;  // token slots
  const void* mask_indptr; // [B + 1] (byte mask)
  const uint8_t* custom_mask;
  const int32_t* parents;
  const int32_t* page_table;  // [B, page_table_stride]
  int64_t page_table_stride;
  const uint32_t* mask_bits;  // [rows, mask_bits_stride] user bits, or the workspace's converted bits
  int64_t mask_bits_stride;

  int qo_i64, kv_indptr_i64, kv_indices_i64, mask_indptr_i64;  // index dtypes (1 = int64)
  int paged, page_size;
  int mask_kind;  // fv_mask_kind; BYTES and PARENTS are converted to bits by the prepare kernel
  int out_fp32;   // out dtype is fp32 instead of the input dtype

  int batch, max_draft, num_q_heads, num_kv_heads, group, head_dim_v;
  float scale_log2;  // sm_scale * log2(e)

  // SGLang's modifiers. `mods` is set when any of them is active; the kernel then takes the general
  // scoring path (natural-unit scale, cap, temperature, window mask, v_scale folded into P).
  int mods;
  float scale_nat, scale_nat_prefix;  // sm_scale, sm_scale * k_scale
  float scale_log2_prefix;            // sm_scale * k_scale * log2(e): steps with no per-element work
  float logit_cap, inv_logit_cap;     // 0 = off
  float v_scale;                      // prefix values
  int window, xai_len;                // <= 0 = off
  const float* sinks;                 // [Hq] natural-log units, or null
  const int32_t* window_kv_offsets;   // [B] (byte mask), or null
  int kv_fp8;                         // the pools hold fp8 e4m3 bytes (the KV8 instantiation)
  int kv8_pairs;                      // kv8_a16 and FLASHVERIFY_FP8_PAIRS=1: pair copies in the widening tiles

  int inline_plan;   // no prepare kernel ran: every verify CTA plans for itself, CTA (0,0,0) publishes it
  int bytes_direct;  // the byte mask is read in place (no converted bits)

  // work partition (filled by the prepare kernel on the device)
  int32_t* sched;       // SchedLayout
  int num_parts;        // grid.y
  int overhead, min_part_cost, block_n;
  float* part_lse;      // [slots, max_draft, Hq], log2 domain
  float* part_o;        // [slots, max_draft, Hq, Dv], normalised

  int kv8_a16;  // fp8 pool strides are multiples of 16 bytes: 16-byte copies allowed
  int combine_wpr;  // warps a combine unit (Plan::combine_wpr)
  // the Hopper MLA kernel's fp8 path with a bf16 model multiplies in fp16 (verify_wg.cuh, F16): draft rows times
  // f16_draft_row (kd, a power of two near 1 / k_scale), their scores times f16_draft_score = 1 / kd; P times
  // f16_p_prefix = v_scale 2^-sigma (prefix keys) or f16_p_draft = 2^-sigma / kd (draft keys), sigma making the larger
  // of the two at most 1, and the output times f16_out = 2^sigma. With an fp16 model (P in fp16 in every kernel)
  // f16_p_prefix, f16_p_draft and f16_out carry v_scale the same way, split so that P times them stays in fp16's
  // range (dispatch.cu); the kernels that fold v_scale into P read them there
  int fp8_f16;
  // fp8 GQA pools (bf16 models, 16-byte aligned rows) on the 2-stage Hopper d128 kernel without RING: S of the prefix
  // steps on e4m3 wgmma (verify_wg.cuh, S8); FLASHVERIFY_GQA8_S8=0 turns it off (read per call: tests and A/B)
  int fp8_s8;
  float f16_draft_row, f16_draft_score, f16_p_prefix, f16_p_draft, f16_out;
#if defined(FLASHVERIFY_TRACE)
  uint64_t* trace;  // trace.cuh
#endif
};

template <bool I64>
__device__ __forceinline__ int64_t load_index(const void* p, int64_t i) {
  if constexpr (I64) return static_cast<const int64_t*>(p)[i];
  else return static_cast<const int32_t*>(p)[i];
}

__device__ __forceinline__ int64_t load_index(const void* p, int64_t i, int is64) {
  return is64 ? static_cast<const int64_t*>(p)[i] : static_cast<int64_t>(static_cast<const int32_t*>(p)[i]);
}

}  // namespace fv
