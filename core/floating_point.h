// FloatingPointBehaviour: how an IPU rounds and traps floating-point results,
// as IPUConfig.floating_point_behaviour sets it (TensorFlow IPU guide,
// "Floating point behaviour"; PopTorch's Precision options). A device program
// sees it through RunEnv::floating_point; kernels that produce float16 round
// through RoundToHalf (core/half_rounding.h), which applies it.
#ifndef IPUFLOW_CORE_FLOATING_POINT_H_
#define IPUFLOW_CORE_FLOATING_POINT_H_

#include <cstdint>

namespace ipuflow {

// IPUConfig.floating_point_behaviour.esr.
enum class StochasticRounding {
  kOff,                  // Round to nearest even (IEEE), the default.
  kOn,                   // Every float32 -> float16 rounding is stochastic.
  kReplicaIdenticalOnly  // Only for values identical on every replica.
};

struct FloatingPointBehaviour {
  bool inv = false;   // Trap invalid operations (a NaN from non-NaN inputs).
  bool div0 = false;  // Trap division by zero.
  bool oflo = false;  // Trap overflow (an infinity from finite inputs).
  // On float16 overflow: true gives NaN, false saturates to +-65504.
  bool nanoo = false;
  StochasticRounding esr = StochasticRounding::kOff;
  // Keys the stochastic-rounding stream (with replica, tensor, element and
  // run), so runs are reproducible.
  uint64_t seed = 0;
  // Changes when the seed is reset (IPUSystem::ResetSeed): programs then
  // count their runs from zero again, so the runs after a reset round as
  // the runs after the first one did.
  uint64_t seed_epoch = 0;

  bool any_trap() const { return inv || div0 || oflo; }
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_FLOATING_POINT_H_
