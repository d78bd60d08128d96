// Saving and loading graphs: conversion between a Graph (core/graph.h) and
// its GraphDef protocol buffer (core/graph_def.proto), and files holding one.
//
//   RETURN_IF_ERROR(SaveGraph(*scope.graph(), "/tmp/model.pb"));
//   ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, LoadGraph("/tmp/model.pb"));
//   Session session(g.get());
//   Output logits(g->FindNode("logits"), 0);
//
// Import re-adds every node through Graph::AddNode, so the loaded graph is
// validated and shape-inferred exactly like one built in C++: its node ids
// come back in the same order and its Fingerprint() equals the original's.
// Loading needs the ops the file uses to be linked in (e.g. "//ops").
//
// Thread safety: the functions share no state; a Graph being exported must
// not be modified concurrently, and a Graph being imported into is used by
// the calling thread only.
#ifndef IPUFLOW_CORE_GRAPH_DEF_H_
#define IPUFLOW_CORE_GRAPH_DEF_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/graph.h"
#include "core/graph_def.pb.h"

namespace ipuflow {

// The GraphDef version this code writes; files of a newer version are
// rejected rather than misread.
inline constexpr int kGraphDefVersion = 1;

// Exports nodes (in id order), the function library and the collections.
// Fails if an attribute holds a value that cannot be serialised (a resource
// tensor).
absl::StatusOr<GraphDef> ToGraphDef(const Graph& graph);

// Rebuilds `def` in `graph`: functions first (recursively, so node shape
// functions can see them), then every node through Graph::AddNode, then the
// collections. Errors name the node ("Add 'layer/add': ...") and say what is
// wrong: an unknown op, an input naming a node not defined before it, an
// attribute of the wrong type, a tensor whose bytes do not match its shape.
// On error `graph` holds the nodes imported so far and should be discarded.
// REQUIRES: `graph` is empty (no nodes, functions or collections).
absl::Status ImportGraphDef(const GraphDef& def, Graph* graph);

enum class GraphFormat {
  kBinary,  // The protocol buffer wire format: compact and exact.
  kText,    // Protocol buffer text format: readable and diffable.
};

// Writes `graph` to `path` (replacing it). Errors name the path.
absl::Status SaveGraph(const Graph& graph, const std::string& path,
                       GraphFormat format = GraphFormat::kBinary);

// Reads a graph written by SaveGraph (or by hand). The format is chosen by
// extension (".pbtxt" or ".txt": text; ".pb": binary); for any other name
// binary is tried first, then text. Errors name the path.
absl::StatusOr<std::unique_ptr<Graph>> LoadGraph(const std::string& path);

// `def` in text format, for logs and debugging.
std::string GraphDefDebugString(const GraphDef& def);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_GRAPH_DEF_H_
