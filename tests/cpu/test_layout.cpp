// The shared-memory placements of src/smem_layout.h against a model of the 32 banks (smem_layout.h's header says
// how a warp's access is served): each placement the kernels use must be a bijection onto the slots it claims, and
// every phase of the accesses below must take one wavefront. The placements they replaced (the policy arguments'
// other values) must show the two-way conflicts they were replaced for, so that the model itself is shown to see them.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "smem_layout.h"

namespace {

// one lane's access: its byte address (the access is `width` bytes from there)
struct Access {
  uint32_t lane;
  uint32_t addr;
};

// The wavefronts a warp's access of `width` bytes a lane takes, summed over its phases of 128 / width lanes: a phase
// takes as many as its busiest bank has distinct 4-byte words among the phase's lanes.
int wavefronts(const std::vector<Access>& acc, uint32_t width) {
  const uint32_t per_phase = 128 / width;
  std::map<uint32_t, std::map<uint32_t, std::set<uint32_t>>> words;  // phase -> bank -> words
  for (const Access& a : acc) {
    EXPECT_EQ(a.addr % width, 0u) << "misaligned access";
    for (uint32_t b = 0; b < width; b += 4) {
      const uint32_t word = (a.addr + b) / 4;
      words[a.lane / per_phase][word % 32].insert(word);
    }
  }
  int total = 0;
  for (auto& [phase, banks] : words) {
    size_t worst = 0;
    for (auto& [bank, w] : banks) worst = std::max(worst, w.size());
    total += static_cast<int>(worst);
  }
  return total;
}

// the fewest wavefronts an access can take: one a phase
int phases(uint32_t lanes, uint32_t width) { return static_cast<int>((lanes + 128 / width - 1) / (128 / width)); }

TEST(Layout, ModelSeesConflicts) {
  // 8 lanes of 16 bytes on distinct bank groups: one wavefront; two lanes on one bank group: two
  std::vector<Access> good, bad;
  for (uint32_t l = 0; l < 8; ++l) good.push_back({l, 16 * l});
  for (uint32_t l = 0; l < 8; ++l) bad.push_back({l, 16 * (l % 4) + 128 * (l / 4)});
  EXPECT_EQ(wavefronts(good, 16), 1);
  EXPECT_EQ(wavefronts(bad, 16), 2);
  // the same word read by two lanes is one word (a broadcast)
  std::vector<Access> same = {{0, 0}, {1, 0}};
  EXPECT_EQ(wavefronts(same, 16), 1);
}

// The fp8 MLA producers (verify_wg.cuh, PROD): warp w of the producer warpgroups holds rows 8 w' .. 8 w' + 7 of a
// step (thread t: row t / 4, chunk c0 = t % 4). For each SW128 tile: the raw chunks' cp.async writes and the
// widening's reads (16 bytes a lane), then the widened stores (slots 2 c0 and 2 c0 + 1).
int producer_raw_wavefronts(bool alternate) {
  int total = 0;
  for (uint32_t warp = 0; warp < 8; ++warp) {
    std::vector<Access> acc;
    for (uint32_t lane = 0; lane < 32; ++lane) {
      const uint32_t t = 32 * warp + lane, row = t / 4, c0 = t % 4;
      acc.push_back({lane, fv::sw128_offset(row, fv::raw_slot(row, c0, true, alternate))});
    }
    total += wavefronts(acc, 16);
  }
  return total;
}

// (Each raw chunk in its own row, one lane a slot: no other quad touches the row, and the widening reads a raw chunk
// before its quad's stores over it, the __syncwarp in widen8.)
TEST(Layout, ProducerRawChunksFillAnAlignedHalfRowPerRow) {
  for (bool alternate : {false, true})
    for (uint32_t row = 0; row < 64; ++row) {
      std::set<uint32_t> offsets;
      for (uint32_t c0 = 0; c0 < 4; ++c0) {
        const uint32_t off = fv::sw128_offset(row, fv::raw_slot(row, c0, true, alternate));
        EXPECT_EQ(off / 128, row) << "a raw chunk outside its own row";
        offsets.insert(off % 128);
      }
      // one contiguous, 64-byte aligned span (the row's four cp.async: one L2 request's two sectors)
      ASSERT_EQ(offsets.size(), 4u);
      EXPECT_EQ(*offsets.begin() % 64, 0u);
      EXPECT_EQ(*offsets.rbegin() - *offsets.begin(), 48u);
    }
}

TEST(Layout, ProducerRawChunksWithoutBankConflicts) {
  const int best = 8 * phases(32, 16);
  EXPECT_EQ(producer_raw_wavefronts(true), best) << "RAW_ALT";
  EXPECT_EQ(producer_raw_wavefronts(false), 2 * best) << "v55's upper half rows: two-way";
  // the widened stores: slots 2 c0 (then 2 c0 + 1) of rows r, r + 1 are the even and the odd slots
  for (uint32_t hi = 0; hi < 2; ++hi)
    for (uint32_t warp = 0; warp < 8; ++warp) {
      std::vector<Access> acc;
      for (uint32_t lane = 0; lane < 32; ++lane) {
        const uint32_t t = 32 * warp + lane, row = t / 4, c0 = t % 4;
        acc.push_back({lane, fv::sw128_offset(row, 2 * c0 + hi)});
      }
      EXPECT_EQ(wavefronts(acc, 16), phases(32, 16));
    }
}

// The Hopper kernels' Q: thread t of the 256 compute threads, row t / 4, c0 = t % 4, chunks c0 + 4 c of the row
// (chunk cc at tile cc / 8, slot cc % 8). A thread visits the same set of chunks in any order; at each step c, the
// warp's 16-byte copies / reads take one wavefront a phase.
// the wavefronts over one a phase that the 256 compute threads' accesses to their Q chunks take, step by step of the
// visit order: at step c, thread t touches chunk cc = q_cc(t / 4, t % 4, c, odd) of row t / 4, `width` bytes at
// address(row, cc)
template <class Address>
int q_extra_wavefronts(int per_thread, uint32_t odd, uint32_t width, Address address) {
  int extra = 0;
  for (uint32_t warp = 0; warp < 8; ++warp)
    for (int c = 0; c < per_thread; ++c) {
      std::vector<Access> acc;
      for (uint32_t lane = 0; lane < 32; ++lane) {
        const uint32_t t = 32 * warp + lane, row = t / 4;
        acc.push_back({lane, address(row, fv::q_cc(row, t % 4, c, odd))});
      }
      extra += wavefronts(acc, width) - phases(32, width);
    }
  return extra;
}

void check_q_order(int dqk, uint32_t odd, bool expect_clean) {
  const int per_thread = dqk / 8 / 4;
  for (uint32_t t = 0; t < 256; ++t) {
    std::set<uint32_t> seen;
    for (int c = 0; c < per_thread; ++c) seen.insert(fv::q_cc(t / 4, t % 4, c, odd));
    ASSERT_EQ(seen.size(), size_t(per_thread));
    for (int c = 0; c < per_thread; ++c) EXPECT_TRUE(seen.count(t % 4 + 4 * c)) << "thread " << t << " chunk " << c;
  }
  const int extra = q_extra_wavefronts(per_thread, odd, 16, [](uint32_t row, uint32_t cc) {
    return (cc / 8) * 8192 + fv::sw128_offset(row, cc % 8);
  });
  if (expect_clean)
    EXPECT_EQ(extra, 0) << "dqk " << dqk << " odd " << odd;
  else
    EXPECT_EQ(extra, 8 * per_thread * phases(32, 16)) << "dqk " << dqk << ": two-way at every step";
}

TEST(Layout, QChunkOrderWithoutBankConflicts) {
  for (int dqk : {128, 256, 576}) {
    const uint32_t odd = fv::q_odd(dqk / 8 / 4);
    EXPECT_EQ(odd, dqk == 576 ? 1u : 3u);
    check_q_order(dqk, odd, true);
    check_q_order(dqk, 0, false);  // the order until v55
  }
}

// q_to_e4m3 (GQA S8): chunk cc of a row becomes 8 bytes of e4m3 hi (and lo) terms, at byte 8 (cc % 2) of slot
// (cc % 16) / 2 of e4m3 tile cc / 16 (64-bit stores: 16 lanes a phase, rows r .. r + 3)
TEST(Layout, QE4m3StoresWithoutBankConflicts) {
  for (int dqk : {128, 256}) {
    const int per_thread = dqk / 8 / 4;
    for (uint32_t odd : {fv::q_odd(per_thread), 0u, 1u}) {
      const int extra = q_extra_wavefronts(per_thread, odd, 8, [](uint32_t row, uint32_t cc) {
        return (cc / 16) * 8192 + fv::sw128_offset(row, (cc % 16) / 2) + 8 * (cc % 2);
      });
      if (odd == 3)
        EXPECT_EQ(extra, 0) << "dqk " << dqk;
      else
        EXPECT_GT(extra, 0) << "dqk " << dqk << " odd " << odd << ": rows r and r + 2 (or r + 1) share a slot pair";
    }
  }
}

// KV8's 8-byte copies and widening reads in the mma.sync tiles (verify.cuh issue_rows / widen_fp8: TPR threads a
// row, thread t: row t / TPR (+ a pass's rows), chunk t % TPR + TPR c, at swizzle<CHUNKS>(row, chunk) plus
// fp8_half(row, t % TPR)) and in the Hopper GQA kernels (verify_wg.cuh issue_rows_of / widen_rows: 8 threads a row, SW128 slot t % 8 of each tile)
template <int CHUNKS>
int mma_tile_half_extra(int tpr, int threads, bool alternate) {
  int extra = 0;
  for (int warp = 0; warp < threads / 32; ++warp)
    for (int c = 0; c < CHUNKS / tpr; ++c) {
      std::vector<Access> acc;
      for (int lane = 0; lane < 32; ++lane) {
        const int t = 32 * warp + lane, row = t / tpr, chunk = t % tpr + tpr * c;
        acc.push_back({uint32_t(lane), fv::swizzle<CHUNKS>(row, chunk) + fv::fp8_half(row, t % tpr, alternate)});
      }
      extra += wavefronts(acc, 8) - phases(32, 8);
    }
  return extra;
}

TEST(Layout, Fp8HalfSlotsWithoutBankConflicts) {
  // 8 threads a row (the 64-key tiles: rows of 8, 16, 32 or 72 chunks) and 16 (kGqa256's 16-row tile)
  EXPECT_EQ(mma_tile_half_extra<8>(8, 256, true), 0);
  EXPECT_EQ(mma_tile_half_extra<16>(8, 256, true), 0);
  EXPECT_EQ(mma_tile_half_extra<32>(8, 256, true), 0);
  EXPECT_EQ(mma_tile_half_extra<72>(8, 256, true), 0);
  EXPECT_EQ(mma_tile_half_extra<32>(16, 256, true), 0);
  EXPECT_EQ(mma_tile_half_extra<16>(16, 128, true), 0);
  // the placement until v55 (upper half always): two-way in each
  EXPECT_GT(mma_tile_half_extra<16>(8, 256, false), 0);
  EXPECT_GT(mma_tile_half_extra<72>(8, 256, false), 0);
  EXPECT_GT(mma_tile_half_extra<32>(16, 256, false), 0);
  // 4 threads a row (kFrag8's non-compact steps): at most two-way (four-way before)
  const int per_access = phases(32, 8);
  const int accesses = 256 / 32 * (16 / 4);
  EXPECT_LE(mma_tile_half_extra<16>(4, 256, true), accesses * per_access);
  EXPECT_EQ(mma_tile_half_extra<16>(4, 256, false), 3 * accesses * per_access);
  // the Hopper GQA kernels' SW128 tiles, 8 threads a row
  for (bool alternate : {true, false}) {
    int extra = 0;
    for (int warp = 0; warp < 8; ++warp) {
      std::vector<Access> acc;
      for (int lane = 0; lane < 32; ++lane) {
        const int t = 32 * warp + lane, row = t / 8, c0 = t % 8;
        acc.push_back({uint32_t(lane), fv::sw128_offset(row, c0) + fv::fp8_half(row, c0, alternate)});
      }
      extra += wavefronts(acc, 8) - phases(32, 8);
    }
    EXPECT_EQ(extra, alternate ? 0 : 8 * phases(32, 8)) << (alternate ? "fp8_half" : "upper half");
  }
}

}  // namespace
