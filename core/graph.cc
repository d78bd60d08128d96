#include "core/graph.h"

#include <cstdio>
#include <cstdlib>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "core/op_registry.h"

namespace ipuflow {

DType Output::dtype() const { return node->output_dtype(index); }
const TensorShape& Output::shape() const { return node->output_shape(index); }
std::string Output::name() const {
  return absl::StrCat(node->name(), ":", index);
}
bool Output::operator<(const Output& o) const {
  const int a = node ? node->id() : -1, b = o.node ? o.node->id() : -1;
  return a != b ? a < b : index < o.index;
}

void Node::AttrTypeError(const std::string& name, const char* type) const {
  auto it = attrs_.find(name);
  std::fprintf(
      stderr,
      "%s: attribute '%s' read as %s but it is %s (the op's "
      "registration must declare every attribute its code reads)\n",
      DebugName().c_str(), name.c_str(), type,
      it == attrs_.end() ? "absent" : it->second.DebugString().c_str());
  std::abort();
}

std::string Node::DebugName() const {
  return absl::StrCat(op_, " '", name_, "'");
}

Graph::Graph() = default;
Graph::~Graph() = default;

Node* Graph::FindNode(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (const auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::string Graph::UniqueName(const std::string& base) {
  if (used_names_.insert(base).second) return base;
  int& next = name_counters_[base];
  for (;;) {
    std::string candidate = absl::StrCat(base, "_", ++next);
    if (used_names_.insert(candidate).second) return candidate;
  }
}

absl::StatusOr<Node*> Graph::AddNode(NodeSpec spec) {
  auto prefix = [&spec]() {
    return absl::StrCat(spec.op, " '", spec.name, "': ");
  };
  absl::StatusOr<const OpDef*> def_or = OpRegistry::Global()->Find(spec.op);
  if (!def_or.ok()) {
    return absl::NotFoundError(absl::StrCat("cannot add node '", spec.name,
                                            "': ", def_or.status().message()));
  }
  const OpDef* def = *def_or;
  if (spec.name.empty()) spec.name = UniqueName(spec.op);
  if (by_name_.count(spec.name)) {
    return absl::AlreadyExistsError(
        absl::StrCat(prefix(), "a node with this name already exists"));
  }
  if (spec.ipu < -1 || spec.ipu >= kMaxShards) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix(), "placed on IPU ", spec.ipu, "; a graph uses IPUs [0, ",
        kMaxShards, ") (or -1: unplaced)"));
  }
  const int declared = static_cast<int>(def->input_names().size());
  const int given = static_cast<int>(spec.inputs.size());
  const int required = def->variadic_input() ? declared - 1 : declared;
  if (def->variadic_input() ? given < required : given != declared) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix(), "expects ", def->variadic_input() ? "at least " : "",
        required, " input(s), got ", given));
  }
  std::vector<DType> in_dtypes;
  std::vector<TensorShape> in_shapes;
  std::vector<const Tensor*> in_constants;
  for (int i = 0; i < given; ++i) {
    const Output& in = spec.inputs[i];
    if (in.node == nullptr || in.node->graph() != this || in.index < 0 ||
        in.index >= in.node->num_outputs()) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix(), "input ", i, " is not an output of a node of this graph"));
    }
    in_dtypes.push_back(in.dtype());
    in_shapes.push_back(in.shape());
    const ConstantValueFn& constant = in.node->op_def().constant_value();
    in_constants.push_back(constant ? &constant(*in.node) : nullptr);
  }
  for (Node* c : spec.control_inputs) {
    if (c == nullptr || c->graph() != this) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix(), "a control input is not a node of this graph"));
    }
  }
  if (absl::Status s = def->CheckAttrs(&spec.attrs); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(prefix(), s.message()));
  }
  ShapeContext ctx(def, spec.name, &in_dtypes, &in_shapes, &in_constants,
                   &spec.attrs, this);
  if (def->shape_fn()) {
    absl::Status s = def->shape_fn()(ctx);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(prefix(), s.message()));
    }
  }
  // Shape functions compute sizes from attributes and inputs: refuse any
  // output that is not a valid shape (wraps int64, over 2^48 elements).
  for (size_t i = 0; i < ctx.output_dtypes().size(); ++i) {
    if (ctx.output_dtypes()[i] == DType::kInvalid) {
      return absl::InternalError(absl::StrCat(
          prefix(), "the shape function set no dtype for output ", i));
    }
    absl::Status s = ValidateShape(ctx.output_shapes()[i]);
    if (!s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix(), "output ", i, ": ", s.message()));
    }
  }
  auto node = std::make_unique<Node>();
  node->id_ = static_cast<int>(nodes_.size());
  node->name_ = std::move(spec.name);
  node->op_ = def->name();
  node->op_def_ = def;
  node->graph_ = this;
  node->inputs_ = std::move(spec.inputs);
  node->control_inputs_ = std::move(spec.control_inputs);
  node->attrs_ = std::move(spec.attrs);
  node->output_dtypes_ = ctx.output_dtypes();
  node->output_shapes_ = ctx.output_shapes();
  node->ipu_ = spec.ipu;
  node->block_ = std::move(spec.block);
  Node* raw = node.get();
  by_name_[raw->name_] = raw;
  used_names_.insert(raw->name_);
  nodes_.push_back(std::move(node));
  return raw;
}

absl::Status Graph::AddFunction(std::unique_ptr<Function> fn) {
  if (functions_.count(fn->name)) {
    return absl::AlreadyExistsError(
        absl::StrCat("function '", fn->name, "' already exists"));
  }
  functions_[fn->name] = std::move(fn);
  return absl::OkStatus();
}

const Function* Graph::FindFunction(const std::string& name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : it->second.get();
}

void Graph::AddToCollection(const std::string& key, Node* node) {
  collections_[key].push_back(node);
}

const std::vector<Node*>& Graph::collection(const std::string& key) const {
  static const std::vector<Node*>* empty = new std::vector<Node*>();
  auto it = collections_.find(key);
  return it == collections_.end() ? *empty : it->second;
}

std::string Graph::Fingerprint() const {
  if (fingerprint_nodes_ == num_nodes() &&
      fingerprint_functions_ == static_cast<int>(functions_.size())) {
    return fingerprint_;
  }
  std::string fp;
  for (const auto& n : nodes_) {
    absl::StrAppend(&fp, n->name_, "=", n->op_, "(");
    for (const Output& in : n->inputs_)
      absl::StrAppend(&fp, in.node->id_, ":", in.index, ",");
    for (const Node* c : n->control_inputs_)
      absl::StrAppend(&fp, "^", c->id_, ",");
    absl::StrAppend(&fp, ")@", n->ipu_, "{");
    for (const auto& [k, v] : n->attrs_) {
      absl::StrAppend(&fp, k, "=");
      v.AppendFingerprint(&fp);
    }
    absl::StrAppend(&fp, "}\n");
  }
  for (const auto& [name, fn] : functions_) {
    absl::StrAppend(&fp, "fn ", name, "{", fn->body->Fingerprint(), "}->(");
    for (const Output& r : fn->results) absl::StrAppend(&fp, r.name(), ",");
    absl::StrAppend(&fp, ")\n");
  }
  const size_t h1 = absl::Hash<std::string>()(fp);
  const size_t h2 = absl::Hash<std::pair<std::string, int>>()({fp, 0x1b3});
  fingerprint_ = absl::StrCat(absl::Hex(h1, absl::kZeroPad16),
                              absl::Hex(h2, absl::kZeroPad16), "-", fp.size());
  fingerprint_nodes_ = num_nodes();
  fingerprint_functions_ = static_cast<int>(functions_.size());
  return fingerprint_;
}

}  // namespace ipuflow
