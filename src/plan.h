// The launch plan of one problem on one device, and the workspace layout that goes with it. One function
// computes both, so the size fv_workspace_size reports and the offsets fv_run uses cannot drift apart.
// Plain C++: the CPU tests check it with the properties of an H200 and of an sm_120 card.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashverify/flashverify.h"
#include "tile_config.h"

namespace fv {

struct DeviceProps {
  int num_sms = 0;
  int max_smem_per_block = 0;  // opt-in maximum (cudaDevAttrMaxSharedMemoryPerBlockOptin)
  int max_smem_per_sm = 0;
  int cc_major = 0, cc_minor = 0;
  // the combine kernel loaded for this device was compiled for sm_90+ (it holds griddepcontrol.wait): a
  // build with only older PTX, JIT-compiled on a newer GPU, must not be launched as a programmatic dependent
  bool combine_waits = false;
  // combine blocks a multiprocessor holds at once (the occupancy API on the loaded 512-column combine kernel,
  // the one with the most registers: 2 on sm_80 - sm_120 at 64 registers a thread)
  int combine_blocks_per_sm = 2;
  // the library holds the Hopper MLA kernel (built when the architecture list has sm_90: sm_90a code)
  bool wg_kernel = false;
  // the large-tile kernels (large_smem configurations) hold their bodies on this device: their code was compiled for
  // sm_90 - sm_11x. A library whose architecture list has none of those, run on such a GPU, runs older PTX through the
  // driver's JIT, and there those kernels are a trap (verify.cuh): the planner must not take them
  bool large_kernels = true;
};

// Layout of the scheduler's output at the head of the workspace (int32 words).
struct SchedLayout {
  static constexpr int kHeader = 4;  // [0] effective partitions, [1] total cost, [2..3] unused
  static constexpr int64_t cum(int /*batch*/) { return kHeader; }  // [B + 1] cost prefix sums
  static constexpr int64_t first_part(int batch) { return kHeader + int64_t(batch) + 1; }  // [B]
  static constexpr int64_t num_splits(int batch) { return kHeader + 2 * int64_t(batch) + 1; }  // [B]
  static constexpr int64_t slot_offset(int batch) { return kHeader + 3 * int64_t(batch) + 1; }  // [B]
  static constexpr int64_t words(int batch) { return kHeader + 4 * int64_t(batch) + 1; }
};

// Batches up to this size are planned by the verify kernel itself (one warp scans the lengths) instead
// of a separate prepare launch, unless parent arrays need converting.
constexpr int kInlinePlanMaxBatch = 16;
// Largest FLASHVERIFY_OVERHEAD / FLASHVERIFY_MIN_PART_COST the planner takes (a sweep knob, far above any tuned value).
constexpr int kMaxTuningEnv = 1 << 16;
// fp8 pools on the 32-row d128 tiles: batches up to this size take 64-key compact steps (Plan::fp8_narrow)
constexpr int kFp8NarrowMaxBatch = 8;

// Warps of a combine block (combine.cuh); a block merges 16 / Plan::combine_wpr (row, column slice) units.
constexpr int kCombineBlockWarps = 16;
// Split loads a combine warp issues before it uses any (one memory round trip a batch).
constexpr int kCombineBatch = 8;

struct Plan {
  int impl = FV_IMPL_ORACLE;     // resolved implementation
  const TileConfig* cfg = nullptr;  // FAST only
  int group = 1;                 // Hq / Hkv
  int m_tiles = 0;               // CTAs along the packed row dimension: ceil(group * max_draft / bm)
  int num_parts = 0;             // KV partitions (grid.y)
  // work partitioning of the device planner (partition.h): the configuration's values, or FLASHVERIFY_OVERHEAD /
  // FLASHVERIFY_MIN_PART_COST (benchmark sweeps; 1..kMaxTuningEnv, anything else is ignored). FAST only
  int overhead = 0;
  int min_part_cost = 0;
  int ctas_per_sm = 0;
  int64_t max_slots = 0;         // partial (o, lse) states the workspace holds
  int mask_words = 0;            // uint32 words per converted mask row (0: no conversion)
  bool inline_plan = false;      // no prepare kernel: the verify kernel plans (and reads byte masks directly)
  bool pdl = false;              // the combine is a programmatic dependent launch of the verify kernel
  int combine_cols = 0;          // output columns a combine unit (128; 32 when few rows would leave SMs idle; 256
                                 // where 128 would need a second wave of combine blocks: plan.cpp)
  int combine_wpr = 16;          // combine warps a (row, column slice) unit: 1..16, about one per 8 expected splits (plan.cpp)
  bool combine_block8 = false;   // wpr 8 in 8-warp blocks, one unit a block (combine_blocks = units)
  bool fp8_narrow = false;       // fp8 pools on a 32-row d128 tile at a small batch: verify_kernel_narrow (plan.cpp)
  bool fp8_ring = false;         // fp8 pools on a 2-stage Hopper GQA kernel: its RING kernel (FLASHVERIFY_GQA8_RING=1: plan.cpp)
  int64_t combine_blocks = 0;    // combine grid: ceil(units / (16 / combine_wpr)), or units with combine_block8;
                                 // 0 when nothing is split
  // workspace layout, bytes from its start
  std::size_t off_sched = 0, off_bits = 0, off_part_lse = 0, off_part_o = 0, total = 0;
};

// Chooses the implementation, the tile configuration and the partition count, and lays out the
// workspace. `props` is ignored for the CPU device. Returns FV_ERR_NO_DEVICE / FV_ERR_UNSUPPORTED with a
// message when nothing fits the device.
fv_status make_plan(const fv_problem& p, const DeviceProps& props, Plan* plan);

// The partition count heuristic alone (exposed for tests): `base` CTAs per partition
// (m_tiles * Hkv) against `target` CTAs resident at once (SMs x CTAs per SM).
int choose_num_parts(int64_t base, int64_t target);

}  // namespace fv
