// Fuzz target: a binary GraphDef (the bytes of a .pb file) through import.
// Import must refuse anything malformed with a status: no crash, no
// allocation of what a shape announces, no unbounded work.
#include "core/graph_def.h"
#include "core/status.h"
#include "core/testing/fuzz.h"

IPUFLOW_FUZZ_TARGET(graph_def) {
  ipuflow::GraphDef def;
  if (!def.ParseFromArray(data, static_cast<int>(size))) return;
  ipuflow::Graph graph;
  if (!ipuflow::ImportGraphDef(def, &graph).ok()) return;
  // What imported exports again (only resource tensors cannot, and import
  // refuses those).
  IPU_CHECK(ipuflow::ToGraphDef(graph).ok());
}
