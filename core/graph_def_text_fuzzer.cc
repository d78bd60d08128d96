// Fuzz target: a text GraphDef (a .pbtxt file) through LoadGraph, which
// parses the text and imports it.
#include "core/graph_def.h"
#include "core/status.h"
#include "core/testing/fuzz.h"

IPUFLOW_FUZZ_TARGET(graph_def_text) {
  const std::string path = ipuflow::fuzzing::WriteInput(data, size, ".pbtxt");
  absl::StatusOr<std::unique_ptr<ipuflow::Graph>> graph =
      ipuflow::LoadGraph(path);
  if (graph.ok()) IPU_CHECK(ipuflow::ToGraphDef(**graph).ok());
}
