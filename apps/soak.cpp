// `flashverify soak`: a long run of random verify calls the way a server makes them. Each shape is captured
// once in a CUDA graph (fast kernel); every call then rewrites all input buffers in place with a new random
// problem that fits the captured capacity (lengths, slots, trees, values), replays the graph, runs the
// naive kernel eagerly on the same buffers, and compares the two. Every 16th call also injects a bad
// index into a checked eager call (FV_FLAG_CHECK_INDICES) and expects it reported, not read.
//
// Host-side problem generation runs on worker threads so the GPU stays busy. The report (markdown) has
// the counts: calls, mismatches (must be 0), faults injected and detected, errors.
#include "soak.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "testkit.h"

namespace {

using fvt::CaseSpec;
using fvt::HostProblem;

struct Shape {
  std::string name;
  CaseSpec cap;  // the capacity the graph is captured with: every request at max draft and max prefix
};

CaseSpec capacity(bool mla, int hq, int hkv, int d, int max_draft, int max_prefix, int batch, int mask_kind,
                  int addressing = FV_KV_TOKEN_SLOTS, int page_size = 1, int profile = FV_PROFILE_AUTO) {
  CaseSpec s = fvt::uniform_spec(mla, hq, hkv, d, max_draft, max_prefix, batch);
  s.mask_kind = mask_kind;
  s.addressing = addressing;
  s.page_size = page_size;
  s.profile = profile;
  s.qo_i64 = true;
  s.tree = mask_kind == FV_MASK_CAUSAL ? fvt::Tree::Chain : fvt::Tree::Random;
  return s;
}

CaseSpec fp8(CaseSpec s) { return fvt::with_fp8(s, 0.75f, 1.25f); }

std::vector<Shape> shapes() {
  return {
      {"mla h16 n16 b4 bytes", capacity(true, 16, 1, 0, 16, 24000, 4, FV_MASK_BYTES)},
      {"mla h128 n8 b2 parents", capacity(true, 128, 1, 0, 8, 8000, 2, FV_MASK_PARENTS)},
      {"mla h16 n64 b2 bits [sm120 cfg]", capacity(true, 16, 1, 0, 64, 12000, 2, FV_MASK_BITS, FV_KV_TOKEN_SLOTS, 1,
                                                   FV_PROFILE_SMALL_SMEM)},
      {"gqa32/8 d128 n8 b8 bytes", capacity(false, 32, 8, 128, 8, 16000, 8, FV_MASK_BYTES)},
      {"gqa8/1 d128 n32 b4 causal paged16", capacity(false, 8, 1, 128, 32, 20000, 4, FV_MASK_CAUSAL,
                                                     FV_KV_PAGE_TABLE, 16)},
      {"gqa16/4 d64 n128 b2 parents", capacity(false, 16, 4, 64, 128, 6000, 2, FV_MASK_PARENTS)},
      {"gqa8/2 d256 n8 b4 bits paged64", capacity(false, 8, 2, 256, 8, 10000, 4, FV_MASK_BITS, FV_KV_PAGE_TABLE, 64)},
      {"mla h16 n16 b4 bytes fp8-kv", fp8(capacity(true, 16, 1, 0, 16, 16000, 4, FV_MASK_BYTES))},
      {"gqa32/8 d128 n8 b8 bytes fp8-kv paged16", fp8(capacity(false, 32, 8, 128, 8, 12000, 8, FV_MASK_BYTES,
                                                               FV_KV_PAGE_TABLE, 16))},
  };
}

// A random problem that fits `cap`: same batch, heads, dims, mask kind and addressing.
CaseSpec random_fit(const CaseSpec& cap, std::mt19937_64& rng, uint64_t seed) {
  CaseSpec s = cap;
  s.seed = seed;
  if (s.mask_kind != FV_MASK_CAUSAL) s.tree = static_cast<fvt::Tree>(rng() % 4);
  s.indices_i64 = cap.indices_i64;
  for (size_t b = 0; b < s.draft.size(); ++b) {
    s.draft[b] = 1 + static_cast<int>(rng() % cap.max_draft);
    const int pick = static_cast<int>(rng() % 10);
    s.prefix[b] = pick == 0 ? -1 : pick == 1 ? 0 : static_cast<int>(rng() % (cap.prefix[b] + 1));
  }
  return s;
}

struct Job {
  size_t shape;
  std::unique_ptr<HostProblem> hp;
};

// Bounded producer/consumer queue of generated problems.
class JobQueue {
 public:
  explicit JobQueue(size_t cap) : cap_(cap) {}
  bool push(Job j) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return q_.size() < cap_ || stop_; });
    if (stop_) return false;
    q_.push_back(std::move(j));
    cv_.notify_all();
    return true;
  }
  bool pop(Job* j) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return !q_.empty() || stop_; });
    if (q_.empty()) return false;
    *j = std::move(q_.front());
    q_.pop_front();
    cv_.notify_all();
    return true;
  }
  void stop() {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> q_;
  size_t cap_;
  bool stop_ = false;
};

struct PerShape {
  long calls = 0, mismatches = 0;
  double worst = 0;
};

// A bad index written into the device copy, a checked eager call that must report it.
bool inject_and_detect(fvt::DeviceProblem& dp, const HostProblem& hp, std::mt19937_64& rng, std::string* what) {
  const fv_args& a = dp.args();
  fv_args checked = a;
  checked.problem.flags |= FV_FLAG_CHECK_INDICES;
  const int B = hp.spec.batch();
  int b = -1;
  for (int k = 0; k < B; ++k)
    if (hp.kv_indptr[k + 1] - hp.kv_indptr[k] > 1) { b = k; break; }
  fv_status want;
  if (b >= 0 && hp.spec.addressing == FV_KV_TOKEN_SLOTS && rng() % 2 == 0) {
    const int64_t pos = hp.kv_indptr[b] + static_cast<int64_t>(rng() % (hp.kv_indptr[b + 1] - hp.kv_indptr[b]));
    const int64_t bad = rng() % 2 ? a.num_slots + static_cast<int64_t>(rng() % 1000) : -1;
    if (a.kv_indices.dtype == FV_INDEX_INT64) cudaMemcpy(static_cast<int64_t*>(const_cast<void*>(a.kv_indices.data)) + pos, &bad, 8, cudaMemcpyHostToDevice);
    else {
      const int32_t b32 = static_cast<int32_t>(bad);
      cudaMemcpy(static_cast<int32_t*>(const_cast<void*>(a.kv_indices.data)) + pos, &b32, 4, cudaMemcpyHostToDevice);
    }
    want = FV_ERR_BAD_INDEX;
    *what = "slot " + std::to_string(bad);
  } else if (b >= 0 && hp.spec.addressing == FV_KV_PAGE_TABLE && rng() % 2 == 0) {
    const int32_t bad = static_cast<int32_t>(a.num_slots / hp.spec.page_size + 1 + rng() % 100);
    cudaMemcpy(const_cast<int32_t*>(a.page_table) + int64_t(b) * hp.page_table_stride, &bad, 4, cudaMemcpyHostToDevice);
    want = FV_ERR_BAD_INDEX;
    *what = "page " + std::to_string(bad);
  } else {
    // kv_indptr[B] below kv_indptr[B-1]: the last request's prefix length negative
    const int32_t bad = static_cast<int32_t>(hp.kv_indptr[B - 1] - 1 - static_cast<int64_t>(rng() % 5));
    cudaMemcpy(static_cast<int32_t*>(const_cast<void*>(a.kv_indptr.data)) + B, &bad, 4, cudaMemcpyHostToDevice);
    want = FV_ERR_INCONSISTENT_LENGTHS;
    if (bad < 0) want = FV_ERR_BAD_LENGTH;
    *what = "kv_indptr[B] " + std::to_string(bad);
  }
  const fv_status st = fv_run(&checked, dp.workspace(), dp.workspace_bytes(), nullptr);
  *what += std::string(" -> ") + fv_status_string(st);
  return st == want;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

}  // namespace

int cmd_soak(double seconds, uint64_t seed_in, const std::string& report) {
  const std::string why = fvt::gpu_unavailable_reason();
  if (!why.empty()) {
    std::printf("soak SKIPPED: %s\n", why.c_str());
    // the report says so too: a job that collects it must not find a missing file, or an old one
    if (!report.empty()) {
      FILE* f = std::fopen(report.c_str(), "w");
      if (f == nullptr) {
        std::fprintf(stderr, "soak: cannot write --report %s\n", report.c_str());
        return 1;
      }
      std::fprintf(f, "# Soak run\n\nSKIPPED: no GPU (%s). Nothing was checked.\n", why.c_str());
      std::fclose(f);
    }
    return 77;  // (a skip, not a pass)
  }
  const uint64_t seed = seed_in ? seed_in : fvt::session_seed();
  std::vector<Shape> sh = shapes();
  std::printf("%s\nsoak on %s for %.0f s, seed %llu, %zu shapes\n", fv_build_info(), fvt::gpu_name().c_str(), seconds,
              static_cast<unsigned long long>(seed), sh.size());
  std::fflush(stdout);

  // one captured graph (fast) and one eager naive problem per shape, on the capacity buffers
  struct Slot {
    std::unique_ptr<HostProblem> cap;
    std::unique_ptr<fvt::DeviceProblem> fast, naive;
    cudaGraphExec_t exec = nullptr;
  };
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  std::vector<Slot> slots(sh.size());
  for (size_t k = 0; k < sh.size(); ++k) {
    CaseSpec c = sh[k].cap;
    c.seed = seed + k;
    slots[k].cap.reset(new HostProblem(fvt::make_problem(c)));
    sh[k].cap.page_table_stride = slots[k].cap->page_table_stride;  // every rewrite keeps the captured stride
    slots[k].fast.reset(new fvt::DeviceProblem(*slots[k].cap, FV_IMPL_FAST));
    slots[k].naive.reset(new fvt::DeviceProblem(*slots[k].cap, FV_IMPL_NAIVE));
    if (!slots[k].fast->ok() || !slots[k].naive->ok()) {
      std::printf("soak: %s: setup failed: %s%s\n", sh[k].name.c_str(), slots[k].fast->error().c_str(),
                  slots[k].naive->error().c_str());
      return 1;
    }
    cudaGraph_t g;
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
    const fv_status st = slots[k].fast->run(stream);
    cudaStreamEndCapture(stream, &g);
    if (st != FV_OK || cudaGraphInstantiate(&slots[k].exec, g, 0) != cudaSuccess) {
      std::printf("soak: %s: capture failed: %s\n", sh[k].name.c_str(), fv_last_error());
      return 1;
    }
    cudaGraphDestroy(g);
  }

  JobQueue queue(12);
  std::atomic<bool> done{false};
  std::atomic<long> generated{0};
  // a few generator threads: enough to keep the GPU busy, few enough to leave the CPUs to whatever runs beside
  const unsigned workers = 4;
  std::vector<std::thread> producers;
  for (unsigned w = 0; w < workers; ++w)
    producers.emplace_back([&, w] {
      std::mt19937_64 rng(seed * 1315423911ull + w);
      for (uint64_t i = 0; !done; ++i) {
        Job j;
        j.shape = static_cast<size_t>(rng() % sh.size());
        const CaseSpec s = random_fit(sh[j.shape].cap, rng, seed + 1000003ull * (w + 1) + i);
        j.hp.reset(new HostProblem(fvt::make_problem(s)));
        ++generated;
        if (!queue.push(std::move(j))) return;
      }
    });

  std::vector<PerShape> per(sh.size());
  long calls = 0, mismatches = 0, errors = 0, injected = 0, detected = 0;
  double worst = 0;
  std::vector<std::string> notes;
  std::mt19937_64 rng(seed ^ 0x5eed);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  double next_progress = 60;
  Job job;
  while (elapsed() < seconds && queue.pop(&job)) {
    Slot& sl = slots[job.shape];
    const HostProblem& hp = *job.hp;
    if (!sl.fast->upload_inputs(hp) || !sl.naive->upload_inputs(hp)) {
      ++errors;
      notes.push_back(sh[job.shape].name + ": upload failed: " + sl.fast->error() + sl.naive->error());
      continue;
    }
    sl.fast->poison();
    sl.naive->poison();
    cudaDeviceSynchronize();
    cudaError_t e = cudaGraphLaunch(sl.exec, stream);
    const fv_status nst = sl.naive->run(stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess || nst != FV_OK) {
      ++errors;
      notes.push_back(sh[job.shape].name + ": " + (e != cudaSuccess ? cudaGetErrorString(e) : fv_last_error()));
      if (e != cudaSuccess) break;  // a sticky CUDA error ends the run
      continue;
    }
    std::vector<float> of, on, lf, ln;
    if (!sl.fast->download(&of, &lf, nullptr, &hp) || !sl.naive->download(&on, &ln, nullptr, &hp)) {
      ++errors;
      notes.push_back(sh[job.shape].name + ": download failed");
      continue;
    }
    double num = 0, den = 0;
    long nan = 0;
    for (size_t i = 0; i < of.size(); ++i) {
      nan += std::isnan(of[i]) || std::isinf(of[i]);
      const double d = double(of[i]) - on[i];
      num += d * d;
      den += double(on[i]) * on[i];
    }
    for (size_t i = 0; i < lf.size(); ++i) nan += std::isnan(lf[i]) || std::fabs(lf[i] - ln[i]) > 1e-2f;
    const double rel = den > 0 ? std::sqrt(num / den) : (num > 0 ? INFINITY : 0);
    ++calls;
    ++per[job.shape].calls;
    per[job.shape].worst = std::max(per[job.shape].worst, rel);
    worst = std::max(worst, rel);
    if (nan || !(rel <= 1e-2)) {
      ++mismatches;
      ++per[job.shape].mismatches;
      char buf[256];
      std::snprintf(buf, sizeof buf, "%s: call %ld: rel L2 %.3e, %ld NaN/Inf or LSE disagreements (%s)",
                    sh[job.shape].name.c_str(), calls, rel, nan, hp.spec.describe().c_str());
      notes.push_back(buf);
    }
    if (calls % 16 == 0) {
      std::string what;
      ++injected;
      if (inject_and_detect(*sl.fast, hp, rng, &what)) ++detected;
      else notes.push_back(sh[job.shape].name + ": injected fault not reported: " + what + " (" + fv_last_error() + ")");
      cudaDeviceSynchronize();
    }
    if (elapsed() >= next_progress) {
      std::printf("[soak %4.0f s] %ld calls, %ld mismatches, %ld/%ld faults detected, %ld errors, worst rel L2 %.2e\n",
                  elapsed(), calls, mismatches, detected, injected, errors, worst);
      std::fflush(stdout);
      next_progress += 60;
    }
  }
  const double secs = elapsed();
  done = true;
  queue.stop();
  for (std::thread& t : producers) t.join();
  for (Slot& s : slots) cudaGraphExecDestroy(s.exec);
  cudaStreamDestroy(stream);

  bool pass = calls > 0 && mismatches == 0 && errors == 0 && injected == detected;
  std::printf("soak: %.0f s, %ld graph-replayed calls checked against the naive kernel, %ld mismatches, %ld errors, "
              "%ld/%ld injected bad indices reported, worst rel L2 %.2e: %s\n",
              secs, calls, mismatches, errors, detected, injected, worst, pass ? "PASS" : "FAIL");
  if (!report.empty()) {
    std::FILE* f = std::fopen(report.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "soak: cannot write --report %s\n", report.c_str());
      pass = false;
    }
    if (f) {
      const char* commit = std::getenv("FV_COMMIT");
      std::fprintf(f, "# Soak run\n\n");
      std::fprintf(f, "%s on %s, commit %s, %s, seed %llu.\n\n", fv_build_info(), fvt::gpu_name().c_str(),
                   commit ? commit : "unknown", now_utc().c_str(), static_cast<unsigned long long>(seed));
      std::fprintf(f, "`flashverify soak --seconds %.0f`: every call rewrites all input buffers of a captured CUDA "
                      "graph in place with a new random problem (lengths, slots, trees, values; padded and empty "
                      "prefixes included), replays the graph (fast kernel), runs the naive kernel on the same "
                      "buffers, and compares the outputs (relative L2 <= 1e-2, no NaN/Inf, LSE within 1e-2). "
                      "Every 16th call also writes a bad slot, page id or length into the buffers and makes a "
                      "checked call (FV_FLAG_CHECK_INDICES), which must report it.\n\n", seconds);
      std::fprintf(f, "| | |\n|---|---|\n| duration | %.0f s |\n| calls checked | %ld |\n| mismatches | %ld |\n"
                      "| errors | %ld |\n| faults injected | %ld |\n| faults reported | %ld |\n"
                      "| worst fast-vs-naive rel L2 | %.2e |\n| problems generated | %ld |\n| verdict | %s |\n\n",
                   secs, calls, mismatches, errors, injected, detected, worst, static_cast<long>(generated),
                   pass ? "PASS" : "FAIL");
      std::fprintf(f, "| shape (captured capacity) | calls | mismatches | worst rel L2 |\n|---|---|---|---|\n");
      for (size_t k = 0; k < sh.size(); ++k)
        std::fprintf(f, "| %s, prefix <= %d | %ld | %ld | %.2e |\n", sh[k].name.c_str(), sh[k].cap.prefix[0],
                     per[k].calls, per[k].mismatches, per[k].worst);
      if (!notes.empty()) {
        std::fprintf(f, "\nNotes (first 20):\n\n");
        for (size_t i = 0; i < notes.size() && i < 20; ++i) std::fprintf(f, "- %s\n", notes[i].c_str());
      }
      std::fclose(f);
    }
  }
  return pass ? 0 : 1;
}
