// Print: a debugging op that passes x through unchanged (no copy) and, each
// time it runs, writes `message` and a summary of x to stderr:
//
//   Output h = ops::Print(scope, hidden, "hidden: ");
//   // stderr: "hidden: float32[2,3] {0.5, -1, 2, ...}"
//
// `summarize` (default 3) bounds how many values are shown. Print is
// stateful, so it is never folded away; its gradient is the identity. Lines
// from concurrent runs are written whole (one write per line).
#ifndef IPUFLOW_OPS_ARRAY_PRINT_H_
#define IPUFLOW_OPS_ARRAY_PRINT_H_

#include <string>

#include "core/scope.h"

namespace ipuflow::ops {

Output Print(const Scope& scope, Output x, const std::string& message,
             int64_t summarize = 3);

}  // namespace ipuflow::ops

#endif  // IPUFLOW_OPS_ARRAY_PRINT_H_
