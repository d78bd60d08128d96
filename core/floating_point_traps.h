// Floating-point traps (IPUConfig.floating_point_behaviour inv / div0 /
// oflo): the executor (core/program.cc) calls CheckFloatingPointTraps after
// each kernel of a run whose RunEnv::floating_point has a trap on, and a
// status it returns stops the run like any kernel error (in loops, sharded
// programs and pipelines alike). With every trap off nothing is checked.
//
// An element of a float32 or float16 output, or of the variable an op
// writes (ResourceAccess::kWrite, named by its "variable" attribute:
// assignments and optimizer updates; read back only with a trap on), is an
// exception when it is
//   inv:  NaN while no float input holds a NaN;
//   div0: infinite while every float input is finite, from an op that
//         divides (OpDef::divisor_input) whose divisor holds a zero;
//   oflo: infinite while every float input is finite (other ops), or NaN
//         in a float16 output where nanoo made an overflow NaN
//         (RoundToHalf notes the output; its other NaNs, if any, are then
//         called overflows too).
// The first such element (outputs in order, then flat index) gives
// InvalidArgument, as tf.debugging.check_numerics does:
//   "floating-point exception (oflo): Mul 'loss/mul' output 0 element 17
//    is inf from finite inputs"
// Exceptions whose trap is off are skipped, so a later element may be the
// one reported.
//
// Thread safety: reads the kernel's inputs and outputs; call it from the
// thread that ran the kernel, before the inputs are released.
#ifndef IPUFLOW_CORE_FLOATING_POINT_TRAPS_H_
#define IPUFLOW_CORE_FLOATING_POINT_TRAPS_H_

#include "absl/status/status.h"
#include "core/floating_point.h"
#include "core/kernel.h"

namespace ipuflow {

absl::Status CheckFloatingPointTraps(const FloatingPointBehaviour& fp,
                                     KernelContext& ctx);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_FLOATING_POINT_TRAPS_H_
