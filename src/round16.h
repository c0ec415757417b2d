// Rounding a double to bf16 / fp16 bits, nearest and ties to even, rounded once: the oracle's 16-bit outputs
// (reference.cpp). Header-only so that the CPU tests check these very functions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace fv {

// double -> float -> 16 bits: the quick way, which may be one unit off (double rounding, below)
inline uint16_t bf16_bits_via_float(double x) {
  float f = static_cast<float>(x);
  uint32_t w;
  std::memcpy(&w, &f, 4);
  if ((w & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  w += 0x7fffu + ((w >> 16) & 1u);                     // round to nearest even
  return static_cast<uint16_t>(w >> 16);
}

inline uint16_t fp16_bits_via_float(double x) {
  float f = static_cast<float>(x);
  uint32_t w;
  std::memcpy(&w, &f, 4);
  const uint32_t sign = (w >> 16) & 0x8000u;
  const uint32_t absw = w & 0x7fffffffu;
  if (absw > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (absw >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (absw < 0x38800000u) {                                               // subnormal or zero
    const double a = std::fabs(static_cast<double>(f));
    const double q = std::nearbyint(a * 16777216.0);                      // units of 2^-24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(q));
  }
  uint32_t mant = absw & 0x7fffffu;
  uint32_t exp = (absw >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// The value of 16-bit `bits` (bf16 or fp16), exactly (infinities and NaN included): the oracle's loads too
inline double decode16(uint16_t bits, bool bf16) {
  if (bf16) {
    const uint32_t w = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  }
  const int sign = bits >> 15, exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(double(mant), -24);
  else if (exp == 31) v = mant ? std::nan("") : HUGE_VAL;
  else v = std::ldexp(double(mant | 0x400), exp - 25);
  return sign ? -v : v;
}

// decode16 for measuring distances: an infinity counts as the next power of two past the largest finite value
// (2^128, 2^16), where IEEE rounding puts the overflow threshold
inline double value16(uint16_t bits, bool bf16) {
  const double v = decode16(bits, bf16);
  return std::isinf(v) ? std::copysign(bf16 ? 0x1p128 : 0x1p16, v) : v;
}

// The nearest of c and its two neighbours of the same sign (ties to even): c came through float, so a value just
// past a 16-bit midpoint may have rounded onto the midpoint and then the wrong way; it is at most one unit off
inline uint16_t round_once(double x, bool bf16, uint16_t c) {
  if (std::isnan(x)) return c;
  const uint16_t sign = c & 0x8000u, mag = c & 0x7fffu, inf = bf16 ? 0x7f80u : 0x7c00u;
  uint16_t best = c;
  double best_d = std::fabs(value16(c, bf16) - x);
  for (int step : {-1, 1}) {
    if ((mag == 0 && step < 0) || (mag >= inf && step > 0)) continue;  // no neighbour below zero or past inf
    const uint16_t n = static_cast<uint16_t>(sign | (mag + step));
    const double d = std::fabs(value16(n, bf16) - x);
    if (d < best_d || (d == best_d && (n & 1u) == 0)) {
      best = n;
      best_d = d;
    }
  }
  return best;
}

inline uint16_t round_to_bf16(double x) { return round_once(x, true, bf16_bits_via_float(x)); }
inline uint16_t round_to_fp16(double x) { return round_once(x, false, fp16_bits_via_float(x)); }

}  // namespace fv
