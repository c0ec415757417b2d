/*
 * flashverify — tree-verify attention for speculative decoding over a paged KV cache.
 *
 * This is the library's only public header: a C ABI of plain structs, fixed-width integers and status
 * codes. Nothing throws or exits across it. Every entry point validates its arguments first and, on
 * failure, returns a status and leaves a message naming the offending argument and its value in a
 * thread-local buffer (fv_last_error()).
 *
 * One call verifies a batch of B requests. Request b has N_b draft tokens (its queries) and a committed
 * prefix of P_b tokens in a KV pool. Every draft query attends to
 *   1. the whole prefix, read from the pool through token-slot indices (or a page table), and
 *   2. the request's own draft tokens, whose K/V arrive as contiguous tensors, under the tree's
 *      ancestor mask: draft i sees draft j iff the mask says so (SGLang: j is i or an ancestor of i).
 *
 * Shapes (T = rows of q / out: at least qo_indptr[B]; rows are indexed absolutely, request b's draft i
 * being row qo_indptr[b] + i, so with qo_indptr[0] > 0 the first rows are not read or written):
 *   q        [T, Hq, Dqk]            out [T, Hq, Dv]          lse [T, Hq] (optional, natural log)
 *   k_draft  [T, Hkv, Dqk]           v_draft [T, Hkv, Dv]
 *   k_pool   [num_slots, Hkv, Dqk]   v_pool  [num_slots, Hkv, Dv]   (MLA: v_pool may alias k_pool;
 *                                     elements of problem.kv_dtype, e.g. fp8 bytes)
 * The last dimension of every tensor is contiguous; the other strides are given in elements, non-negative,
 * rows (tokens, slots) outermost: with H heads of dim D, stride_head >= D (when H > 1) and the row stride
 * >= (H - 1) * stride_head + D. A head-major view ([H, rows, D] transposed) is refused (FV_ERR_BAD_STRIDE).
 * Every tensor and index pointer that the chosen addressing and mask kind use must be non-NULL, also for an
 * empty batch (B = 0) or T = 0, where nothing is read (FV_ERR_NULL_POINTER otherwise).
 *
 * Typical use (CUB-style two calls: size the workspace once for the largest batch, then run):
 *
 *   fv_problem pb; fv_problem_init(&pb);
 *   pb.dtype = FV_DTYPE_BF16; pb.batch_size = B; pb.max_draft = N;
 *   pb.num_q_heads = 16; pb.num_kv_heads = 1; pb.head_dim_qk = 576; pb.head_dim_v = 512;
 *   size_t bytes; if (fv_workspace_size(&pb, &bytes) != FV_OK) { puts(fv_last_error()); }
 *   void* ws; cudaMalloc(&ws, bytes);
 *   fv_args a; fv_args_init(&a); a.problem = pb; a.q = q; ... a.sm_scale = 0.1352f;
 *   fv_status s = fv_run(&a, ws, bytes, stream);   // no allocation, no host sync: capturable
 */
#ifndef FLASHVERIFY_FLASHVERIFY_H_
#define FLASHVERIFY_FLASHVERIFY_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define FV_API __declspec(dllexport)
#else
#define FV_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define FLASHVERIFY_VERSION_MAJOR 0
#define FLASHVERIFY_VERSION_MINOR 2
#define FLASHVERIFY_VERSION_PATCH 0

/* Status codes. Each kind of misuse has its own code; fv_last_error() names the argument. */
typedef enum fv_status {
  FV_OK = 0,
  FV_ERR_NULL_POINTER = 1,         /* a required pointer is NULL */
  FV_ERR_INVALID_VALUE = 2,        /* an enum or scalar outside its range (unknown mask kind, NaN scale) */
  FV_ERR_HEAD_COUNT = 3,           /* num_q_heads is not a positive multiple of num_kv_heads */
  FV_ERR_UNSUPPORTED_HEAD_DIM = 4, /* (head_dim_qk, head_dim_v) not in the supported list */
  FV_ERR_UNSUPPORTED_DTYPE = 5,    /* unknown dtype code, or one the chosen device / implementation lacks */
  FV_ERR_BAD_LENGTH = 6,           /* a negative or out-of-range length or count (batch_size, max_draft, ...) */
  FV_ERR_INCONSISTENT_LENGTHS = 7, /* indptr arrays not monotone, N_b > max_draft, ... */
  FV_ERR_MASK_INDPTR = 8,          /* mask_indptr disagrees with N_b * (off_b + P_b + N_b), or an entry is negative */
  FV_ERR_BAD_STRIDE = 9,           /* a stride too small, negative, or misaligned for the kernel */
  FV_ERR_WORKSPACE_TOO_SMALL = 10, /* workspace_bytes is less than fv_workspace_size() reported */
  FV_ERR_UNSUPPORTED = 11,         /* a combination the chosen implementation does not serve */
  FV_ERR_NO_DEVICE = 12,           /* CUDA requested but no usable GPU, or the library has no code for its
                                      architecture (fv_workspace_size and fv_run) */
  FV_ERR_CUDA = 13,                /* a CUDA runtime call failed (message has its error string) */
  FV_ERR_BAD_INDEX = 14,           /* a KV slot, page id or parent index out of range, or a prefix that needs
                                      more pages than a page-table row holds (page_table_stride) */
  FV_ERR_BAD_MASK = 15,            /* a parent array with a cycle or self-parent */
  FV_ERR_INTERNAL = 16
} fv_status;

/* Element types. 0 is deliberately invalid so that a zero-initialised problem is rejected. */
typedef enum fv_dtype {
  FV_DTYPE_BF16 = 1,
  FV_DTYPE_FP16 = 2,
  FV_DTYPE_FP32 = 3, /* inputs: CPU oracle only; outputs: CPU, and CUDA as out_dtype */
  FV_DTYPE_FP64 = 4, /* CPU oracle only, outputs only */
  FV_DTYPE_FP8_E4M3 = 5 /* KV pools only (fv_problem.kv_dtype): OCP e4m3 bytes, as SGLang's fp8 KV cache
                           stores them (uint8 / float8_e4m3fn); scaled by k_scale / v_scale */
} fv_dtype;

typedef enum fv_index_dtype { FV_INDEX_INT32 = 0, FV_INDEX_INT64 = 1 } fv_index_dtype;

typedef enum fv_device {
  FV_DEVICE_CUDA = 0, /* pointers are device pointers; work is queued on `stream` */
  FV_DEVICE_CPU = 1   /* pointers are host pointers; the float64 oracle runs synchronously */
} fv_device;

typedef enum fv_impl {
  FV_IMPL_AUTO = 0,  /* CUDA: the split-KV tensor-core kernel; CPU: the oracle */
  FV_IMPL_FAST = 1,  /* CUDA only */
  FV_IMPL_NAIVE = 2, /* CUDA only: one block per (draft token, q head); the reference GPU kernel */
  FV_IMPL_ORACLE = 3 /* CPU only: dense float64 */
} fv_impl;

typedef enum fv_mask_kind {
  FV_MASK_BYTES = 0,   /* SGLang's custom_mask + mask_indptr: per request a row-major [N_b x (P_b+N_b)]
                          block of bytes, nonzero = visible; only the draft columns are read */
  FV_MASK_BITS = 1,    /* mask_bits [T, mask_bits_stride] uint32: bit j of row t = token t sees draft j
                          of its request (word j/32, bit j%32) */
  FV_MASK_PARENTS = 2, /* parents [T] int32: parent's index within the request, -1 for a root;
                          draft i sees draft j iff j is i or an ancestor of i */
  FV_MASK_CAUSAL = 3   /* a chain: draft i sees drafts 0..i */
} fv_mask_kind;

typedef enum fv_kv_addressing {
  FV_KV_TOKEN_SLOTS = 0, /* prefix token p of request b is pool row kv_indices[kv_indptr[b] + p] */
  FV_KV_PAGE_TABLE = 1   /* pool row page_table[b * page_table_stride + p / page_size] * page_size
                            + p % page_size; kv_indptr still gives the prefix lengths */
} fv_kv_addressing;

typedef enum fv_profile {
  FV_PROFILE_AUTO = 0,       /* the fastest configuration that fits the current GPU */
  FV_PROFILE_SMALL_SMEM = 1, /* force the configurations that fit 99 KB of shared memory (sm_86/89/120) */
  FV_PROFILE_LARGE_SMEM = 2  /* MLA: force the large-tile configuration (needs ~227 KB: sm_90/sm_100;
                                FV_ERR_UNSUPPORTED where it does not fit); other head dims: as AUTO */
} fv_profile;

/* fv_problem.flags bits. */
enum {
  /* Index checking: before any kernel follows them, check on the device that every length, slot index,
     page id and parent is in range (slots and pages against num_slots) and that the indptr arrays are
     monotone; a bad one is returned as an error status (FV_ERR_BAD_INDEX, FV_ERR_INCONSISTENT_LENGTHS,
     FV_ERR_MASK_INDPTR, FV_ERR_BAD_MASK, ...) naming the request, position and value, and no pool row or
     page outside num_slots is read. (The index arrays' own lengths are not passed: kv_indices, custom_mask,
     mask_bits and the page table must hold the entries that the indptr arrays and batch_size point to.) Costs one small kernel and one host synchronisation per call, so it cannot be captured
     in a CUDA graph (FV_ERR_UNSUPPORTED under capture). The environment variable FLASHVERIFY_CHECK=1
     (read once, at the first fv_run) turns it on for every call. */
  FV_FLAG_CHECK_INDICES = 1
};

/* An index array: int32 or int64 elements. */
typedef struct fv_index {
  const void* data;
  int32_t dtype; /* fv_index_dtype */
  int32_t reserved;
} fv_index;

/*
 * The problem's static description: everything the workspace size depends on. All fields are fixed
 * for a CUDA graph; the per-step lengths live in device memory (fv_args).
 */
typedef struct fv_problem {
  int32_t device;       /* fv_device */
  int32_t impl;         /* fv_impl */
  int32_t dtype;        /* fv_dtype of q, k/v draft, k/v pool */
  int32_t out_dtype;    /* fv_dtype of out; 0 = same as dtype (FP32 allowed on CUDA, FP64 on CPU) */
  int32_t batch_size;   /* B: the indptr arrays have B + 1 entries */
  int32_t max_draft;    /* upper bound on N_b, the draft tokens of any request (1..65536) */
  int32_t num_q_heads;  /* Hq (Hq x max_draft at most 2^24: FV_ERR_UNSUPPORTED above) */
  int32_t num_kv_heads; /* Hkv; Hq must be a multiple */
  int32_t head_dim_qk;  /* Dqk: 576 (MLA) or 64, 128, 256 */
  int32_t head_dim_v;   /* Dv: 512 (MLA) or equal to Dqk. MLA models have one KV head; more are accepted
                           (the mma.sync tile serves them, not the Hopper MLA kernel) */
  int32_t mask_kind;    /* fv_mask_kind */
  int32_t kv_addressing;/* fv_kv_addressing */
  int32_t page_size;    /* tokens per page (FV_KV_PAGE_TABLE), ignored otherwise */
  int32_t num_kv_splits;/* 0: automatic. 1..4096: the number of KV partitions the batch's work is cut
                           into (1 = no request is split); for tests and tuning */
  int32_t profile;      /* fv_profile */
  int32_t flags;        /* FV_FLAG_* bits; 0 for none */
  int32_t kv_dtype;     /* fv_dtype of k_pool / v_pool: 0 = same as dtype, or FV_DTYPE_FP8_E4M3 (an fp8
                           KV cache: prefix keys and values are the decoded bytes; fv_args.k_scale and
                           v_scale apply as SGLang applies them; the draft K/V stay in dtype). NaN
                           codes (0x7f, 0xff): for bf16 models on sm_80 / sm_86 the fast kernel's
                           in-register widening (GQA d128 with group x drafts <= 32, steps of prefix keys
                           only) reads them as +-480; every other path, GPU and model dtype, and the
                           reference kernels keep NaN. MLA on sm_90 with a bf16 model multiplies in fp16
                           (Q rows with a power-of-two factor each: exact) when |k_scale| and |v_scale|
                           lie in [2^-12, 2^12] within 2^6 of each other: draft K/V elements beyond
                           65504 x 2^round(log2 |k_scale|) (over 100x the pool's e4m3 range, 448 x
                           |k_scale|) overflow to Inf; FLASHVERIFY_FP8_MLA_F16=0 keeps bf16 products */
} fv_problem;

/* One verify call. Strides are in elements; the last dimension of every tensor is contiguous. */
typedef struct fv_args {
  fv_problem problem;

  const void* q; /* [T, Hq, Dqk] */
  int64_t q_stride_token, q_stride_head;
  void* out; /* [T, Hq, Dv] */
  int64_t out_stride_token, out_stride_head;
  float* lse; /* optional [T, Hq]: natural-log sum of exp of the scaled scores. With fp8 pools and a bf16
                 model on sm_90 (GQA d128 / d256) prefix scores come from e4m3 wgmma, whose sums keep ~14
                 bits: the LSE is then within 2^-9 of |lse| (the outputs stay within 2x the naive
                 kernel's error); FLASHVERIFY_GQA8_S8=0 keeps exact products */
  int64_t lse_stride_token;

  const void* k_draft; /* [T, Hkv, Dqk]: the draft tokens' own keys */
  int64_t k_draft_stride_token, k_draft_stride_head;
  const void* v_draft; /* [T, Hkv, Dv] */
  int64_t v_draft_stride_token, v_draft_stride_head;

  const void* k_pool; /* [num_slots, Hkv, Dqk] */
  int64_t k_pool_stride_slot, k_pool_stride_head;
  const void* v_pool; /* [num_slots, Hkv, Dv]; MLA: may be the first Dv columns of k_pool, and must be for the
                         fast kernel (same pointer and strides, and v_draft likewise the first Dv columns of
                         k_draft; FV_ERR_UNSUPPORTED otherwise: the oracle and the naive kernel take either) */
  int64_t v_pool_stride_slot, v_pool_stride_head;
  int64_t num_slots; /* rows in the pool, at least 1 even when every prefix is empty (padded requests read
                        slot 0); bounds checks on the CPU and in check mode */

  fv_index qo_indptr;  /* [B + 1]: request b's draft tokens are rows qo_indptr[b] .. qo_indptr[b+1]-1 */
  fv_index kv_indptr;  /* [B + 1]: P_b = kv_indptr[b+1] - kv_indptr[b]. CUDA: the sum over the batch of P_b + N_b
                          must stay below 2^30 (the device planner and the kernels count key positions and the
                          batch's work in int32; the lengths live in device memory, so only check mode,
                          FV_FLAG_CHECK_INDICES or FLASHVERIFY_CHECK=1, checks it: FV_ERR_UNSUPPORTED) */
  fv_index kv_indices; /* token slots (FV_KV_TOKEN_SLOTS); may be over-allocated */
  const int32_t* page_table; /* [B, page_table_stride] (FV_KV_PAGE_TABLE) */
  int64_t page_table_stride;

  const uint8_t* custom_mask; /* FV_MASK_BYTES (uint8 or bool storage) */
  fv_index mask_indptr;       /* FV_MASK_BYTES: [B + 1] start of each request's block */
  const uint32_t* mask_bits;  /* FV_MASK_BITS */
  int64_t mask_bits_stride;   /* words per row, >= ceil(max_draft / 32) */
  const int32_t* parents;     /* FV_MASK_PARENTS */

  float sm_scale; /* scores are sm_scale * q . k; sm_scale * log2(e) and sm_scale * k_scale * log2(e) must be
                     finite in float (FV_ERR_INVALID_VALUE: the GPU kernels fold them into one factor each) */

  /* SGLang's per-layer score modifiers. All default to off (fv_args_init); each applies to prefix and
   * draft keys alike, in this order: s = sm_scale * q.k (x k_scale for prefix keys), then the logit
   * cap, then the xai temperature, then the masks (tree, sliding window). */
  float logit_cap;             /* > 0: s = logit_cap * tanh(s / logit_cap); 0 = off */
  int32_t sliding_window;      /* > 0 (W): draft i of request b sits at position P_b + i and sees prefix
                                  token p iff P_b + i <= p + W, draft j iff i <= j + W (and the tree says
                                  so); <= 0 = off; W >= 2^30 hides no key (within kv_indptr's limit) */
  int32_t xai_temperature_len; /* >= 2 (L): scores of draft i are multiplied by log2(P_b + i) / log2(L)
                                  when P_b + i > L; <= 0 = off; 1 is invalid (log2(1) = 0 divides) */
  const float* sinks;          /* optional [Hq] fp32: per q head, exp(sinks[h]) is added to every row's
                                  softmax denominator (the LSE includes it) of rows that see a key.
                                  The sink joins the row's maximum, so any sink up to 2.35e38 (just below
                                  FLT_MAX / log2(e), which the kernels' base-2 scaling needs) is safe: one
                                  far above every score gives out ~0 and lse = the sink. NaN, +inf and
                                  finite values above 2.35e38 are invalid (check mode rejects them) */
  const int32_t* window_kv_offsets; /* optional [B], FV_MASK_BYTES only (non-NULL with another mask kind:
                                  FV_ERR_UNSUPPORTED, with or without a window): request b's byte-mask rows are
                                  off_b + P_b + N_b wide and its draft columns start at off_b + P_b
                                  (SGLang's layout when a sliding window dropped off_b prefix tokens).
                                  Read only with sliding_window > 0, as SGLang's kernel reads them; ignored
                                  (rows P_b + N_b wide) otherwise */
  float k_scale;               /* prefix scores are multiplied by k_scale (SGLang's KV-cache scale);
                                  0 means 1 */
  float v_scale;               /* prefix values are multiplied by v_scale; 0 means 1. The fast kernel folds it
                                  into the softmax weights P, which an fp16 model holds in fp16: there it enters
                                  as v_scale 2^-s on prefix keys, 2^-s on draft keys and 2^s on the output (s a
                                  power-of-two exponent keeping both in fp16's range), so any |v_scale| in
                                  [2^-15, 2^29] keeps fp16's precision; beyond, small weights lose bits */
} fv_args;

/* Fills defaults: CUDA, AUTO impl, dtype unset (0), mask BYTES, token slots, page_size 1, auto splits. */
FV_API void fv_problem_init(fv_problem* problem);
/* Zeroes every field and calls fv_problem_init on args->problem. */
FV_API void fv_args_init(fv_args* args);

/*
 * Workspace bytes fv_run needs for this problem (0 is a valid answer). For FV_DEVICE_CUDA the size
 * depends on the current device (its multiprocessor count); size it on the device you run on.
 *   size_t n; fv_workspace_size(&problem, &n);
 */
FV_API fv_status fv_workspace_size(const fv_problem* problem, size_t* bytes);

/*
 * Runs one verify call. `workspace`: at least fv_workspace_size() bytes, 16-byte aligned (cudaMalloc's pointers
 * are; FV_ERR_BAD_STRIDE otherwise), NULL allowed where the size is 0. CUDA: queued on `stream` (a cudaStream_t,
 * NULL = legacy default stream); no
 * allocation, no host synchronisation and no host read of device data, so it can be captured in a CUDA
 * graph and replayed after the lengths, indices and mask were rewritten in place. CPU: synchronous;
 * every device-side value (lengths, indices, mask) is validated first.
 *   fv_status s = fv_run(&args, workspace, workspace_bytes, (void*)stream);
 */
FV_API fv_status fv_run(const fv_args* args, void* workspace, size_t workspace_bytes, void* stream);

/*
 * Which kernel fv_run would take for this problem on the current device: the tile configuration's name for
 * FV_IMPL_FAST (as src/tile_config.h and FLASHVERIFY_CONFIG spell it; on sm_90, where a Hopper configuration is
 * planned but the call has score modifiers other than sinks or fp8 scales, fv_run runs the mma.sync tile of the same
 * plan, which this does not see), "naive" for FV_IMPL_NAIVE, "oracle" for FV_DEVICE_CPU. Copied into `name`
 * (NUL-terminated; FV_ERR_INVALID_VALUE if `size` is too small, with the name's length in the message). The same
 * checks and errors as fv_workspace_size. For diagnostics and tests; nothing else depends on it.
 *   char name[64]; fv_plan_config(&problem, name, sizeof name);
 */
FV_API fv_status fv_plan_config(const fv_problem* problem, char* name, size_t size);

/* A static English description of a status code. */
FV_API const char* fv_status_string(fv_status status);
/* The message of the last failing call on this thread ("" if none failed yet), at most 1023 characters. The pointer
 * is to a fixed thread-local buffer: it stays valid for the thread's lifetime, and its text changes when a later
 * call on the thread fails. */
FV_API const char* fv_last_error(void);
/* (major << 16) | (minor << 8) | patch */
FV_API int32_t fv_version(void);
/* A static one-line description of the build: version, CUDA version, architectures compiled. */
FV_API const char* fv_build_info(void);
/* sizeof(fv_problem) and sizeof(fv_args) as this library was compiled: bindings (ctypes) check their
 * mirrors of the structs against these at load time. */
FV_API void fv_struct_sizes(size_t* problem_bytes, size_t* args_bytes);

#ifdef __cplusplus
}
#endif

#endif /* FLASHVERIFY_FLASHVERIFY_H_ */
