// Test and benchmark kit: builds random verify problems on the host (pools with shuffled slots and
// poisoned unused rows, trees, the three mask forms, page tables), runs the float64 oracle through the
// ABI, runs a CUDA implementation on poisoned outputs, and compares. Used by the GoogleTest suites and
// the CLI; not part of the installed library.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "flashverify/flashverify.h"

namespace fvt {

enum class Tree { Chain, Star, Random, RandomPerm };
const char* tree_name(Tree t);

// Sets an environment variable for a scope (also when an ASSERT leaves it early), then unsets it.
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~ScopedEnv() { unsetenv(name); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

// The head layout every tile configuration is exercised with when it is forced (FLASHVERIFY_CONFIG): the
// GPU test EveryKernel runs each against the oracle, the CPU test Plan.ForcedConfiguration... checks that the
// planner takes it.
struct ConfigLayout {
  const char* config;
  bool mla;
  int d;  // head dim (MLA: 576 / 512)
  int hq, hkv;
};
inline constexpr ConfigLayout kConfigLayouts[] = {
    {"mla576_bm64_bn64_s2", true, 576, 16, 1},  {"mla576_bm32_bn16_s3", true, 576, 16, 1},
    {"gqa64_bm64_bn64_s4", false, 64, 8, 2},    {"gqa128_bm64_bn64_s2", false, 128, 16, 1},
    {"gqa256_bm64_bn16_s3", false, 256, 8, 2},  {"gqa128_bm32_bn64_s2", false, 128, 8, 2},
    {"gqa128_bm64_bn32_s4", false, 128, 16, 1}, {"gqa128_bm32_bn64_s3", false, 128, 8, 2},
    {"mla576_wg_bm64_bn64_s2", true, 576, 16, 1},  // sm_90 only (elsewhere the forced name is ignored)
    {"gqa256_bm64_bn32_s2", false, 256, 8, 2},     // sm_90 / sm_100 only (the same)
    {"gqa128_wg_bm64_bn64_s2", false, 128, 16, 2}, // sm_90 only (the same)
    {"gqa128_wg_bm64_bn64_s5", false, 128, 8, 1},  // sm_90 only (the same)
    {"gqa256_bm64_bn64_s2", false, 256, 8, 1},     // sm_90 / sm_100 only (the same)
    {"gqa256_wg_bm64_bn64_s2", false, 256, 16, 2}, // sm_90 only (the same)
};

struct CaseSpec {
  std::string name;
  int dtype = FV_DTYPE_BF16;
  int out_dtype = 0;  // 0: same as dtype
  int hq = 16, hkv = 1, dqk = 576, dv = 512;
  int max_draft = 8;
  std::vector<int> draft;   // N_b per request
  std::vector<int> prefix;  // P_b per request (-1: a padded request, prefix 1 at slot 0)
  Tree tree = Tree::Random;
  int mask_kind = FV_MASK_BYTES;
  int addressing = FV_KV_TOKEN_SLOTS;
  int page_size = 1;
  int64_t page_table_stride = 0;  // 0: max pages + 1; else at least this (CUDA-graph rewrites keep one)
  bool indices_i64 = true;  // kv_indices int64 (SGLang)
  bool qo_i64 = false;      // qo_indptr int64 (SGLang under CUDA graphs)
  bool shuffle_slots = true;
  int row_pad = 0;          // extra elements per token row of q / out (strided views), multiple of 8
  int num_kv_splits = 0;
  int profile = FV_PROFILE_AUTO;
  bool want_lse = true;
  float value_scale = 1.0f; // inputs uniform in [-value_scale, value_scale]
  float sm_scale = 0.f;     // 0: 1/sqrt(dqk) (MLA: 192^-0.5)
  // SGLang's per-layer modifiers (fv_args): off by default
  float logit_cap = 0.f;
  int sliding_window = 0;
  int xai_temperature_len = 0;
  bool sinks = false;          // random per-head sink logits
  bool window_offsets = false; // byte mask with random window_kv_offsets (mask_kind BYTES; they shape the mask only
                               // with sliding_window > 0, as in SGLang, and are passed and ignored without one)
  float k_scale = 0.f, v_scale = 0.f;  // 0: 1
  bool kv_fp8 = false;         // fp8 e4m3 KV pools (kv_dtype FV_DTYPE_FP8_E4M3), bytes in k_pool8 / v_pool8
  uint64_t seed = 1;

  int batch() const { return static_cast<int>(draft.size()); }
  bool mla() const { return dqk == 576; }
  std::string describe() const;
};

// Everything one call needs, on the host. Index arrays are kept as int64 and narrowed on demand.
struct HostProblem {
  CaseSpec spec;
  int64_t total_q = 0;                 // T
  int64_t num_slots = 0;
  std::vector<uint16_t> q, out_like;   // q [T, Hq, Dqk + pad]
  std::vector<uint16_t> k_draft, v_draft, k_pool, v_pool;  // MLA: v_* empty (views of k_*)
  std::vector<uint8_t> k_pool8, v_pool8;                   // kv_fp8: the pools instead of k_pool / v_pool
  int64_t q_stride_token = 0, out_stride_token = 0;
  std::vector<int64_t> qo_indptr, kv_indptr, kv_indices, mask_indptr;
  std::vector<int32_t> page_table;
  int64_t page_table_stride = 0;
  std::vector<std::vector<int>> parents_local;  // per request
  std::vector<int32_t> parents;                 // [T]
  std::vector<uint8_t> custom_mask;
  std::vector<float> sinks;                  // [Hq] when spec.sinks
  std::vector<int32_t> window_kv_offsets;    // [B] when spec.window_offsets
  std::vector<uint32_t> mask_bits;
  int64_t mask_bits_stride = 0;
  double flops = 0, kv_bytes = 0;  // cost model (DESIGN.md)

  int64_t out_elems() const { return total_q * out_stride_token; }
};

// b requests of n draft tokens over a prefix of p each, hq / hkv heads: MLA (576/512) when `mla`, else
// head dim d. Every other field keeps its default.
CaseSpec uniform_spec(bool mla, int hq, int hkv, int d, int n, int p, int b);

// fp8 e4m3 KV pools with the given k / v scales
CaseSpec with_fp8(CaseSpec s, float k_scale, float v_scale);

HostProblem make_problem(const CaseSpec& spec);

// The same logical problem (every token's q, K, V unchanged) with the prefix placed in a new pool:
// token slots or a page table of `page_size`, shuffled or in order.
HostProblem relayout(const HostProblem& src, int addressing, int page_size, bool shuffle, uint64_t seed);
// Pool row of prefix token k of request b.
int64_t prefix_slot(const HostProblem& hp, int b, int64_t k);

// Index arrays in the dtype the spec asks for (kept alive by the caller).
struct IndexStore {
  std::vector<int32_t> qo32, kv32, idx32, m32;
  std::vector<int64_t> qo64, kv64, idx64, m64;
};

// fv_args for the problem with the given base pointers (host or device copies of the HostProblem).
struct Pointers {
  const void* q;
  void* out;
  float* lse;
  const void *k_draft, *v_draft, *k_pool, *v_pool;
  const void *qo_indptr, *kv_indptr, *kv_indices, *mask_indptr;
  const int32_t* page_table;
  const uint8_t* custom_mask;
  const uint32_t* mask_bits;
  const int32_t* parents;
  const float* sinks;
  const int32_t* window_kv_offsets;
};
fv_args make_args(const HostProblem& hp, const Pointers& ptr, int device, int impl, int out_dtype);
Pointers host_pointers(const HostProblem& hp, IndexStore& store, void* out, float* lse);

// The float64 oracle through the ABI (device = CPU). out: [T, Hq, Dv] row-major (no padding).
struct Reference {
  std::vector<double> out;
  std::vector<float> lse;
};
fv_status run_oracle(const HostProblem& hp, Reference* ref);

// The oracle on request `request`'s rows and q heads [h0, h0 + nh) only, reading hp's own arrays (the same pool,
// indices and mask; the ABI is given batch 1 with the per-request arrays from that request on, whose rows and
// offsets stay absolute, the heads' offsets and nh heads): what a check of a problem too large for the whole oracle
// can afford. With more than one KV head, h0 and nh must be whole groups (Hq / Hkv). out: [qo_indptr[request + 1]
// rows, nh, Dv] (the rows of other requests stay NaN). Returns FV_ERR_INVALID_VALUE for a bad range or request.
fv_status run_oracle_heads(const HostProblem& hp, int h0, int nh, std::vector<double>* out, int request = 0);

// The LSE output's bound against the oracle: |lse - ref| <= kLseAbs natural-log units, and, for GQA d128 / d256
// problems with fp8 pools and a bf16 model, <= max(kLseAbs, kLseRelE4m3 |ref|), the header's stated precision there.
// (Until v58 the relative bound covered every fp8-pool problem with a bf16 model; MLA's fp8 kernels multiply exactly
// widened values and met kLseAbs in v57's run.) Those problems may take scores from e4m3 wgmma (the Hopper GQA
// kernels' S8 steps: verify_wg.cuh), whose accumulation keeps ~14 bits of the running sum each k32 step:
// a score carries an error of ~2^-12 of its size, which the outputs shrug off (they stay within 2x the naive kernel's
// error) but the LSE takes from its largest scores. v57 on an H100 (Fp8.SharpSoftmaxRows: scores spread ~4.7, 512
// rows, |lse| 8.2-23.2 by the oracle for that run's seed, so a bound of at least 0.016 there): 0.0057 (d128) and
// 0.0133 (d256), over kLseAbs. bench/probes/p3_error_sim.py's accumulation model, which matches the GPU's S errors in
// both summation orders, gives 0.0038-0.0047 and 0.0081-0.0127 over 64 such rows (|lse| 15-23), up to 2^-10.5 of
// |lse| (interleaved, the order until v56: 0.020, 2^-9.9). 2^-9 leaves ~2.8x there.
constexpr double kLseAbs = 5e-3;
constexpr double kLseRelE4m3 = 0x1p-9;
double lse_allowed(const HostProblem& hp, double ref);

struct Comparison {
  double rel_l2 = 0, max_abs = 0;
  int64_t worst = -1;  // flat index into [T, Hq, Dv]
  double worst_got = 0, worst_ref = 0;
  int64_t nan_count = 0, checked = 0;
  double lse_max_abs = 0;
  double lse_worst_ratio = 0;  // the largest |lse - ref| / lse_allowed(ref): the LSE passes at <= 1
  int64_t lse_bad = 0;  // NaN or a -inf disagreement
  // the largest relative L2 error of one request's rows (its tokens x Hq x Dv), and which request: rel_l2 over the
  // whole batch lets requests with large outputs (short prefixes) hide a wrong one with small outputs (long prefixes:
  // the output's norm shrinks as the softmax spreads), e.g. a long request's rows all zero next to a padded request
  double req_rel_l2 = 0;
  int64_t worst_req = -1;
  std::string where(const HostProblem& hp) const;  // "t=3 h=5 d=17"
};
// got: [T, Hq, Dv] floats (padding removed)
Comparison compare(const HostProblem& hp, const std::vector<float>& got, const std::vector<float>& got_lse,
                   const Reference& ref);

// The problem uploaded to the current CUDA device, with an output, LSE and workspace of its own.
// Outputs and workspace are poisoned (all bits set: NaN in every float format) by poison().
class DeviceProblem {
 public:
  explicit DeviceProblem(const HostProblem& hp, int impl = FV_IMPL_FAST);
  ~DeviceProblem();
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const fv_args& args() const { return args_; }
  void* workspace() const { return ws_; }
  size_t workspace_bytes() const { return ws_bytes_; }
  void poison();
  fv_status run(void* stream = nullptr);  // fv_run with this problem's workspace
  // Rewrites every input buffer in place (pointers unchanged) with `other`'s contents: same batch size,
  // heads and dims, and no array larger than this problem's. This is what SGLang does between CUDA-graph
  // replays. False (with error()) when something does not fit.
  bool upload_inputs(const HostProblem& other);
  // Outputs as [T, Hq, Dv] floats; `as` names the problem last uploaded when it is not the original.
  bool download(std::vector<float>* out, std::vector<float>* lse, std::vector<uint8_t>* raw,
                const HostProblem* as = nullptr) const;

 private:
  const HostProblem* hp_;
  fv_args args_{};
  std::vector<void*> allocs_;
  void* ws_ = nullptr;
  size_t ws_bytes_ = 0;
  size_t out_bytes_ = 0;
  std::string error_;
  void* dev_copy(const void* src, size_t bytes);
  void* dev_alloc(size_t bytes);
  struct Buf {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  // q, k_draft, v_draft, k_pool, v_pool, qo, kv, idx, mask_indptr, page table, mask, bits, parents, sinks,
  // window offsets
  enum { kQ, kKd, kVd, kKp, kVp, kQo, kKv, kIdx, kMi, kPt, kMask, kBits, kPar, kSinks, kWoff, kNumBufs };
  Buf bufs_[kNumBufs];
  void* put(int which, const void* src, size_t bytes);
};

// A CUDA run on freshly uploaded inputs with poisoned (NaN) outputs and workspace.
struct GpuRun {
  fv_status status = FV_OK;
  std::string error;
  std::vector<float> out;  // [T, Hq, Dv]
  std::vector<float> lse;
  std::vector<uint8_t> raw_out;  // the output buffer's bytes, for bit-exact comparisons
  int64_t pad_written = 0;        // bytes of the output rows' padding (CaseSpec::row_pad) no longer poison
  // FAST runs: the device planner's words as the run left them at the head of the workspace (src/plan.h's
  // SchedLayout; the workspace was poisoned first, so words no kernel wrote read -1). Empty for other runs.
  std::vector<int32_t> plan_words;
};
GpuRun run_gpu(const HostProblem& hp, int impl, int repeats = 1);
// What the device planner decided in a FAST run (from GpuRun::plan_words): the partitions it used, the total
// cost it cut, and the splits of request b. -1 when the run has no plan words.
int planned_partitions(const GpuRun& r);
int64_t planned_total_cost(const GpuRun& r);
int planned_splits(const GpuRun& r, int request);

// GPU availability: "" when usable, otherwise the reason.
std::string gpu_unavailable_reason();
std::string gpu_name();

// bf16 / fp16 helpers
uint16_t float_to_bits(float x, int dtype);
float bits_to_float(uint16_t b, int dtype);

// A reproducible seed: FV_SEED from the environment, else time-based (printed by the callers).
uint64_t session_seed();

}  // namespace fvt
