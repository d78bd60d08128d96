// Compiler phase 5, shapes: every value's dtype and shape for the concrete
// feed shapes. Shapes recorded while building may be partly unknown
// ([?, 784]); running each scheduled node's shape function again on its
// inputs' concrete shapes makes them as defined as the feeds allow.
//
// Input: the spec (feed shapes), the node order and its values.
// Output: dtype and shape by value id. Errors: a shape function's, prefixed
// with the node's name.
#ifndef IPUFLOW_CORE_COMPILER_SHAPES_H_
#define IPUFLOW_CORE_COMPILER_SHAPES_H_

#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/node_order.h"
#include "core/compiler/values.h"
#include "core/dtype.h"
#include "core/tensor_shape.h"

namespace ipuflow::compiler {

struct ValueTypes {
  std::vector<DType> dtypes;        // By value.
  std::vector<TensorShape> shapes;  // By value.
};

absl::StatusOr<ValueTypes> InferShapes(const Graph& graph,
                                       const ProgramSpec& spec,
                                       const NodeOrder& order,
                                       const Values& values);

}  // namespace ipuflow::compiler

#endif  // IPUFLOW_CORE_COMPILER_SHAPES_H_
