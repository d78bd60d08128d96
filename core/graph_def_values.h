// How a node's attribute values are written in a GraphDef (core/
// graph_def.proto, TensorFlow's AttrValue): dtypes, shapes, tensors and
// their lists, both ways. Reading checks what a file may get wrong (an unknown
// DataType, a negative or overflowing shape, content of the wrong size)
// and says which value is at fault. Used by core/graph_def.cc only.
#ifndef IPUFLOW_CORE_GRAPH_DEF_VALUES_H_
#define IPUFLOW_CORE_GRAPH_DEF_VALUES_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/attr_value.h"
#include "core/graph_def.pb.h"

namespace ipuflow::graph_def_internal {

// Fills `out` with the alternative `v` holds (none for an empty value).
absl::Status AttrToProto(const AttrValue& v, AttrValueProto* out);
absl::StatusOr<AttrValue> AttrFromProto(const AttrValueProto& p);

}  // namespace ipuflow::graph_def_internal

#endif  // IPUFLOW_CORE_GRAPH_DEF_VALUES_H_
