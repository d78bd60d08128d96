// Export of a trained model for inference: its graph (GraphDef,
// core/graph_def.h) and the values of its variables in one checkpoint file
// (checkpoint_file.h), which another program loads into a host Session.
//
//   // The training program, after training:
//   RETURN_IF_ERROR(ExportModel(*scope.graph(), *exe, "/models/m.ipuckpt"));
//   // Another program:
//   ASSIGN_OR_RETURN(LoadedModel m, LoadModel("/models/m.ipuckpt"));
//   Output logits(m.graph->FindNode("logits"), 0);
//   RETURN_IF_ERROR(m.session->Run({{x, images}}, {logits}, &out));
//
// What is exported: the variables of the graph's Variable nodes, replica
// 0's values (inference runs one replica), optimizer slots included (they
// cost disk, not correctness). Loading imports the graph (its ops must be
// linked in: "//ops") and assigns every variable; the session's variables
// are initialised, so Session::Initialize must not run (it would draw the
// initial values again).
//
// Thread safety: functions share no state.
#ifndef IPUFLOW_CORE_CHECKPOINT_EXPORT_H_
#define IPUFLOW_CORE_CHECKPOINT_EXPORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "core/ipu/executable.h"
#include "core/session.h"

namespace ipuflow::checkpoint {

// Writes `graph` and the values of its variables on `exe`'s replica 0 to
// `path` (atomically, as every checkpoint). Errors name the variable or
// the attribute that cannot be exported.
absl::Status ExportModel(const Graph& graph, const Executable& exe,
                         const std::string& path);

struct LoadedModel {
  std::unique_ptr<Graph> graph;
  std::unique_ptr<Session> session;  // On `graph`, variables assigned.
};

// Reads a file ExportModel wrote: every check of ReadCheckpointFile, then
// InvalidArgument when it holds no graph, or a variable the graph does not
// have or has with another dtype or shape (naming it and both values).
absl::StatusOr<LoadedModel> LoadModel(const std::string& path);

}  // namespace ipuflow::checkpoint

#endif  // IPUFLOW_CORE_CHECKPOINT_EXPORT_H_
