#include "core/checkpoint/export.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpoint_file.h"
#include "core/graph_def.h"
#include "core/status.h"

namespace ipuflow::checkpoint {
namespace {

// The variable name of each Variable node of `graph`, with its dtype and
// shape (the attributes the Variable op is built with).
std::map<std::string, std::pair<DType, TensorShape>> GraphVariables(
    const Graph& graph) {
  std::map<std::string, std::pair<DType, TensorShape>> out;
  for (const Node* n : graph.collection("variables")) {
    if (!n->has_attr("dtype") || !n->has_attr("shape")) continue;
    const std::string& shared = n->attr<std::string>("shared_name");
    out[shared.empty() ? n->name() : shared] = {n->attr<DType>("dtype"),
                                                n->attr<TensorShape>("shape")};
  }
  return out;
}

}  // namespace

absl::Status ExportModel(const Graph& graph, const Executable& exe,
                         const std::string& path) {
  ASSIGN_OR_RETURN(GraphDef def, ToGraphDef(graph));
  CheckpointContents c;
  if (!def.SerializeToString(c.manifest.mutable_graph_def())) {
    return absl::InternalError(absl::StrCat(
        "ExportModel '", path, "': the GraphDef does not serialise"));
  }
  ASSIGN_OR_RETURN(auto values, exe.ReadVariables(".*"));
  for (const auto& [name, type] : GraphVariables(graph)) {
    auto it = values.find(name);
    if (it == values.end() || it->second.empty() || !it->second[0].valid()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ExportModel '", path, "': variable '", name,
          "' of the graph has no value on the executable's replica 0"));
    }
    TensorEntry* e = c.manifest.add_tensors();
    e->set_name(name);
    e->set_replica(-1);
    c.tensors.push_back(it->second[0]);
  }
  c.manifest.mutable_topology()->set_replicas(1);
  c.manifest.mutable_topology()->set_processes(1);
  return WriteCheckpointFile(path, &c);
}

absl::StatusOr<LoadedModel> LoadModel(const std::string& path) {
  ASSIGN_OR_RETURN(CheckpointContents c, ReadCheckpointFile(path));
  const std::string where = absl::StrCat("LoadModel '", path, "': ");
  if (c.manifest.graph_def().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "no graph in the file (a training checkpoint, not an export)"));
  }
  GraphDef def;
  if (!def.ParseFromString(c.manifest.graph_def())) {
    return absl::DataLossError(
        absl::StrCat(where, "the GraphDef does not parse"));
  }
  LoadedModel m;
  m.graph = std::make_unique<Graph>();
  RETURN_IF_ERROR(ImportGraphDef(def, m.graph.get()));
  const auto vars = GraphVariables(*m.graph);
  for (int i = 0; i < c.manifest.tensors_size(); ++i) {
    const TensorEntry& e = c.manifest.tensors(i);
    const Tensor& t = c.tensors[i];
    auto it = vars.find(e.name());
    if (it == vars.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "variable '", e.name(), "' is not in the file's graph"));
    }
    if (it->second.first != t.dtype() || it->second.second != t.shape()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "variable '", e.name(), "' is ",
                       DTypeName(t.dtype()), t.shape().DebugString(),
                       " in the file and ", DTypeName(it->second.first),
                       it->second.second.DebugString(), " in its graph"));
    }
  }
  m.session = std::make_unique<Session>(m.graph.get());
  for (int i = 0; i < c.manifest.tensors_size(); ++i) {
    const Tensor& t = c.tensors[i];
    ASSIGN_OR_RETURN(auto v,
                     m.session->resources()->LookupOrCreateVariable(
                         c.manifest.tensors(i).name(), t.dtype(), t.shape()));
    RETURN_IF_ERROR(v->Assign(t.Copy()));
  }
  return m;
}

}  // namespace ipuflow::checkpoint
