// `flashverify soak`: long runs of random verify calls under CUDA-graph replay (apps/soak.cpp).
#pragma once

#include <cstdint>
#include <string>

// Runs for `seconds`; writes a markdown report to `report` when not empty. Returns 0 when every call
// matched the naive kernel, no error occurred and every injected bad index was reported.
int cmd_soak(double seconds, uint64_t seed, const std::string& report);
