// AVX-512 (VL) Conv2D loop of the direct small-channel kernels
// (ops/nn/conv_small.h) that vectorises over output pixels rather than
// output channels: one accumulator per channel, each lane an output pixel,
// multiplied by the filter entry broadcast from memory. A block is 8
// consecutive output pixels (of one row, or the end of one and the start
// of the next); two blocks share a zmm (Zen 4 runs such zmm loops at its
// FMA peak, ymm ones at 90%), an odd one takes a ymm.
// The channel-packet loops fill 16 lanes per pixel for 9-16 channels (a
// zmm) and 24 for 17-24 (3 ymm, or a zmm and a ymm): 10 or 20 useful ones
// for the tutorial ConvNet's layers; here every lane of a block is useful,
// and the 32 registers hold up to 24 accumulators.
//
//   ConvRowsShape s = ...;  // The convolution, per image.
//   std::vector<float> xp(ConvRowsImageFloats(s), 0.0f);  // Zeros once.
//   ConvRowsRelayout(s, x + image * h * w * c, xp.data());
//   ConvRowsForward(s, xp.data(), w, oh0, oh1, y + image * oh * ow * oc);
//
// The loop reads a copy of one image relaid as zero-padded rows per input
// channel, each row split into sw column phases so a strided row of output
// pixels reads consecutive floats:
//
//   xp[((ci * hp + ih) * sw + ph) * wq + q] = x[ih - pad_top,
//                                               q * sw + ph - pad_left, ci]
//
// (zero outside the image). Each output sums its kh * kw * c terms in the
// channel-packet loops' order (kh, kw, c ascending, fused multiply-adds from
// zero, padding as zero terms), so the results are bitwise equal to theirs.
//
// REQUIRES (every function): DetectedIsa() == kAvx512,
// ConvRowsTakes(s.oc). Thread safety: pure functions; callers give each
// thread its own xp and output rows.
#ifndef IPUFLOW_OPS_NN_CONV_ROWS_AVX512_H_
#define IPUFLOW_OPS_NN_CONV_ROWS_AVX512_H_

#include <cstdint>

namespace ipuflow::ops::avx512 {

// One image's convolution, NHWC: x [h, w, c], filter [kh, kw, c, oc],
// y [oh, ow, oc], zero padding pad_top, pad_left (and whatever the bottom
// and right windows cover).
struct ConvRowsShape {
  int64_t h, w, c, kh, kw, sh, sw, oh, ow, pad_top, pad_left, oc;
};

// The output channel counts the loop takes.
constexpr bool ConvRowsTakes(int64_t oc) {
  return (oc >= 9 && oc <= 12) || (oc >= 17 && oc <= 24);
}

// The floats of the relaid image xp.
int64_t ConvRowsImageFloats(const ConvRowsShape& s);

// Writes the image's floats into xp; its padding entries keep what they
// hold (zeros from the caller, once per buffer).
void ConvRowsRelayout(const ConvRowsShape& s, const float* image, float* xp);

// y[(oh * ow + ow) * oc + o] = sum over kh, kw, c of
// x[oh * sh + kh - pad_top, ow * sw + kw - pad_left, c] * w[kh, kw, c, o]
// for output rows oh0 <= oh < oh1 of the image, from its relaid xp.
void ConvRowsForward(const ConvRowsShape& s, const float* xp, const float* w,
                     int64_t oh0, int64_t oh1, float* y);

}  // namespace ipuflow::ops::avx512

#endif  // IPUFLOW_OPS_NN_CONV_ROWS_AVX512_H_
