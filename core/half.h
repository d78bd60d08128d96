// half: IEEE binary16 values (Eigen::half), complete with arithmetic and
// conversions. core/dtype.h only names the type; a file that computes with
// half values, or instantiates a kernel for float16 (IPUFLOW_SWITCH_FLOAT and
// the other switches), includes this header.
//
//   half h(1.5f);
//   float f = static_cast<float>(h * h);  // 2.25
#ifndef IPUFLOW_CORE_HALF_H_
#define IPUFLOW_CORE_HALF_H_

#include "Eigen/Core"
#include "core/dtype.h"

#endif  // IPUFLOW_CORE_HALF_H_
