// flashverify command line: info, check, bench, soak.
//
//   flashverify info                       build architectures and visible GPUs
//   flashverify check [--cases N] [--seed S]
//                                          random problems, every implementation against the float64 oracle
//   flashverify bench [--suite headline|full|psweep] [--iters N] [--csv FILE] [--graph] [--no-naive]
//                     [--only "A|B$"] [--check-indices] [--no-flush] [--flush-read]
//                                          medians with L2 flushed; µs, GB/s, TFLOP/s, % of the ceilings;
//                                          --only: cases whose name contains A or ends with B (plain text, no
//                                          regex; selecting no case is bad usage, exit 2); --no-flush (or
//                                          FV_BENCH_NO_FLUSH=1): L2 kept between runs (code and data stay warm:
//                                          latency studies only); --flush-read (or FV_BENCH_FLUSH=read): L2
//                                          flushed by reading 512 MB (clean lines) instead of the default memset
//                                          (dirty lines, written back during the timed call: l2flush.cu)
//   flashverify soak [--seconds S] [--seed S] [--report FILE]
//                                          random calls under CUDA-graph replay against the naive kernel
#include <cuda_runtime.h>

#include <algorithm>
#include <new>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "flashverify/flashverify.h"
#include "l2flush.h"
#include "soak.h"
#include "testkit.h"

namespace {

using fvt::CaseSpec;
using fvt::HostProblem;

// The mma.sync bf16 ceiling measured on the H200 this project benchmarks on (../shared/BASELINE.md: 132 SMs at
// 1980 MHz). The bench scales it by SM count and clock on other sm_90 parts and shows no fraction elsewhere (a
// figure of another architecture would mean nothing). The copy ceiling is measured at the start of every bench run.
constexpr double kMmaSyncTflopsH200 = 637.0;

struct Options {
  int cases = 40;
  uint64_t seed = 0;
  std::string suite = "headline";
  int iters = 30;
  std::string csv;
  bool graph = false;
  bool naive = true;
  bool flush = true;  // bench: flush L2 before each timed run
  bool flush_read = false;  // bench: ... by reading a buffer instead of a memset (--flush-read)
  std::string only;
  bool check_indices = false;  // bench: also time the index-checking mode
  double seconds = 600;        // soak
  std::string report;          // soak
};

// A whole-string integer in [lo, hi] (atoi took "abc" as 0 and "-3" as a count: bench --iters 0 crashed on an
// empty median)
bool parse_int(const char* opt, const char* v, long long lo, long long hi, long long* out) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
    std::fprintf(stderr, "%s: expected an integer from %lld to %lld, got \"%s\"\n", opt, lo, hi, v);
    return false;
  }
  *out = x;
  return true;
}

bool parse(int argc, char** argv, int first, Options* o) {
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 < argc) return argv[++i];
      std::fprintf(stderr, "%s needs a value\n", a.c_str());
      return nullptr;
    };
    // an integer option's value into *dst (false: missing or malformed, reported)
    auto int_opt = [&](long long lo, long long hi, long long* dst) {
      const char* v = next();
      return v != nullptr && parse_int(a.c_str(), v, lo, hi, dst);
    };
    long long x = 0;
    if (a == "--cases") { if (!int_opt(1, 1000000, &x)) return false; o->cases = static_cast<int>(x); }
    else if (a == "--seed") { if (!int_opt(0, INT64_MAX, &x)) return false; o->seed = static_cast<uint64_t>(x); }
    else if (a == "--iters") { if (!int_opt(1, 100000, &x)) return false; o->iters = static_cast<int>(x); }
    else if (a == "--seconds") { if (!int_opt(1, 7 * 86400, &x)) return false; o->seconds = static_cast<double>(x); }
    else if (a == "--suite") {
      const char* v = next();
      if (!v) return false;
      o->suite = v;
      if (o->suite != "headline" && o->suite != "full" && o->suite != "psweep") {
        std::fprintf(stderr, "--suite: expected headline, full or psweep, got \"%s\"\n", v);
        return false;
      }
    }
    else if (a == "--csv") { const char* v = next(); if (!v) return false; o->csv = v; }
    else if (a == "--only") { const char* v = next(); if (!v) return false; o->only = v; }
    else if (a == "--graph") o->graph = true;
    else if (a == "--no-naive") o->naive = false;
    else if (a == "--no-flush") o->flush = false;
    else if (a == "--flush-read") o->flush_read = true;
    else if (a == "--check-indices") o->check_indices = true;
    else if (a == "--report") { const char* v = next(); if (!v) return false; o->report = v; }
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return false;
    }
  }
  return true;
}

void usage(FILE* to = stderr) {
  std::fprintf(to,
               "usage: flashverify info\n"
               "       flashverify check [--cases N] [--seed S]\n"
               "       flashverify bench [--suite headline|full|psweep] [--iters N] [--csv FILE] [--graph] "
               "[--no-naive] [--only \"A|B$\"] [--check-indices] [--no-flush] [--flush-read]\n"
               "       flashverify soak [--seconds S] [--seed S] [--report FILE]\n"
               "       flashverify --help\n"
               "defaults: check --cases 40; bench --suite headline --iters 30; soak --seconds 600; --seed 0: FV_SEED,\n"
               "else a fresh one. Every option parses for every command; one a command does not list is ignored\n"
               "exit status: 0 passed; 1 a failed case, check, timing or capture; 2 bad usage; 77 no GPU: nothing\n"
               "measured (bench, soak), or only the CPU oracle's self-consistency checked (check)\n");
}

// ---------------------------------------------------------------------------------------------------
int cmd_info() {
  std::printf("%s\n", fv_build_info());
  const std::string why = fvt::gpu_unavailable_reason();
  if (!why.empty()) {
    std::printf("GPUs: none visible (%s)\n", why.c_str());
    return 0;
  }
  int n = 0;
  cudaGetDeviceCount(&n);
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, d);
    int optin = 0, clock = 0, mclock = 0;
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, d);
    cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, d);
    cudaDeviceGetAttribute(&mclock, cudaDevAttrMemoryClockRate, d);
    std::printf("GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB, %d KB shared memory per block, SM clock %d MHz, memory "
                "clock %d MHz\n",
                d, p.name, p.major, p.minor, p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, optin / 1024,
                clock / 1000, mclock / 1000);
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------------
CaseSpec random_check_case(std::mt19937_64& rng, int idx, uint64_t seed) {
  CaseSpec s;
  s.seed = seed + idx;
  if (idx % 2 == 0) {
    const int heads[] = {1, 8, 16, 64, 128};
    s.hq = heads[rng() % 5];
    s.hkv = 1;
    s.dqk = 576;
    s.dv = 512;
    if (rng() % 3 == 0) s.profile = FV_PROFILE_SMALL_SMEM;
  } else {
    const int dims[] = {64, 128, 256};
    const int groups[] = {1, 2, 4, 8, 16};
    s.hkv = 1 + static_cast<int>(rng() % 4);
    s.hq = s.hkv * groups[rng() % 5];
    s.dqk = s.dv = dims[rng() % 3];
  }
  const int prefixes[] = {0, 1, 17, 339, 799, 4096, 20000};
  const int drafts[] = {1, 2, 7, 8, 16, 63, 64};
  s.max_draft = drafts[rng() % 7];
  const int B = 1 + static_cast<int>(rng() % 3);
  for (int b = 0; b < B; ++b) {
    s.draft.push_back(1 + static_cast<int>(rng() % s.max_draft));
    s.prefix.push_back(prefixes[rng() % 7]);
  }
  s.draft[0] = s.max_draft;
  // keep one oracle run under ~1 GFLOP
  while (s.hq > s.hkv && double(s.max_draft) * B * s.hq * (20000.0 + s.max_draft) * (s.dqk + s.dv) * 2 > 1e9) {
    s.hq /= 2;
    if (s.hq % s.hkv) s.hq = s.hkv;
  }
  s.tree = static_cast<fvt::Tree>(rng() % 4);
  s.mask_kind = static_cast<int>(rng() % 3);
  if (s.tree == fvt::Tree::Chain && rng() % 3 == 0) s.mask_kind = FV_MASK_CAUSAL;  // (what a causal mask describes)
  s.dtype = rng() % 2 ? FV_DTYPE_BF16 : FV_DTYPE_FP16;
  if (rng() % 6 == 0) s = fvt::with_fp8(s, 0.5f + 0.25f * static_cast<float>(rng() % 4), 1.5f);  // an fp8 e4m3 cache
  if (rng() % 3 == 0) {
    s.addressing = FV_KV_PAGE_TABLE;
    s.page_size = 1 << (rng() % 8);
  }
  s.indices_i64 = rng() % 2;
  s.qo_i64 = rng() % 2;
  return s;
}

int cmd_check(const Options& o) {
  const uint64_t seed = o.seed ? o.seed : fvt::session_seed();
  std::printf("%s\nseed %llu, %d random problems\n", fv_build_info(), static_cast<unsigned long long>(seed), o.cases);
  const std::string why = fvt::gpu_unavailable_reason();
  if (!why.empty())
    std::printf("GPU part SKIPPED: %s. Only the CPU oracle runs (self-consistency: slot order, page size, mask "
                "form).\n", why.c_str());
  else
    std::printf("GPU: %s\n", fvt::gpu_name().c_str());
  std::mt19937_64 rng(seed);
  int failed = 0;
  double worst[2] = {0, 0};
  std::printf("%-4s %-96s %-12s %-12s %s\n", "case", "problem", "fast relL2", "naive relL2", "worst element (fast)");
  for (int idx = 0; idx < o.cases; ++idx) {
    const CaseSpec s = random_check_case(rng, idx, seed);
    const HostProblem hp = fvt::make_problem(s);
    fvt::Reference ref;
    if (fvt::run_oracle(hp, &ref) != FV_OK) {
      std::printf("%-4d oracle failed: %s\n", idx, fv_last_error());
      ++failed;
      continue;
    }
    if (!why.empty()) {
      // the oracle must not depend on where the prefix lives or how the tree is written down
      HostProblem other = fvt::relayout(hp, FV_KV_PAGE_TABLE, 16, true, seed + idx);
      other.spec.mask_kind = (hp.spec.mask_kind + 1) % 3;
      fvt::Reference r2;
      const bool ok = fvt::run_oracle(other, &r2) == FV_OK && r2.out == ref.out;
      std::printf("%-4d %-96s oracle self-consistency %s\n", idx, s.describe().c_str(), ok ? "ok" : "FAILED");
      failed += !ok;
      continue;
    }
    double rel[2] = {0, 0};
    std::string where;
    bool bad = false;
    for (int k = 0; k < 2; ++k) {
      const fvt::GpuRun r = fvt::run_gpu(hp, k == 0 ? FV_IMPL_FAST : FV_IMPL_NAIVE);
      if (r.status != FV_OK) {
        std::printf("%-4d %s: %s\n", idx, k == 0 ? "fast" : "naive", r.error.c_str());
        bad = true;
        continue;
      }
      const fvt::Comparison c = fvt::compare(hp, r.out, r.lse, ref);
      rel[k] = c.rel_l2;
      worst[k] = std::isnan(c.rel_l2) ? INFINITY : std::max(worst[k], c.rel_l2);
      if (k == 0) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "%s got %.5g want %.5g", c.where(hp).c_str(), c.worst_got, c.worst_ref);
        where = buf;
      }
      // (written so that a NaN error, e.g. an oracle row left unwritten, fails: NaN <= x is false)
      bad |= c.nan_count > 0 || !(c.rel_l2 <= 1e-2) || !(c.req_rel_l2 <= 1e-2) || c.lse_bad > 0 ||
             !(c.lse_worst_ratio <= 1.0);
    }
    failed += bad;
    std::printf("%-4d %-96s %-12.3e %-12.3e %s%s\n", idx, s.describe().c_str(), rel[0], rel[1], where.c_str(),
                bad ? "  FAIL" : "");
  }
  if (why.empty())
    std::printf("check: %d/%d passed; worst rel L2 fast %.3e, naive %.3e (bound 1e-2)\n", o.cases - failed, o.cases,
                worst[0], worst[1]);
  else
    std::printf("check: %d/%d oracle self-consistency cases passed; GPU part skipped (%s)\n", o.cases - failed,
                o.cases, why.c_str());
  // no GPU: the kernels were not checked, which is not a pass (77, as bench and soak without a GPU)
  return failed ? 1 : why.empty() ? 0 : 77;
}

// ---------------------------------------------------------------------------------------------------
struct BenchCase {
  std::string name;
  CaseSpec spec;
  std::string target;  // what issue 3 asks, for the table
};

CaseSpec uniform(bool mla, int hq, int hkv, int d, int n, int p, int b, fvt::Tree tree = fvt::Tree::Random) {
  CaseSpec s = fvt::uniform_spec(mla, hq, hkv, d, n, p, b);
  s.tree = tree;
  s.seed = 42;
  s.want_lse = false;
  return s;
}

// the P sweep's target; its rows form series that differ only in their " p<N>k" part
constexpr const char* kFlatTarget = "flat within 15%";
std::string sweep_series(const std::string& name) { return name.substr(0, name.rfind(" p")); }

std::vector<BenchCase> bench_cases(const std::string& suite) {
  std::vector<BenchCase> v;
  auto add = [&](const std::string& name, CaseSpec s, const std::string& target = "") { v.push_back({name, s, target}); };
  // fp8 e4m3 KV caches, k_scale 0.5 and v_scale 1.5 in every [fp8 kv] row (GB/s counts the bf16-equivalent KV: the
  // bytes moved are half)
  auto fp8 = [](CaseSpec s) { return fvt::with_fp8(s, 0.5f, 1.5f); };
  if (suite == "headline" || suite == "full") {
    add("mla h16 n8 p32k b1", uniform(true, 16, 1, 0, 8, 32768, 1), "<= 40 us");
    add("mla h16 n64 p32k b16", uniform(true, 16, 1, 0, 64, 32768, 16), ">= 350 TFLOP/s");
    add("mla h128 n64 p32k b16", uniform(true, 128, 1, 0, 64, 32768, 16), ">= 350 TFLOP/s");
    add("gqa32/8 d128 n8 p32k b16", uniform(false, 32, 8, 128, 8, 32768, 16), ">= 3.4 TB/s");
    add("gqa8/1 d128 n8 p32k b1", uniform(false, 8, 1, 128, 8, 32768, 1), "<= 15 us");
    add("mla h16 n64 p32k b4 chain", uniform(true, 16, 1, 0, 64, 32768, 4, fvt::Tree::Chain), "tree within 5%");
    add("mla h16 n64 p32k b4 tree", uniform(true, 16, 1, 0, 64, 32768, 4, fvt::Tree::Random), "tree within 5%");
    CaseSpec small = uniform(true, 16, 1, 0, 8, 32768, 1);
    small.profile = FV_PROFILE_SMALL_SMEM;
    add("mla h16 n8 p32k b1 [sm120 cfg]", small, "sm_120 config");
    small = uniform(true, 16, 1, 0, 64, 32768, 16);
    small.profile = FV_PROFILE_SMALL_SMEM;
    add("mla h16 n64 p32k b16 [sm120 cfg]", small, "sm_120 config");
    add("mla h16 n8 p32k b1 [fp8 kv]", fp8(uniform(true, 16, 1, 0, 8, 32768, 1)), "fp8: fewer bytes");
    add("mla h16 n64 p32k b16 [fp8 kv]", fp8(uniform(true, 16, 1, 0, 64, 32768, 16)), "fp8: fewer bytes");
    add("gqa32/8 d128 n8 p32k b16 [fp8 kv]", fp8(uniform(false, 32, 8, 128, 8, 32768, 16)), "fp8: fewer bytes");
    add("gqa8/1 d128 n8 p32k b1 [fp8 kv]", fp8(uniform(false, 8, 1, 128, 8, 32768, 1)), "fp8: fewer bytes");
  }
  if (suite == "full") {
    // the modifiers' instantiation on bf16 caches (k/v scales force it): what the fp8 rows pay for it
    auto scaled = [](CaseSpec s) {
      s.k_scale = 0.5f;
      s.v_scale = 1.5f;
      return s;
    };
    add("mla h16 n8 p32k b1 [mods]", scaled(uniform(true, 16, 1, 0, 8, 32768, 1)));
    add("gqa32/8 d128 n8 p32k b16 [mods]", scaled(uniform(false, 32, 8, 128, 8, 32768, 16)));
    // an fp16 model: its fp8 tiles widen with the hardware e4m3x2 -> f16x2 conversion (bf16 models: bit moves)
    CaseSpec f16 = uniform(false, 32, 8, 128, 8, 32768, 16);
    f16.dtype = FV_DTYPE_FP16;
    add("gqa32/8 d128 n8 p32k b16 fp16", f16);
    add("gqa32/8 d128 n8 p32k b16 fp16 [fp8 kv]", fp8(f16));
    // fp8 pools on the 32-row tile (fp8 keys multiplied from registers) at batch 1, where a CTA takes a few steps
    CaseSpec b1 = uniform(false, 32, 8, 128, 8, 32768, 1);
    add("gqa32/8 d128 n8 p32k b1 [fp8 kv]", fp8(b1));
    b1.dtype = FV_DTYPE_FP16;
    add("gqa32/8 d128 n8 p32k b1 fp16 [fp8 kv]", fp8(b1));
    add("gqa4/1 d128 n8 p32k b1", uniform(false, 4, 1, 128, 8, 32768, 1));
    add("gqa4/1 d128 n8 p32k b1 [fp8 kv]", fp8(uniform(false, 4, 1, 128, 8, 32768, 1)));
    // the batches around the planner's switch from 64-key to wide steps (plan.cpp: kFp8NarrowMaxBatch)
    for (int b : {2, 4, 8}) {
      CaseSpec g = uniform(false, 32, 8, 128, 8, 32768, b);
      add("gqa32/8 d128 n8 p32k b" + std::to_string(b), g);  // (the 16-bit peer)
      add("gqa32/8 d128 n8 p32k b" + std::to_string(b) + " [fp8 kv]", fp8(g));
      g.dtype = FV_DTYPE_FP16;
      add("gqa32/8 d128 n8 p32k b" + std::to_string(b) + " fp16 [fp8 kv]", fp8(g));
    }
    // fp8 MLA from batch 1 to 16 at N=8 and N=64 (the Hopper kernel's fp8 path: bench/NOTES.md v20-v21), with 16-bit
    // peers (mla h16 n8 p32k b16 and mla h16 n64 p32k b1 are below)
    for (int n : {8, 64})
      for (int b : {1, 2, 4, 16}) {
        if ((n == 8 && b == 1) || (n == 64 && (b == 2 || b == 16))) continue;  // (b1 N8, B=16 N64: headline rows)
        const CaseSpec m = uniform(true, 16, 1, 0, n, 32768, b);
        const std::string name = "mla h16 n" + std::to_string(n) + " p32k b" + std::to_string(b);
        if (b == 2 || b == 4) add(name, m);
        add(name + " [fp8 kv]", fp8(m));
      }
    // fp8 MLA where the 16-bit call is memory-bound: 32 and 64 rows a request (Hq=16 x N=2 / 4, short EAGLE chains)
    // read 604 MB of 16-bit KV at B=16 (142 us at 4.24 TB/s) for 37-73 GFLOP, so half the bytes can show in the time
    // here, unlike the N=8 / 64 rows above, where the products bind (bench/NOTES.md v63)
    for (int n : {2, 4}) {
      const CaseSpec m = uniform(true, 16, 1, 0, n, 32768, 16);
      const std::string name = "mla h16 n" + std::to_string(n) + " p32k b16";
      add(name, m);
      add(name + " [fp8 kv]", fp8(m));
    }
    // fp8 MLA with an fp16 model (e4m3 -> f16 is one instruction a pair, bf16's four: bench/NOTES.md v21 plan item 2),
    // with 16-bit peers
    for (int n : {8, 64}) {
      CaseSpec m = uniform(true, 16, 1, 0, n, 32768, n == 8 ? 1 : 16);
      m.dtype = FV_DTYPE_FP16;
      const std::string name = std::string(n == 8 ? "mla h16 n8 p32k b1" : "mla h16 n64 p32k b16") + " fp16";
      add(name, m);
      add(name + " [fp8 kv]", fp8(m));
    }
    add("mla h16 n8 p4k b1", uniform(true, 16, 1, 0, 8, 4096, 1));
    add("mla h16 n8 p32k b16", uniform(true, 16, 1, 0, 8, 32768, 16));
    add("mla h16 n64 p32k b1", uniform(true, 16, 1, 0, 64, 32768, 1));
    add("mla h128 n8 p32k b16", uniform(true, 128, 1, 0, 8, 32768, 16));
    add("mla h128 n64 p4k b1", uniform(true, 128, 1, 0, 64, 4096, 1));
    add("mla h16 n1024 p32k b1", uniform(true, 16, 1, 0, 1024, 32768, 1));
    add("gqa32/8 d128 n8 p32k b1", uniform(false, 32, 8, 128, 8, 32768, 1));
    add("gqa32/8 d128 n32 p32k b16", uniform(false, 32, 8, 128, 32, 32768, 16));
    add("gqa8/1 d128 n8 p32k b16", uniform(false, 8, 1, 128, 8, 32768, 16));
    // the batch-1 headline rows with the prefix's slots in order (the pools' rows read sequentially) instead of
    // shuffled: how much of those rows' time the random 256-byte (GQA) / 1152-byte (MLA) rows cost
    for (bool mla : {false, true}) {
      CaseSpec o = mla ? uniform(true, 16, 1, 0, 8, 32768, 1) : uniform(false, 8, 1, 128, 8, 32768, 1);
      o.shuffle_slots = false;
      add(mla ? "mla h16 n8 p32k b1 ordered" : "gqa8/1 d128 n8 p32k b1 ordered", o);
    }
    // fp8 pools with 64 rows a KV head (the Hopper kernel widens them in shared memory on sm_90: bench/NOTES.md v30)
    for (int b : {4, 8, 16})
      add("gqa8/1 d128 n8 p32k b" + std::to_string(b) + " [fp8 kv]",
          fp8(uniform(false, 8, 1, 128, 8, 32768, b)));
    // ... with an fp16 model (e4m3 -> f16 is one conversion a pair, bf16's four: what the widening costs a bf16 model)
    for (int d : {128, 256}) {
      CaseSpec h = uniform(false, 8, 1, d, 8, 32768, 16);
      h.dtype = FV_DTYPE_FP16;
      const std::string name = "gqa8/1 d" + std::to_string(d) + " n8 p32k b16 fp16";
      add(name, h);
      add(name + " [fp8 kv]", fp8(h));
    }
    // ... where the 2-stage kernel's RING kernels (FLASHVERIFY_GQA8_RING=1) win or lose: an fp16 model at smaller
    // batches, and short prefixes at batch 16 (few steps a partition)
    for (int b : {4, 8}) {
      CaseSpec h = uniform(false, 8, 1, 128, 8, 32768, b);
      h.dtype = FV_DTYPE_FP16;
      add("gqa8/1 d128 n8 p32k b" + std::to_string(b) + " fp16 [fp8 kv]", fp8(h));
    }
    add("gqa8/1 d128 n8 p4k b16", uniform(false, 8, 1, 128, 8, 4096, 16));
    add("gqa8/1 d128 n8 p4k b16 [fp8 kv]", fp8(uniform(false, 8, 1, 128, 8, 4096, 16)));
    // 64 rows a KV head at small batches: where the planner's two 32-row tiles (batch 1) stop paying
    for (int b : {2, 4, 8}) add("gqa8/1 d128 n8 p32k b" + std::to_string(b), uniform(false, 8, 1, 128, 8, 32768, b));
    for (int b : {1, 2}) add("gqa16/2 d128 n8 p32k b" + std::to_string(b), uniform(false, 16, 2, 128, 8, 32768, b));
    add("gqa8/1 d128 n32 p32k b16", uniform(false, 8, 1, 128, 32, 32768, 16));
    add("gqa32/8 d128 n64 p32k b4 chain", uniform(false, 32, 8, 128, 64, 32768, 4, fvt::Tree::Chain));
    add("gqa32/8 d128 n64 p32k b4 tree", uniform(false, 32, 8, 128, 64, 32768, 4, fvt::Tree::Random));
    add("gqa32/8 d128 n1024 p32k b1", uniform(false, 32, 8, 128, 1024, 32768, 1));
    add("gqa16/2 d64 n8 p32k b16", uniform(false, 16, 2, 64, 8, 32768, 16));
    add("gqa16/2 d64 n8 p32k b1", uniform(false, 16, 2, 64, 8, 32768, 1));
    add("gqa16/4 d64 n8 p32k b16", uniform(false, 16, 4, 64, 8, 32768, 16));  // (32 rows a KV head: bench/compare's)
    add("gqa16/2 d256 n8 p32k b16", uniform(false, 16, 2, 256, 8, 32768, 16));
    add("gqa8/1 d256 n8 p32k b16", uniform(false, 8, 1, 256, 8, 32768, 16));
    add("gqa8/1 d256 n8 p32k b1", uniform(false, 8, 1, 256, 8, 32768, 1));
    // d256 between batch 1 and 16, a score modifier's instantiation (k/v scales force it) and fp8 pools (v29: 16-bit
    // pools take the Hopper kernel, modifiers its 64-key mma.sync tile, fp8 pools the 32-key tile)
    add("gqa8/1 d256 n8 p32k b4", uniform(false, 8, 1, 256, 8, 32768, 4));
    CaseSpec d256s = uniform(false, 8, 1, 256, 8, 32768, 16);
    d256s.k_scale = 0.5f;
    d256s.v_scale = 1.5f;
    add("gqa8/1 d256 n8 p32k b16 [mods]", d256s);
    add("gqa8/1 d256 n8 p32k b16 [fp8 kv]", fp8(uniform(false, 8, 1, 256, 8, 32768, 16)));
    add("gqa8/1 d256 n8 p32k b1 [fp8 kv]", fp8(uniform(false, 8, 1, 256, 8, 32768, 1)));
    add("gqa8/1 d256 n8 p32k b4 [fp8 kv]", fp8(uniform(false, 8, 1, 256, 8, 32768, 4)));
    add("gqa8/1 d256 n8 p32k b8 [fp8 kv]", fp8(uniform(false, 8, 1, 256, 8, 32768, 8)));
    // (S8 at d256 from 4 (request, KV head) pairs: src/cuda/dispatch.cu; these rows place that threshold)
    add("gqa8/1 d256 n8 p32k b2 [fp8 kv]", fp8(uniform(false, 8, 1, 256, 8, 32768, 2)));
    add("gqa16/2 d256 n8 p32k b1 [fp8 kv]", fp8(uniform(false, 16, 2, 256, 8, 32768, 1)));
    add("gqa32/8 d256 n8 p32k b1 [fp8 kv]", fp8(uniform(false, 32, 8, 256, 8, 32768, 1)));
  }
  if (suite == "psweep" || suite == "full") {
    // three shapes over P, at B = 4 and at B = 16, the batch of the throughput targets (B = 4 puts fixed costs -
    // launch, the last wave, the combine - on the 16K rows: both are reported)
    struct Shape {
      const char* name;
      bool mla;
      int hq, hkv, d, n;
    };
    for (int b : {4, 16})
      for (const Shape& sh : {Shape{"mla h16 n8", true, 16, 1, 0, 8}, Shape{"mla h16 n64", true, 16, 1, 0, 64},
                              Shape{"gqa32/8 n8", false, 32, 8, 128, 8}})
        for (int p : {16384, 32768, 65536, 131072, 262144})
          add(std::string(sh.name) + " b" + std::to_string(b) + " p" + std::to_string(p / 1024) + "k",
              uniform(sh.mla, sh.hq, sh.hkv, sh.d, sh.n, p, b), kFlatTarget);
  }
  return v;
}

// The median of `t` (sorted here); an even count takes the mean of its two middle values
double median_of(std::vector<float>& t) {
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  return n % 2 ? t[n / 2] : 0.5 * (double(t[n / 2 - 1]) + double(t[n / 2]));
}

double measure_copy_gbps() {
  const size_t bytes = size_t(1) << 30;
  void *a = nullptr, *b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0;
  cudaMemset(a, 1, bytes);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> t;
  for (int i = 0; i < 12; ++i) {
    cudaEventRecord(e0);
    cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 2) t.push_back(ms);
  }
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  const double ms = median_of(t);
  return ms > 0 ? 2.0 * bytes / (ms * 1e-3) / 1e9 : 0;
}

// The bench's L2 flush before each timed run: `bytes` (0: none) of `buf` memset (default) or read (--flush-read:
// l2flush.cu, whose sink is the word after the buffer)
struct L2Flush {
  void* buf = nullptr;
  size_t bytes = 0;
  bool read = false;
  // false when the flush could not be enqueued (the timing that follows would be of warm caches: a failure)
  bool run(int i, cudaStream_t s) const {
    // no flush (--no-flush): a 200 us spin instead, so that the timed interval does not hold the host's enqueue
    // (with an idle GPU, e0 fired at once and the interval included validation, planning and the launches; until v54)
    if (bytes == 0) {
      gpu_spin(200000, s);
    } else if (read) {
      l2_read_flush(buf, bytes, reinterpret_cast<unsigned*>(static_cast<char*>(buf) + bytes), s);
    } else if (cudaMemsetAsync(buf, i & 0xff, bytes, s) != cudaSuccess) {
      return false;
    }
    return cudaPeekAtLastError() == cudaSuccess;
  }
};

// Median time of `launch` in microseconds, `flush` run before each timed launch; -1 when a launch or the timing
// failed (a kernel fault makes every later event fail: a median of zeros would read as infinite GB/s)
double time_median_us(const std::function<bool(cudaStream_t)>& launch, int iters, const L2Flush& flush,
                      cudaStream_t s) {
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  bool ok = true;
  for (int i = 0; i < 3; ++i) ok &= launch(s);  // warm-up: module load, attribute setup
  std::vector<float> t;
  for (int i = 0; ok && i < iters; ++i) {
    ok &= flush.run(i, s);
    cudaEventRecord(e0, s);
    ok &= launch(s);
    cudaEventRecord(e1, s);
    float ms = 0;
    ok &= cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess;
    t.push_back(ms * 1000.f);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  if (!ok || t.empty()) return -1;
  return median_of(t);
}

// Relative L2 error of outputs against a reference, accumulated element by element: infinite when either side has
// a NaN or the reference is all zeros (the bench's checks: against the naive kernel, or the oracle's head slices)
struct RelL2 {
  double num = 0, den = 0;
  bool bad = false;
  void add(double got, double want) {
    bad |= std::isnan(got) || std::isnan(want);
    num += (got - want) * (got - want);
    den += want * want;
  }
  double value() const { return bad || !(den > 0) ? INFINITY : std::sqrt(num / den); }
};

// The bench's check of a problem too large for the naive kernel: the timed run's own output (`got`, [T, Hq, Dv])
// against the float64 oracle on request 0's rows (the full prefix) for the leading q heads the oracle affords (~2e10
// flops; whole KV-head groups) and the last group, and, in a batch, on the last request's rows for its last head group
// (an indexing fault past request 0 shows there), so that the configuration checked is the one timed. Returns the
// relative L2 error over those rows (infinite on a NaN or an oracle error) and sets `label`.
double check_request_heads(const HostProblem& hp, const std::vector<float>& got, std::string* label) {
  const CaseSpec& sp = hp.spec;
  const int unit = sp.hkv == 1 ? 1 : sp.hq / sp.hkv;
  const int last = static_cast<int>(hp.qo_indptr.size()) - 2;  // the last request
  const int64_t dv = sp.dv;
  auto per_head = [&](int r) {
    const double keys = double(hp.kv_indptr[r + 1] - hp.kv_indptr[r]) + double(hp.qo_indptr[r + 1] - hp.qo_indptr[r]);
    return 2.0 * double(hp.qo_indptr[r + 1] - hp.qo_indptr[r]) * keys * (sp.dqk + sp.dv);
  };
  int nh = unit;
  while (nh + unit <= sp.hq && (nh + unit) * per_head(0) <= 2e10) nh += unit;
  struct Slice {
    int request, h0, n;
  };
  std::vector<Slice> slices{{0, 0, nh}};
  if (nh < sp.hq) slices.push_back({0, sp.hq - unit, unit});
  if (last > 0) slices.push_back({last, sp.hq - unit, unit});
  RelL2 err;
  int heads = 0;
  for (const Slice& sl : slices) {
    std::vector<double> ref;
    if (fvt::run_oracle_heads(hp, sl.h0, sl.n, &ref, sl.request) != FV_OK) {
      std::printf("oracle on request %d, heads %d..%d: %s\n", sl.request, sl.h0, sl.h0 + sl.n - 1, fv_last_error());
      err.bad = true;
      break;
    }
    if (sl.request == 0) heads += sl.n;
    for (int64_t t = hp.qo_indptr[sl.request]; t < hp.qo_indptr[sl.request + 1]; ++t)
      for (int h = 0; h < sl.n; ++h)
        for (int64_t d = 0; d < dv; ++d)
          err.add(got[(t * sp.hq + sl.h0 + h) * dv + d], ref[(t * sl.n + h) * dv + d]);
  }
  const double rel = err.value();
  *label = std::string(rel <= 1e-2 ? "ok" : "FAIL") + " (request 0, " + std::to_string(heads) + " of " +
           std::to_string(sp.hq) + " heads" + (last > 0 ? "; request " + std::to_string(last) + ", " +
           std::to_string(unit) + (unit == 1 ? " head" : " heads") : std::string()) + ") vs oracle";
  return rel;
}

// --only: '|'-separated alternatives, each a substring of the case name; a trailing '$' anchors one at the end
// (plain text, not a regular expression); empty selects every case
std::vector<std::string> only_alternatives(const std::string& only) {
  std::vector<std::string> alternatives;
  for (size_t from = 0;;) {
    const size_t bar = only.find('|', from);
    alternatives.push_back(only.substr(from, bar == std::string::npos ? std::string::npos : bar - from));
    if (bar == std::string::npos) return alternatives;
    from = bar + 1;
  }
}

// one alternative: an empty one (or a bare '$') selects nothing
bool alternative_matches(const std::string& name, std::string needle) {
  const bool anchored = !needle.empty() && needle.back() == '$';
  if (anchored) needle.pop_back();
  if (needle.empty()) return false;
  const size_t at = name.rfind(needle);
  return at != std::string::npos && (!anchored || at + needle.size() == name.size());
}

bool only_matches(const std::string& name, const std::string& only) {
  if (only.empty()) return true;
  for (const std::string& alt : only_alternatives(only))
    if (alternative_matches(name, alt)) return true;
  return false;
}

int cmd_bench(const Options& o) {
  // a pattern that selects nothing is a mistake in the command (a regex group such as "p(16|32)k" is two plain
  // alternatives here), not an empty table to pass on: say so before anything else, with or without a GPU. So is
  // one alternative that selects nothing (a typo in one row of an A/B query would drop that row silently)
  const std::vector<BenchCase> cases = bench_cases(o.suite);
  // (an empty --only selects every case; an empty alternative inside one, "a||b", is passed over as before)
  for (const std::string& alt : only_alternatives(o.only)) {
    if (alt.empty()) continue;
    if (std::none_of(cases.begin(), cases.end(), [&](const BenchCase& bc) { return alternative_matches(bc.name, alt); })) {
      std::fprintf(stderr, "bench: --only \"%s\": \"%s\" selects none of the %zu cases of --suite %s (alternatives "
                   "are '|'-separated plain substrings of a case name, '$' anchors one at the end)\n",
                   o.only.c_str(), alt.c_str(), cases.size(), o.suite.c_str());
      return 2;
    }
  }
  const std::string why = fvt::gpu_unavailable_reason();
  if (!why.empty()) {
    std::printf("bench SKIPPED: %s\n", why.c_str());
    return 77;  // (a skip, not a pass: nothing was measured)
  }
  int clock = 0, mclock = 0, sms = 0, major = 0, minor = 0;
  cudaDeviceGetAttribute(&clock, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&mclock, cudaDevAttrMemoryClockRate, 0);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  const double mma_tflops = major == 9 && minor == 0 ? kMmaSyncTflopsH200 * (sms / 132.0) * (clock / 1.98e6) : 0;
  auto pct_mma = [&](double tflops) { return mma_tflops > 0 ? 100 * tflops / mma_tflops : 0.0; };
  const double copy_gbps = measure_copy_gbps();
  std::printf("%s\nGPU: %s, SM clock %d MHz, memory clock %d MHz\n", fv_build_info(), fvt::gpu_name().c_str(),
              clock / 1000, mclock / 1000);
  if (mma_tflops > 0)
    std::printf("ceilings: copy %.0f GB/s (measured now, read + write), mma.sync bf16 %.0f TFLOP/s (BASELINE.md's H200 "
                "figure, %.0f, scaled to %d SMs at %d MHz)\n", copy_gbps, mma_tflops, kMmaSyncTflopsH200, sms, clock / 1000);
  else
    std::printf("ceilings: copy %.0f GB/s (measured now, read + write); mma.sync: none known for sm_%d%d (%% mma.sync "
                "shows 0)\n", copy_gbps, major, minor);
  std::printf("GB/s: prefix KV read, counted at 2 bytes an element (fp8 pools: bf16-equivalent); %% copy: the bytes "
              "actually read (fp8: half); check: the timed kernel's output against the naive kernel, or where that "
              "costs too much against the oracle on request 0 for the q heads it affords and on the last request's last head group\n");
  // FV_BENCH_NO_FLUSH=1 as --no-flush (for scripts/device-check's ab-env, which varies the environment)
  const char* no_flush_env = std::getenv("FV_BENCH_NO_FLUSH");
  const bool flush_l2 = o.flush && !(no_flush_env != nullptr && std::strcmp(no_flush_env, "1") == 0);
  const char* flush_env = std::getenv("FV_BENCH_FLUSH");
  L2Flush flush;
  flush.read = o.flush_read || (flush_env != nullptr && std::strcmp(flush_env, "read") == 0);
  std::printf("timing: median of %d runs, CUDA events, %s%s\n", o.iters,
              !flush_l2 ? "L2 NOT flushed (--no-flush: code and data warm)"
              : flush.read ? "L2 flushed before each run by reading 512 MB (--flush-read: clean lines)"
                           : "L2 flushed before each run (a 512 MB memset)",
              o.graph ? "; also replayed from a CUDA graph" : "");
  flush.bytes = flush_l2 ? size_t(512) << 20 : 0;
  if (flush.bytes > 0) {
    // (+ the read flush's sink word; the read flush's buffer is zeroed once)
    if (cudaMalloc(&flush.buf, flush.bytes + 256) != cudaSuccess ||
        (flush.read && cudaMemset(flush.buf, 0, flush.bytes + 256) != cudaSuccess)) {
      std::printf("bench: FAILED: cannot allocate the L2 flush's %zu MB: %s\n", flush.bytes >> 20,
                  cudaGetErrorString(cudaGetLastError()));
      return 1;
    }
  }
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);

  std::FILE* csv = o.csv.empty() ? nullptr : std::fopen(o.csv.c_str(), "w");
  if (!o.csv.empty() && csv == nullptr) {  // before any case runs: a table asked for must not go missing silently
    std::fprintf(stderr, "bench: cannot write --csv %s: %s\n", o.csv.c_str(), std::strerror(errno));
    return 1;
  }
  if (csv)
    std::fprintf(csv, "case,config,us,graph_us,gb_s,tflop_s,pct_copy,pct_mma,naive_us,speedup_vs_naive,check,check_rel_l2,target,check_indices_us,gpu,commit\n");
  // (each row says where it came from: the GPU, and the commit FV_COMMIT names, as scripts/device-check passes it)
  const std::string csv_gpu = fvt::gpu_name();
  const char* commit_env = std::getenv("FV_COMMIT");
  const std::string csv_commit = commit_env != nullptr && *commit_env ? commit_env : "unknown";
  struct Row {
    std::string name, config, check, target;
    double us, graph_us, gbs, tflops, naive_us, rel, check_mode_us;
    double pct_copy = 0;
  };
  std::vector<Row> rows;
  int done = 0, failed = 0;
  std::vector<std::string> skipped;  // selected, not measured (inputs too large for the host): named at the end
  for (const BenchCase& bc : cases) {
    ++done;
    if (!only_matches(bc.name, o.only)) continue;
    std::fprintf(stderr, "[%d/%zu] %s: building inputs...\n", done, cases.size(), bc.name.c_str());
    // the largest cases (the P sweep's B = 16 GQA row at 256K: 17 GB of pools) may not fit the host's memory
    HostProblem hp;
    try {
      hp = fvt::make_problem(bc.spec);
    } catch (const std::bad_alloc&) {
      std::printf("%s: skipped: its inputs do not fit in host memory\n", bc.name.c_str());
      skipped.push_back(bc.name);
      continue;
    }
    fvt::DeviceProblem fast(hp, FV_IMPL_FAST);
    if (!fast.ok()) {
      std::printf("%s: FAILED: %s\n", bc.name.c_str(), fast.error().c_str());
      ++failed;
      continue;
    }
    // (the uploads and the poison memsets ran on the legacy stream, which `s`, non-blocking, does not wait for)
    cudaDeviceSynchronize();
    // check first, on the output of the run that is timed below: against the naive kernel on these inputs when
    // that is affordable, else against the oracle on request 0 (the full prefix) for as many q heads as it affords
    Row r{bc.name, "", "", bc.target, 0, 0, 0, 0, 0, 0, 0};
    const double naive_work = double(hp.total_q) * bc.spec.hq * (bc.spec.prefix[0] + bc.spec.max_draft);
    const bool naive_ok = naive_work <= 5e7;
    fv_status st = fast.run(s);
    if (st == FV_OK && cudaStreamSynchronize(s) != cudaSuccess) st = FV_ERR_CUDA;
    if (st != FV_OK) {
      std::printf("%s: FAILED: fast: %s (%s)\n", bc.name.c_str(), fv_last_error(), cudaGetErrorString(cudaGetLastError()));
      ++failed;
      continue;
    }
    std::vector<float> out_fast, lse_dummy, lse_fast;
    std::vector<uint8_t> raw_fast;
    if (!fast.download(&out_fast, &lse_fast, &raw_fast)) {
      std::printf("%s: FAILED: downloading the fast kernel's output\n", bc.name.c_str());
      ++failed;
      continue;
    }
    std::unique_ptr<fvt::DeviceProblem> naive;
    if (naive_ok) {
      naive.reset(new fvt::DeviceProblem(hp, FV_IMPL_NAIVE));
      std::vector<float> out_naive;
      bool naive_ran = naive->ok();
      if (naive_ran) {
        cudaDeviceSynchronize();  // (its uploads and poison, as for the fast problem above)
        naive_ran = naive->run(s) == FV_OK && cudaStreamSynchronize(s) == cudaSuccess &&
                    naive->download(&out_naive, &lse_dummy, nullptr) && out_naive.size() == out_fast.size();
      }
      if (!naive_ran) {
        std::printf("%s: FAILED: the naive kernel: %s %s\n", bc.name.c_str(), naive->error().c_str(), fv_last_error());
        ++failed;
        continue;
      }
      RelL2 err;
      for (size_t e = 0; e < out_fast.size(); ++e) err.add(out_fast[e], out_naive[e]);
      r.rel = err.value();
      r.check = r.rel <= 1e-2 ? "ok vs naive" : "FAIL vs naive";
    } else {
      r.rel = check_request_heads(hp, out_fast, &r.check);
    }
    bool case_failed = !(r.rel <= 1e-2);
    {
      fv_problem pb = fast.args().problem;
      size_t ws = 0;
      fv_workspace_size(&pb, &ws);
      char cfg[64];
      std::snprintf(cfg, sizeof cfg, "%s", bc.spec.mla() ? (bc.spec.profile == FV_PROFILE_SMALL_SMEM ? "mla-small" : "mla-auto")
                                                       : ("gqa-d" + std::to_string(bc.spec.dqk)).c_str());
      r.config = cfg;
    }
    r.us = time_median_us([&](cudaStream_t st2) { return fast.run(st2) == FV_OK; }, o.iters, flush, s);
    if (!(r.us > 0)) {
      std::printf("%s: FAILED: timing the fast kernel: %s / %s\n", bc.name.c_str(), fv_last_error(),
                  cudaGetErrorString(cudaGetLastError()));
      ++failed;
      continue;
    }
    failed += case_failed;  // (one count a case: a failed check is still timed and shown)
    auto fail_case = [&](const char* what) {  // a failure after the first timing: counted once, the row still shown
      std::printf("%s: FAILED: %s: %s / %s\n", bc.name.c_str(), what, fv_last_error(),
                  cudaGetErrorString(cudaGetLastError()));
      failed += !case_failed;
      case_failed = true;
    };
    // The timed paths other than the checked call (the graph replays, the checked-indices calls) are checked too:
    // outputs poisoned, one more call, its output and LSE bit-identical to the first call's (the kernels are
    // deterministic). Empty when they are, else what differed.
    auto same_as_first = [&](const std::function<bool(cudaStream_t)>& launch) -> std::string {
      fast.poison();
      if (cudaDeviceSynchronize() != cudaSuccess || !launch(s) || cudaStreamSynchronize(s) != cudaSuccess)
        return "the call failed";
      std::vector<float> out2, lse2;
      std::vector<uint8_t> raw2;
      if (!fast.download(&out2, &lse2, &raw2)) return "downloading its output failed";
      if (raw2 != raw_fast) {
        RelL2 d;
        for (size_t e = 0; e < out2.size() && e < out_fast.size(); ++e) d.add(out2[e], out_fast[e]);
        return "its output differs from the first call's (relative L2 " + std::to_string(d.value()) + ")";
      }
      if (lse2.size() != lse_fast.size() ||
          (!lse2.empty() && std::memcmp(lse2.data(), lse_fast.data(), lse2.size() * sizeof(float)) != 0))
        return "its LSE differs from the first call's";
      return "";
    };
    if (o.graph) {
      cudaGraph_t g = nullptr;
      cudaGraphExec_t ge = nullptr;
      bool captured = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess;
      const fv_status cst = captured ? fast.run(s) : FV_ERR_CUDA;
      captured = cudaStreamEndCapture(s, &g) == cudaSuccess && captured && cst == FV_OK &&
                 cudaGraphInstantiate(&ge, g, 0) == cudaSuccess;
      r.graph_us = captured ? time_median_us([&](cudaStream_t st2) { return cudaGraphLaunch(ge, st2) == cudaSuccess; },
                                             o.iters, flush, s)
                            : -1;
      if (!(r.graph_us > 0)) {
        fail_case("the CUDA-graph replay");
        r.graph_us = 0;
      } else {
        const std::string diff = same_as_first([&](cudaStream_t st2) { return cudaGraphLaunch(ge, st2) == cudaSuccess; });
        if (!diff.empty()) fail_case(("the CUDA-graph replay: " + diff).c_str());
      }
      if (ge) cudaGraphExecDestroy(ge);
      if (g) cudaGraphDestroy(g);
    }
    if (o.check_indices) {
      fv_args checked = fast.args();
      checked.problem.flags |= FV_FLAG_CHECK_INDICES;
      r.check_mode_us = time_median_us(
          [&](cudaStream_t st2) { return fv_run(&checked, fast.workspace(), fast.workspace_bytes(), st2) == FV_OK; },
          o.iters, flush, s);
      if (r.check_mode_us > 0) {
        std::printf("check-indices: %s: %.1f us with FV_FLAG_CHECK_INDICES vs %.1f us without (+%.1f us)\n",
                    bc.name.c_str(), r.check_mode_us, r.us, r.check_mode_us - r.us);
        const std::string diff = same_as_first([&](cudaStream_t st2) {
          return fv_run(&checked, fast.workspace(), fast.workspace_bytes(), st2) == FV_OK;
        });
        if (!diff.empty()) fail_case(("the call with FV_FLAG_CHECK_INDICES: " + diff).c_str());
      } else {
        fail_case("timing with FV_FLAG_CHECK_INDICES");
      }
    }
    if (naive && o.naive) {
      r.naive_us = time_median_us([&](cudaStream_t st2) { return naive->run(st2) == FV_OK; },
                                  std::max(3, o.iters / 5), flush, s);
      if (!(r.naive_us > 0)) {
        fail_case("timing the naive kernel");
        r.naive_us = 0;
      }
    }
    r.gbs = hp.kv_bytes / (r.us * 1e-6) / 1e9;
    // (GB/s is of bf16-equivalent KV; % copy of the bytes read, half of those for an fp8 pool)
    r.pct_copy = 100 * r.gbs * (bc.spec.kv_fp8 ? 0.5 : 1.0) / copy_gbps;
    r.tflops = hp.flops / (r.us * 1e-6) / 1e12;
    rows.push_back(r);
    std::fprintf(stderr, "[%d/%zu] %s: %.1f us, %.0f GB/s, %.1f TFLOP/s (%s)\n", done, cases.size(), bc.name.c_str(),
                 r.us, r.gbs, r.tflops, r.check.c_str());
    if (csv)
      std::fprintf(csv, "\"%s\",%s,%.2f,%.2f,%.1f,%.2f,%.1f,%.1f,%.2f,%.2f,\"%s\",%.3e,\"%s\",%.2f,\"%s\",%s\n", r.name.c_str(),
                   r.config.c_str(), r.us, r.graph_us, r.gbs, r.tflops, r.pct_copy,
                   pct_mma(r.tflops), r.naive_us, r.naive_us > 0 ? r.naive_us / r.us : 0,
                   r.check.c_str(), r.rel, r.target.c_str(), r.check_mode_us, csv_gpu.c_str(), csv_commit.c_str());
  }
  if (csv) std::fclose(csv);
  std::printf("\n| case | config | µs | graph µs | GB/s | TFLOP/s | %% copy | %% mma.sync | naive µs | speedup | check | target |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows)
    std::printf("| %s | %s | %.1f | %s | %.0f | %.1f | %.0f | %.0f | %s | %s | %s (%.1e) | %s |\n", r.name.c_str(),
                r.config.c_str(), r.us, r.graph_us > 0 ? std::to_string(r.graph_us).substr(0, 6).c_str() : "–", r.gbs,
                r.tflops, r.pct_copy, pct_mma(r.tflops),
                r.naive_us > 0 ? std::to_string(static_cast<int>(r.naive_us)).c_str() : "–",
                r.naive_us > 0 ? (std::to_string(static_cast<int>(r.naive_us / r.us)) + "x").c_str() : "–",
                r.check.c_str(), r.rel, r.target.c_str());
  // flatness over P (issue 3): each series is the sweep rows of one shape (sweep_series); MLA by TFLOP/s, GQA by
  // GB/s, spread = 1 - min / max, from the eager medians (and, shown, the graph replays)
  std::vector<std::pair<std::string, std::vector<const Row*>>> series;  // in table order
  for (const Row& r : rows) {
    if (r.target != kFlatTarget) continue;
    const std::string key = sweep_series(r.name);
    auto it = std::find_if(series.begin(), series.end(), [&](const auto& e) { return e.first == key; });
    if (it == series.end()) it = series.insert(series.end(), {key, {}});
    it->second.push_back(&r);
  }
  for (const auto& [key, members] : series) {
    const bool mla = key.rfind("mla", 0) == 0;
    const int n = static_cast<int>(members.size());
    double lo = 1e300, hi = 0, glo = 1e300, ghi = 0;
    int ng = 0;
    for (const Row* rp : members) {
      const Row& r = *rp;
      const double v = mla ? r.tflops : r.gbs;
      lo = std::min(lo, v), hi = std::max(hi, v);
      if (r.graph_us > 0) {
        const double g = v * r.us / r.graph_us;
        glo = std::min(glo, g), ghi = std::max(ghi, g), ++ng;
      }
    }
    if (n < 2) continue;
    std::printf("flatness %s (%d prefix lengths): %.0f-%.0f %s, spread %.1f%% eager", key.c_str(), n, lo, hi,
                mla ? "TFLOP/s" : "GB/s", 100 * (1 - lo / hi));
    if (ng == n) std::printf(", %.1f%% graph (%.0f-%.0f)", 100 * (1 - glo / ghi), glo, ghi);
    // the verdict from the eager medians (the table's µs column): long graph replays ran up to 10% slower at
    // 256K on the H200 (clocks under sustained load), which would flatter the spread
    std::printf(": %s\n", 1 - lo / hi <= 0.15 ? "within 15%" : "not within 15%");
  }
  cudaFree(flush.buf);
  cudaStreamDestroy(s);
  if (!skipped.empty()) {
    std::printf("bench: %zu selected case(s) SKIPPED, not measured (inputs too large for this host):", skipped.size());
    for (const std::string& n : skipped) std::printf(" \"%s\"", n.c_str());
    std::printf("\n");
  }
  if (failed) std::printf("bench: %d case(s) FAILED (above)\n", failed);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage();
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    usage(stdout);
    return 0;
  }
  Options o;
  if (!parse(argc, argv, 2, &o)) {
    usage();
    return 2;
  }
  if (cmd == "info") return cmd_info();
  if (cmd == "check") return cmd_check(o);
  if (cmd == "bench") return cmd_bench(o);
  if (cmd == "soak") return cmd_soak(o.seconds, o.seed, o.report);
  usage();
  return 2;
}
