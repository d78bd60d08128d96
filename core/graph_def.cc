#include "core/graph_def.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/graph_def_values.h"
#include "core/op_registry.h"
#include "core/status.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"

namespace ipuflow {
namespace {

using graph_def_internal::AttrFromProto;
using graph_def_internal::AttrToProto;

// ---------------------------------------------------------------------------
// Export.

absl::Status NodeToProto(const Node& n, NodeDef* out) {
  out->set_name(n.name());
  out->set_op(n.op());
  for (const Output& in : n.inputs()) out->add_input(in.name());
  for (const Node* c : n.control_inputs()) {
    out->add_input(absl::StrCat("^", c->name()));
  }
  for (const auto& [key, value] : n.attrs()) {
    absl::Status s = AttrToProto(value, &(*out->mutable_attr())[key]);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(n.DebugName(), ": attribute '",
                                                 key, "': ", s.message()));
    }
  }
  if (n.ipu() != -1) out->set_ipu(n.ipu());
  out->set_block(n.block());
  return absl::OkStatus();
}

absl::Status GraphToProto(const Graph& graph, GraphDef* def) {
  def->set_version(kGraphDefVersion);
  for (const Node* n : graph.nodes()) {
    RETURN_IF_ERROR(NodeToProto(*n, def->add_node()));
  }
  for (const auto& [name, fn] : graph.functions()) {
    FunctionDefProto* f = def->add_function();
    f->set_name(name);
    absl::Status s = GraphToProto(*fn->body, f->mutable_body());
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("function '", name, "': ", s.message()));
    }
    for (const Output& a : fn->args) f->add_arg(a.name());
    for (const Output& r : fn->results) f->add_result(r.name());
  }
  for (const auto& [key, nodes] : graph.collections()) {
    CollectionDef* c = def->add_collection();
    c->set_key(key);
    for (const Node* n : nodes) c->add_node(n->name());
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Import.

struct InputRef {
  std::string node;
  int index = 0;
  bool control = false;
};

// "node:index", "node" (index 0) or "^node" (a control input).
absl::StatusOr<InputRef> ParseInputRef(const std::string& s) {
  InputRef ref;
  absl::string_view rest = s;
  if (absl::ConsumePrefix(&rest, "^")) {
    ref.control = true;
    ref.node = std::string(rest);
  } else {
    const size_t colon = rest.rfind(':');
    absl::string_view digits =
        colon == absl::string_view::npos ? "" : rest.substr(colon + 1);
    if (!digits.empty() &&
        std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit)) {
      if (!absl::SimpleAtoi(digits, &ref.index)) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad output index in '", s, "'"));
      }
      rest = rest.substr(0, colon);
    }
    ref.node = std::string(rest);
  }
  if (ref.node.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", s,
                     "' names no node (expected \"node:index\" or "
                     "\"^node\")"));
  }
  return ref;
}

// The node `ref` names, already in `graph`; `what` says who refers to it.
absl::StatusOr<Node*> FindRef(const Graph& graph, const InputRef& ref,
                              const std::string& s, const std::string& what) {
  Node* n = graph.FindNode(ref.node);
  if (n == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", s, "' names node '", ref.node,
                     "', which is not defined before it"));
  }
  if (!ref.control && ref.index >= n->num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", s, "' names output ", ref.index, " of ", n->DebugName(),
        ", which has ", n->num_outputs(), " output(s)"));
  }
  return n;
}

// A data output ("node:index") of a node of `graph`.
absl::StatusOr<Output> ResolveOutput(const Graph& graph, const std::string& s,
                                     const std::string& what) {
  ASSIGN_OR_RETURN(InputRef ref, ParseInputRef(s));
  if (ref.control) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", s, "' must be a data output, not \"^node\""));
  }
  ASSIGN_OR_RETURN(Node * n, FindRef(graph, ref, s, what));
  return Output(n, ref.index);
}

// Decodes the attributes of `nd`; Graph::AddNode checks them against the
// op's declarations.
absl::Status ImportAttrs(const NodeDef& nd, AttrMap* out) {
  for (const auto& [key, proto] : nd.attr()) {
    absl::StatusOr<AttrValue> v = AttrFromProto(proto);
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute '", key, "': ", v.status().message()));
    }
    (*out)[key] = *std::move(v);
  }
  return absl::OkStatus();
}

// Errors of ImportNode not produced by Graph::AddNode (which names the node
// itself) get this prefix.
absl::Status NodeError(const NodeDef& nd, const absl::Status& s) {
  return absl::Status(
      s.code(), absl::StrCat(nd.op(), " '", nd.name(), "': ", s.message()));
}

absl::Status ImportInputs(const NodeDef& nd, const Graph& graph,
                          NodeSpec* spec) {
  for (int i = 0; i < nd.input_size(); ++i) {
    const std::string& s = nd.input(i);
    ASSIGN_OR_RETURN(InputRef ref, ParseInputRef(s));
    ASSIGN_OR_RETURN(Node * n,
                     FindRef(graph, ref, s, absl::StrCat("input ", i)));
    if (ref.control) {
      spec->control_inputs.push_back(n);
    } else if (!spec->control_inputs.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("data input ", i, " '", s,
                       "' follows a control input \"^...\" "
                       "(control inputs come last)"));
    } else {
      spec->inputs.emplace_back(n, ref.index);
    }
  }
  return absl::OkStatus();
}

absl::Status ImportNode(const NodeDef& nd, int position, Graph* graph) {
  if (nd.name().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("node #", position, " (op '", nd.op(), "') has no name"));
  }
  absl::StatusOr<const OpDef*> def = OpRegistry::Global()->Find(nd.op());
  if (!def.ok()) return NodeError(nd, def.status());
  NodeSpec spec;
  spec.op = nd.op();
  spec.name = nd.name();
  absl::Status s = ImportInputs(nd, *graph, &spec);
  if (s.ok()) s = ImportAttrs(nd, &spec.attrs);
  if (!s.ok()) return NodeError(nd, s);
  spec.ipu = nd.has_ipu() ? nd.ipu() : -1;
  spec.block = nd.block();
  return graph->AddNode(std::move(spec)).status();
}

absl::Status ImportFunction(const FunctionDefProto& f, Graph* graph) {
  if (f.name().empty()) {
    return absl::InvalidArgumentError("a function has no name");
  }
  auto fn = std::make_unique<Function>();
  fn->name = f.name();
  fn->body = std::make_unique<Graph>();
  absl::Status s = ImportGraphDef(f.body(), fn->body.get());
  for (int i = 0; s.ok() && i < f.arg_size(); ++i) {
    absl::StatusOr<Output> a =
        ResolveOutput(*fn->body, f.arg(i), absl::StrCat("arg ", i));
    s = a.status();
    if (a.ok()) fn->args.push_back(*a);
  }
  for (int i = 0; s.ok() && i < f.result_size(); ++i) {
    absl::StatusOr<Output> r =
        ResolveOutput(*fn->body, f.result(i), absl::StrCat("result ", i));
    s = r.status();
    if (r.ok()) fn->results.push_back(*r);
  }
  if (!s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("function '", f.name(), "': ", s.message()));
  }
  return graph->AddFunction(std::move(fn));
}

absl::Status ImportCollection(const CollectionDef& c, Graph* graph) {
  for (const std::string& name : c.node()) {
    Node* n = graph->FindNode(name);
    if (n == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("collection '", c.key(), "' names node '", name,
                       "', which is not in the graph"));
    }
    graph->AddToCollection(c.key(), n);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Files.

absl::Status PathError(const std::string& path, const absl::Status& s) {
  return absl::Status(s.code(),
                      absl::StrCat("graph file '", path, "': ", s.message()));
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::ErrnoToStatus(errno, "cannot open");
  std::string bytes;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, got);
  const bool failed = std::ferror(f);
  const int err = errno;
  std::fclose(f);
  if (failed) return absl::ErrnoToStatus(err, "cannot read");
  return bytes;
}

absl::Status WriteFile(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::ErrnoToStatus(errno, "cannot create");
  const bool wrote =
      std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;  // Flushes: may fail too.
  if (!wrote) return absl::ErrnoToStatus(write_errno, "cannot write");
  if (!closed) return absl::ErrnoToStatus(errno, "cannot write");
  return absl::OkStatus();
}

absl::StatusOr<std::string> SerializeBinary(const GraphDef& def) {
  const size_t size = def.ByteSizeLong();
  if (size > static_cast<size_t>(INT_MAX)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the GraphDef is ", size,
                     " bytes, over protobuf's 2 GiB limit "
                     "(keep large weights in variables, not constants)"));
  }
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // Stable map order.
    def.SerializeWithCachedSizes(&coded);
  }
  return bytes;
}

// Keeps the first text-format parse error with its position.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error_.empty()) {
      error_ = absl::StrCat("line ", line + 1, ", column ", column + 1, ": ",
                            message);
    }
  }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

absl::Status ParseText(const std::string& bytes, GraphDef* def) {
  FirstError errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(bytes, def)) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a text GraphDef: ", errors.error()));
  }
  return absl::OkStatus();
}

// A binary parse that left unknown top-level fields was most likely not a
// GraphDef at all (text often decodes as fields of a random number).
bool ParseBinary(const std::string& bytes, GraphDef* def) {
  return def->ParseFromString(bytes) &&
         def->GetReflection()->GetUnknownFields(*def).empty();
}

absl::Status ParseGraphFile(const std::string& path, const std::string& bytes,
                            GraphDef* def) {
  if (absl::EndsWith(path, ".pbtxt") || absl::EndsWith(path, ".txt")) {
    return ParseText(bytes, def);
  }
  if (ParseBinary(bytes, def)) return absl::OkStatus();
  if (absl::EndsWith(path, ".pb")) {
    return absl::DataLossError(
        "not a binary GraphDef (corrupted or truncated?)");
  }
  def->Clear();
  absl::Status text = ParseText(bytes, def);
  if (text.ok()) return text;
  return absl::DataLossError(absl::StrCat(
      "neither a binary GraphDef nor a text one (", text.message(), ")"));
}

}  // namespace

absl::StatusOr<GraphDef> ToGraphDef(const Graph& graph) {
  GraphDef def;
  RETURN_IF_ERROR(GraphToProto(graph, &def));
  return def;
}

absl::Status ImportGraphDef(const GraphDef& def, Graph* graph) {
  if (graph->num_nodes() != 0 || !graph->functions().empty() ||
      !graph->collections().empty()) {
    return absl::FailedPreconditionError("ImportGraphDef needs an empty graph");
  }
  if (def.version() < 0 || def.version() > kGraphDefVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("GraphDef version ", def.version(),
                     " is not supported (this build "
                     "reads versions up to ",
                     kGraphDefVersion, ")"));
  }
  for (const FunctionDefProto& f : def.function()) {
    RETURN_IF_ERROR(ImportFunction(f, graph));
  }
  for (int i = 0; i < def.node_size(); ++i) {
    RETURN_IF_ERROR(ImportNode(def.node(i), i, graph));
  }
  for (const CollectionDef& c : def.collection()) {
    RETURN_IF_ERROR(ImportCollection(c, graph));
  }
  return absl::OkStatus();
}

absl::Status SaveGraph(const Graph& graph, const std::string& path,
                       GraphFormat format) {
  absl::StatusOr<GraphDef> def = ToGraphDef(graph);
  if (!def.ok()) return PathError(path, def.status());
  std::string bytes;
  if (format == GraphFormat::kText) {
    bytes = GraphDefDebugString(*def);
  } else {
    absl::StatusOr<std::string> b = SerializeBinary(*def);
    if (!b.ok()) return PathError(path, b.status());
    bytes = *std::move(b);
  }
  absl::Status s = WriteFile(path, bytes);
  return s.ok() ? s : PathError(path, s);
}

absl::StatusOr<std::unique_ptr<Graph>> LoadGraph(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return PathError(path, bytes.status());
  GraphDef def;
  absl::Status s = ParseGraphFile(path, *bytes, &def);
  if (!s.ok()) return PathError(path, s);
  auto graph = std::make_unique<Graph>();
  s = ImportGraphDef(def, graph.get());
  if (!s.ok()) return PathError(path, s);
  return graph;
}

std::string GraphDefDebugString(const GraphDef& def) {
  std::string out;
  google::protobuf::TextFormat::PrintToString(def, &out);
  return out;
}

}  // namespace ipuflow
