// VectorMath: the float32 elementary functions of the element-wise ops
// (Exp, Log, Sqrt, Rsqrt, Sigmoid; tanh for the recurrent layers' gates)
// and of the exp inside Softmax,
// LogSoftmax and the cross-entropy, exact at the edges:
//
//   VecExp(x, y, n);   // y[i] = e^x[i], n values; x == y allowed
//
// - A value's result does not depend on where it sits: full blocks of 8
//   and the last partial block (copied into a padded block) run the same
//   AVX2 instructions, so a tensor's tail, a thread's block boundary or a
//   row's last lanes give the same bits as its body (Eigen 3.4's packet
//   functions differ from its scalar tail, and flush at the edges).
// - IEEE special values as the C library gives them: exp(-inf) = 0,
//   exp(x) gradually underflows through the subnormals to 0 below -103.97,
//   overflows to inf above 88.72; log(0) = -inf, log(x < 0) = NaN,
//   log(inf) = inf; sqrt(inf) = inf, sqrt(-0) = -0, rsqrt(0) = inf,
//   rsqrt(inf) = 0; NaN in gives NaN out; subnormal inputs are not flushed.
// - Accuracy against the float64 functions: exp within 1.3 ulp and log
//   within 0.8 ulp (Cephes' float polynomials, S. L. Moshier, Cephes Math
//   Library, expf.c / logf.c, with FMA); sqrt correctly rounded (the C
//   library's bits); rsqrt within 3 ulp (the hardware estimate and one
//   Newton step, as fast as Eigen's; its estimate differs between CPU
//   vendors, so rsqrt's last bits may too); sigmoid within 2.6 ulp
//   everywhere: e^-|x| / (1 + e^-|x|) for x < 0, 1 / (1 + e^-|x|) else (no
//   cancellation for x < -9, where Eigen's was 2.5e-4 off); tanh within
//   1.2 ulp (Cephes' tanhf with FMA).
//   (ops/math/vector_math_test.cc checks every 4099th bit pattern.)
// The build's baseline is x86-64-v3 (AVX2, FMA), so these need no run-time
// dispatch; an AVX-512 variant measured no faster for the memory-bound
// element-wise ops (ops/math/vector_kernels.cc).
//
// Thread safety: reentrant (the functions touch only their arguments).
#ifndef IPUFLOW_OPS_MATH_VECTOR_MATH_H_
#define IPUFLOW_OPS_MATH_VECTOR_MATH_H_

#include <cstdint>

namespace ipuflow::ops {

// Each: y[i] = f(x[i]) for i in [0, n); x == y allowed (no other overlap).
void VecExp(const float* x, float* y, int64_t n);
void VecLog(const float* x, float* y, int64_t n);
void VecSqrt(const float* x, float* y, int64_t n);
void VecRsqrt(const float* x, float* y, int64_t n);
void VecSigmoid(const float* x, float* y, int64_t n);
void VecTanh(const float* x, float* y, int64_t n);

// One value through the same code (for reference checks and scalar uses
// that must agree with the arrays bitwise).
float ExpExact(float x);
float LogExact(float x);
float TanhExact(float x);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_MATH_VECTOR_MATH_H_
