#include "core/graph_def.h"

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/half.h"
#include "core/scope.h"
#include "core/session.h"
#include "core/testing/op_test.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "ops/array/const.h"
#include "ops/array/identity.h"
#include "ops/array/reshape.h"
#include "ops/math/add.h"
#include "ops/math/add_n.h"
#include "ops/math/mat_mul.h"
#include "ops/state/variable.h"

namespace ipuflow {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A graph touching every dtype, placement, control dependencies, a variable
// and a collection; `fetches` are the outputs compared after a round trip.
struct Model {
  Scope scope = Scope::NewRootScope();
  Output x;
  std::vector<Output> fetches;
};

Model BuildModel() {
  Model m;
  Scope s = m.scope;
  m.x = ops::Placeholder(s.WithOpName("x"), DType::kFloat32, {-1, 4});
  // -0, a denormal and a value with no short decimal form: bits must survive.
  Output w =
      ops::Const<float>(s.WithOpName("w"), {-0.0f, 1e-40f, 0.1f, 3.0f}, {4});
  Scope stage = s.NewSubScope("stage1").WithIpu(1).WithBlock("block1");
  Output y = ops::Add(stage, m.x, w);
  Output z = ops::AddN(stage, {y, y, m.x});
  Output r = ops::Reshape(stage, z, {-1, 2});
  ops::VariableHandle v = ops::Variable(
      s.WithOpName("v"),
      ops::Const<float>(s, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {4, 3}));
  Output mm = ops::MatMul(stage.WithIpu(2), y, v.value);
  Output ints = ops::Add(s, ops::Const<int32_t>(s, {1, -2, 3}, {3}),
                         ops::Const(s, Tensor::Scalar<int32_t>(5)));
  Output i64 =
      ops::Identity(s, ops::Const<int64_t>(s, {int64_t{1} << 40, -7}, {2}));
  Output halves =
      ops::Add(s, ops::Const<half>(s, {half(1.5f), half(-0.25f)}, {2}),
               ops::Const<half>(s, {half(0.125f), half(65504.0f)}, {2}));
  Output bools =
      ops::Identity(s, ops::Const<bool>(s, {true, false, true}, {3}));
  Output out = ops::Identity(
      s.WithOpName("out").WithControlDependencies({ints.node, w.node}), r);
  s.graph()->AddToCollection("outputs", out.node);
  s.graph()->AddToCollection("outputs", mm.node);
  m.fetches = {r, mm, ints, i64, halves, bools, out};
  return m;
}

FeedList Feeds(const Model& m) {
  return {{m.x, testing::RandomTensor({3, 4}, -2, 2, /*seed=*/3)}};
}

// The same feeds and fetches, by name, in `g`.
std::vector<Tensor> RunGraph(const Graph& g, const Model& m) {
  auto in = [&g](const Output& o) {
    Node* n = g.FindNode(o.node->name());
    EXPECT_NE(n, nullptr) << o.name();
    return Output(n, o.index);
  };
  FeedList feeds;
  for (const auto& [o, t] : Feeds(m)) feeds.emplace_back(in(o), t);
  std::vector<Output> fetches;
  for (const Output& o : m.fetches) fetches.push_back(in(o));
  Session session(&g);
  std::vector<Tensor> out;
  absl::Status s = session.Initialize();
  if (s.ok()) s = session.Run(feeds, fetches, &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void ExpectBitIdentical(const std::vector<Tensor>& a,
                        const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].dtype(), b[i].dtype()) << i;
    ASSERT_EQ(a[i].shape(), b[i].shape()) << i;
    EXPECT_EQ(0,
              std::memcmp(a[i].raw_data(), b[i].raw_data(), a[i].TotalBytes()))
        << i << ": " << a[i].DebugString() << " vs " << b[i].DebugString();
  }
}

// Same ids, names, ops, inputs, placement, inferred shapes and collections.
void ExpectSameStructure(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  for (int i = 0; i < a.num_nodes(); ++i) {
    const Node& x = *a.node(i);
    const Node& y = *b.node(i);
    EXPECT_EQ(y.id(), i);
    EXPECT_EQ(x.name(), y.name());
    EXPECT_EQ(x.op(), y.op());
    EXPECT_EQ(x.ipu(), y.ipu()) << x.name();
    EXPECT_EQ(x.block(), y.block()) << x.name();
    ASSERT_EQ(x.num_outputs(), y.num_outputs());
    for (int o = 0; o < x.num_outputs(); ++o) {
      EXPECT_EQ(x.output_dtype(o), y.output_dtype(o));
      EXPECT_EQ(x.output_shape(o), y.output_shape(o)) << x.name();
    }
    ASSERT_EQ(x.control_inputs().size(), y.control_inputs().size());
    for (size_t c = 0; c < x.control_inputs().size(); ++c) {
      EXPECT_EQ(x.control_inputs()[c]->id(), y.control_inputs()[c]->id());
    }
  }
  ASSERT_EQ(a.collections().size(), b.collections().size());
  for (const auto& [key, nodes] : a.collections()) {
    const std::vector<Node*>& other = b.collection(key);
    ASSERT_EQ(nodes.size(), other.size()) << key;
    for (size_t i = 0; i < nodes.size(); ++i) {
      EXPECT_EQ(nodes[i]->id(), other[i]->id()) << key;
    }
  }
  EXPECT_EQ(a.Fingerprint(), b.Fingerprint());
}

void ExpectRoundTrip(const std::string& file, GraphFormat format) {
  Model m = BuildModel();
  ASSERT_TRUE(m.scope.ok()) << m.scope.status();
  const std::string path = TempPath(file);
  ASSERT_TRUE(SaveGraph(*m.scope.graph(), path, format).ok());
  absl::StatusOr<std::unique_ptr<Graph>> loaded = LoadGraph(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameStructure(*m.scope.graph(), **loaded);
  ExpectBitIdentical(RunGraph(*m.scope.graph(), m), RunGraph(**loaded, m));
}

TEST(GraphDefTest, BinaryFileRoundTrip) {
  ExpectRoundTrip("model.pb", GraphFormat::kBinary);
}

TEST(GraphDefTest, TextFileRoundTrip) {
  ExpectRoundTrip("model.pbtxt", GraphFormat::kText);
}

TEST(GraphDefTest, FormatDetectedWithoutKnownExtension) {
  ExpectRoundTrip("model_binary.graph", GraphFormat::kBinary);
  ExpectRoundTrip("model_text.graph", GraphFormat::kText);
}

TEST(GraphDefTest, TextFormatIsReadable) {
  Model m = BuildModel();
  absl::StatusOr<GraphDef> def = ToGraphDef(*m.scope.graph());
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->version(), kGraphDefVersion);
  const std::string text = GraphDefDebugString(*def);
  EXPECT_THAT(text, HasSubstr("name: \"stage1/Add\""));
  EXPECT_THAT(text, HasSubstr("input: \"x:0\""));
  EXPECT_THAT(text, HasSubstr("input: \"^w\""));
  EXPECT_THAT(text, HasSubstr("ipu: 1"));
  EXPECT_THAT(text, HasSubstr("block: \"block1\""));
  EXPECT_THAT(text, HasSubstr("dim: -1"));
  EXPECT_THAT(text, HasSubstr("type: DT_FLOAT"));
  EXPECT_THAT(text, HasSubstr("key: \"outputs\""));
  // Unplaced nodes carry no ipu field.
  EXPECT_EQ(def->node(0).name(), "x");
  EXPECT_FALSE(def->node(0).has_ipu());
}

TEST(GraphDefTest, SavingIsDeterministic) {
  Model a = BuildModel(), b = BuildModel();
  const std::string pa = TempPath("det_a.pb"), pb = TempPath("det_b.pb");
  ASSERT_TRUE(SaveGraph(*a.scope.graph(), pa).ok());
  ASSERT_TRUE(SaveGraph(*b.scope.graph(), pb).ok());
  EXPECT_EQ(ReadBytes(pa), ReadBytes(pb));
}

// Every AttrValue alternative, including empty lists (which keep their type)
// and an empty value. Annotations (undeclared attributes, named '_...')
// are kept as they are.
TEST(GraphDefTest, EveryAttrValueAlternativeRoundTrips) {
  Graph g;
  NodeSpec spec{"Placeholder", "p"};
  spec.attrs = {
      {"dtype", DType::kFloat16},
      {"shape", TensorShape({-1, 3})},
      {"_a_int", -(int64_t{1} << 50)},
      {"_a_float", 0.1f},
      {"_a_bool", true},
      {"_a_string", std::string("bytes\0\xff", 7)},
      {"_a_tensor", Tensor::FromVector<int64_t>({}, {0, 2})},
      {"_a_ints", std::vector<int64_t>{1, -2}},
      {"_a_floats", std::vector<float>{1.5f, -0.0f}},
      {"_a_dtypes", std::vector<DType>{DType::kBool, DType::kInt64}},
      {"_a_shapes", std::vector<TensorShape>{{}, {2, -1}}},
      {"_a_strings", std::vector<std::string>{"", "b"}},
      {"_e_ints", std::vector<int64_t>{}},
      {"_e_floats", std::vector<float>{}},
      {"_e_dtypes", std::vector<DType>{}},
      {"_e_shapes", std::vector<TensorShape>{}},
      {"_e_strings", std::vector<std::string>{}},
      {"_empty", AttrValue()},
  };
  ASSERT_TRUE(g.AddNode(spec).ok());
  for (GraphFormat format : {GraphFormat::kBinary, GraphFormat::kText}) {
    const std::string path =
        TempPath(format == GraphFormat::kText ? "attrs.pbtxt" : "attrs.pb");
    ASSERT_TRUE(SaveGraph(g, path, format).ok());
    absl::StatusOr<std::unique_ptr<Graph>> loaded = LoadGraph(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const AttrMap& want = g.node(0)->attrs();
    const AttrMap& got = (*loaded)->node(0)->attrs();
    ASSERT_EQ(want.size(), got.size());
    for (const auto& [key, value] : want) {
      ASSERT_TRUE(got.count(key)) << key;
      EXPECT_EQ(got.at(key).value().index(), value.value().index()) << key;
      EXPECT_EQ(got.at(key).DebugString(), value.DebugString()) << key;
    }
    EXPECT_EQ(*got.at("_a_string").get<std::string>(),
              std::string("bytes\0\xff", 7));
    EXPECT_EQ(got.at("_a_tensor").get<Tensor>()->shape(), TensorShape({0, 2}));
    EXPECT_EQ(g.Fingerprint(), (*loaded)->Fingerprint());
  }
}

TEST(GraphDefTest, FunctionsRoundTripRecursively) {
  Graph g;
  auto fn = std::make_unique<Function>();
  fn->name = "double_it";
  fn->body = std::make_unique<Graph>();
  Node* a = *fn->body->AddNode(
      {"Placeholder",
       "a",
       {},
       {{"dtype", DType::kFloat32}, {"shape", TensorShape({2})}}});
  Node* sum = *fn->body->AddNode({"Add", "sum", {Output(a), Output(a)}});
  fn->args = {Output(a)};
  fn->results = {Output(sum)};
  auto inner = std::make_unique<Function>();
  inner->name = "inner";
  inner->body = std::make_unique<Graph>();
  Node* b = *inner->body->AddNode(
      {"Placeholder",
       "b",
       {},
       {{"dtype", DType::kInt32}, {"shape", TensorShape()}}});
  inner->args = inner->results = {Output(b)};
  ASSERT_TRUE(fn->body->AddFunction(std::move(inner)).ok());
  ASSERT_TRUE(g.AddFunction(std::move(fn)).ok());

  absl::StatusOr<GraphDef> def = ToGraphDef(g);
  ASSERT_TRUE(def.ok()) << def.status();
  Graph back;
  ASSERT_TRUE(ImportGraphDef(*def, &back).ok());
  const Function* f = back.FindFunction("double_it");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->args[0].node->name(), "a");
  EXPECT_EQ(f->results[0].node->name(), "sum");
  EXPECT_EQ(f->results[0].shape(), TensorShape({2}));
  ASSERT_NE(f->body->FindFunction("inner"), nullptr);
  EXPECT_EQ(g.Fingerprint(), back.Fingerprint());
}

// ---------------------------------------------------------------------------
// Errors.

GraphDef ParseText(const std::string& text) {
  GraphDef def;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &def));
  return def;
}

absl::Status Import(const std::string& text) {
  Graph g;
  return ImportGraphDef(ParseText(text), &g);
}

constexpr char kPlaceholder[] = R"pb(
  node {
    name: "x"
    op: "Placeholder"
    attr {
      key: "dtype"
      value { type: DT_FLOAT }
    }
    attr {
      key: "shape"
      value { shape { dim: 2 } }
    }
  }
)pb";

TEST(GraphDefErrorTest, HandWrittenTextImports) {
  absl::Status s = Import(absl::StrCat(
      kPlaceholder,
      R"pb(node { name: "y" op: "Identity" input: "x" ipu: 0 })pb"));
  EXPECT_TRUE(s.ok()) << s;
}

TEST(GraphDefErrorTest, CorruptedBinaryFile) {
  const std::string path = TempPath("corrupt.pb");
  WriteBytes(path, "\xff\xff\xff\xff garbage \x01\x02");
  absl::StatusOr<std::unique_ptr<Graph>> g = LoadGraph(path);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(g.status().message(), HasSubstr(path));
}

TEST(GraphDefErrorTest, TruncatedBinaryFile) {
  Model m = BuildModel();
  const std::string path = TempPath("truncated.pb");
  ASSERT_TRUE(SaveGraph(*m.scope.graph(), path).ok());
  const std::string bytes = ReadBytes(path);
  WriteBytes(path, bytes.substr(0, bytes.size() / 2));
  absl::StatusOr<std::unique_ptr<Graph>> g = LoadGraph(path);
  EXPECT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr(path));
}

TEST(GraphDefErrorTest, CorruptedTextFileGivesPosition) {
  const std::string path = TempPath("corrupt.pbtxt");
  WriteBytes(path, "node {\n  name: \"x\"\n  opp: \"Const\"\n}\n");
  absl::StatusOr<std::unique_ptr<Graph>> g = LoadGraph(path);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr(path));
  EXPECT_THAT(g.status().message(), HasSubstr("line 3"));
  EXPECT_THAT(g.status().message(), HasSubstr("opp"));
}

TEST(GraphDefErrorTest, UnrecognisedFileOfUnknownExtension) {
  const std::string path = TempPath("junk.graph");
  WriteBytes(path, "this is { not a graph");
  absl::StatusOr<std::unique_ptr<Graph>> g = LoadGraph(path);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(g.status().message(), HasSubstr("neither a binary"));
}

TEST(GraphDefErrorTest, MissingFileNamesPath) {
  const std::string path = TempPath("no/such/model.pb");
  absl::StatusOr<std::unique_ptr<Graph>> g = LoadGraph(path);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(g.status().message(), HasSubstr(path));
  Graph empty;
  absl::Status s = SaveGraph(empty, path);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr(path));
}

TEST(GraphDefErrorTest, UnknownOp) {
  absl::Status s = Import(R"pb(node { name: "n" op: "NoSuchOp" })pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("NoSuchOp 'n'"));
}

TEST(GraphDefErrorTest, InputNamesMissingNode) {
  absl::Status s = Import(absl::StrCat(
      kPlaceholder,
      R"pb(node { name: "sum" op: "Add" input: "x:0" input: "ghost:0" })pb"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Add 'sum'"));
  EXPECT_THAT(s.message(), HasSubstr("'ghost'"));
}

TEST(GraphDefErrorTest, InputDefinedLaterIsAnError) {
  absl::Status s = Import(absl::StrCat(
      R"pb(node { name: "y" op: "Identity" input: "x:0" })pb", kPlaceholder));
  EXPECT_THAT(s.message(), HasSubstr("Identity 'y'"));
  EXPECT_THAT(s.message(), HasSubstr("not defined before"));
}

TEST(GraphDefErrorTest, OutputIndexOutOfRange) {
  absl::Status s = Import(absl::StrCat(
      kPlaceholder, R"pb(node { name: "y" op: "Identity" input: "x:3" })pb"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Identity 'y'"));
  EXPECT_THAT(s.message(), HasSubstr("output 3 of Placeholder 'x'"));
}

TEST(GraphDefErrorTest, DataInputAfterControlInput) {
  absl::Status s = Import(absl::StrCat(
      kPlaceholder,
      R"pb(node { name: "y" op: "Identity" input: "^x" input: "x:0" })pb"));
  EXPECT_THAT(s.message(), HasSubstr("control inputs come last"));
}

TEST(GraphDefErrorTest, RequiredAttrOfWrongType) {
  absl::Status s = Import(R"pb(
    node {
      name: "x"
      op: "Placeholder"
      attr {
        key: "dtype"
        value { i: 3 }
      }
      attr {
        key: "shape"
        value { shape { dim: 2 } }
      }
    }
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Placeholder 'x'"));
  EXPECT_THAT(s.message(), HasSubstr("'dtype'"));
}

TEST(GraphDefErrorTest, DeclaredAttrOfWrongType) {
  absl::Status s = Import(R"pb(
    node {
      name: "f"
      op: "Fill"
      attr {
        key: "shape"
        value { shape { dim: 2 } }
      }
      attr {
        key: "value"
        value { f: 1 }
      }
      attr {
        key: "dtype"
        value { s: "float32" }
      }
    }
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Fill 'f'"));
  EXPECT_THAT(s.message(), HasSubstr("attribute 'dtype' is string"));
  EXPECT_THAT(s.message(), HasSubstr("expected dtype"));
}

// The issue 9 reproducer: Fill of [2^62+1, 4] wraps int64 when its element
// count is computed; import refuses it naming the node and the shape.
TEST(GraphDefErrorTest, ShapeThatWrapsInt64IsRefused) {
  absl::Status s = Import(R"pb(
    node {
      name: "big"
      op: "Fill"
      attr {
        key: "shape"
        value { shape { dim: 4611686018427387905 dim: 4 } }
      }
      attr {
        key: "value"
        value { f: 1 }
      }
    }
    node { name: "g" op: "Identity" input: "big" }
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Fill 'big'"));
  EXPECT_THAT(s.message(), HasSubstr("[4611686018427387905,4]"));
  EXPECT_THAT(s.message(), HasSubstr("2^48"));
}

TEST(GraphDefErrorTest, AbsurdIpuIsRefused) {
  absl::Status s = Import(absl::StrCat(
      kPlaceholder,
      R"pb(node { name: "y" op: "Identity" input: "x" ipu: 2147483647 })pb"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Identity 'y'"));
  EXPECT_THAT(s.message(), HasSubstr("placed on IPU 2147483647"));
}

TEST(GraphDefErrorTest, UnknownAttributeIsRefused) {
  absl::Status s = Import(absl::StrCat(kPlaceholder, R"pb(node {
                                                            name: "y"
                                                            op: "Identity"
                                                            input: "x"
                                                            attr {
                                                              key: "colour"
                                                              value { i: 3 }
                                                            }
                                                          })pb"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Identity 'y'"));
  EXPECT_THAT(s.message(), HasSubstr("unknown attribute 'colour' = 3"));
}

TEST(GraphDefErrorTest, ConstOfResourceDtypeIsRefused) {
  absl::Status s = Import(R"pb(
    node {
      name: "c"
      op: "Const"
      attr {
        key: "value"
        value {
          tensor {
            dtype: DT_RESOURCE
            shape {}
          }
        }
      }
    }
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Const 'c'"));
  EXPECT_THAT(s.message(), HasSubstr("resource"));
}

// A Repeat over one float loop variable x (an _Arg "a" and its body result
// "a:0"), with `extra` appended to the loop node's attributes.
std::string RepeatGraph(const std::string& loop_attrs) {
  return absl::StrCat(kPlaceholder, R"pb(
                        node {
                          name: "a"
                          op: "_Arg"
                          attr {
                            key: "dtype"
                            value { type: DT_FLOAT }
                          }
                          attr {
                            key: "shape"
                            value { shape { dim: 2 } }
                          }
                          attr {
                            key: "index"
                            value { i: 0 }
                          }
                        }
                        node { name: "loop" op: "Repeat" input: "x"
                      )pb",
                      loop_attrs, "}");
}

std::string LoopAttrs(const std::string& n, const std::string& nv,
                      const std::string& args, const std::string& results,
                      const std::string& targets) {
  return absl::StrCat("attr { key: \"n\" value { ", n, " } }\n",
                      "attr { key: \"num_loop_vars\" value { ", nv, " } }\n",
                      "attr { key: \"body_args\" value { ", args, " } }\n",
                      "attr { key: \"body_results\" value { ", results,
                      " } }\n", "attr { key: \"body_targets\" value { ",
                      targets, " } }\n");
}

TEST(GraphDefErrorTest, MalformedLoopAttributesAreRefused) {
  const std::string args = "string_list { value: \"a\" }";
  const std::string results = "string_list { value: \"a:0\" }";
  const std::string none = "string_list { }";
  // The well-formed loop imports.
  absl::Status ok =
      Import(RepeatGraph(LoopAttrs("i: 3", "i: 1", args, results, none)));
  EXPECT_TRUE(ok.ok()) << ok;
  struct Case {
    std::string attrs, want;
  } cases[] = {
      {LoopAttrs("i: 3", "i: 99", args, results, none),
       "attribute 'num_loop_vars' is 99; the loop has 1 input(s)"},
      {LoopAttrs("i: 3", "i: -1", args, results, none),
       "attribute 'num_loop_vars' is -1"},
      {LoopAttrs("i: -1", "i: 1", args, results, none),
       "attribute 'n' is -1; it must be >= 0"},
      {LoopAttrs("i: 3", "i: 1", "i: 7", results, none),
       "attribute 'body_args' is int 7, expected list(string)"},
      {LoopAttrs("i: 3", "i: 1", args, results,
                 "string_list { value: \"loop\" }"),
       "attribute 'body_targets'[0] = \"loop\" names no node defined before"},
      {LoopAttrs("i: 3", "i: 1", "string_list { value: \"x\" }", results, none),
       "attribute 'body_args'[0] = \"x\" must name an _Arg node"},
      {LoopAttrs("i: 3", "i: 1", args, "string_list { value: \"a:-1\" }", none),
       "attribute 'body_results'[0] = \"a:-1\""},
      {LoopAttrs("i: 3", "i: 1", args, "string_list { }", none),
       "attribute 'body_results' has 0 names but num_loop_vars is 1"},
      {absl::StrCat(LoopAttrs("i: 3", "i: 1", args, results, none),
                    "attr { key: \"cond_result\" value { s: \"a:0\" } }"),
       "unknown attribute 'cond_result'"},
  };
  for (const Case& c : cases) {
    absl::Status s = Import(RepeatGraph(c.attrs));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << c.want << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("Repeat 'loop'")) << c.want;
    EXPECT_THAT(s.message(), HasSubstr(c.want));
  }
}

TEST(GraphDefErrorTest, TensorContentOfWrongSize) {
  absl::Status s = Import(R"pb(
    node {
      name: "c"
      op: "Const"
      attr {
        key: "value"
        value {
          tensor {
            dtype: DT_FLOAT
            shape { dim: 2 }
            content: "abc"
          }
        }
      }
    }
  )pb");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Const 'c'"));
  EXPECT_THAT(s.message(), HasSubstr("float32[2] needs 2 x 4 bytes"));
}

TEST(GraphDefErrorTest, NewerVersionIsRejected) {
  absl::Status s = Import("version: 99");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("version 99"));
}

TEST(GraphDefErrorTest, CollectionNamesMissingNode) {
  absl::Status s = Import(R"pb(collection { key: "vars" node: "w" })pb");
  EXPECT_THAT(s.message(), HasSubstr("collection 'vars' names node 'w'"));
}

TEST(GraphDefErrorTest, ImportNeedsAnEmptyGraph) {
  Model m = BuildModel();
  absl::StatusOr<GraphDef> def = ToGraphDef(*m.scope.graph());
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(ImportGraphDef(*def, m.scope.graph()).code(),
            absl::StatusCode::kFailedPrecondition);
}

struct FakeResource : Resource {
  std::string DebugString() const override { return "fake"; }
};

TEST(GraphDefErrorTest, ResourceTensorCannotBeSaved) {
  Graph g;
  NodeSpec spec{"Const", "handle"};
  spec.attrs = {
      {"value", Tensor::ForResource(std::make_shared<FakeResource>())}};
  // Refused when built (issue 9), so no graph holds one to export.
  absl::StatusOr<Node*> n = g.AddNode(spec);
  EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(n.status().message(), HasSubstr("Const 'handle'"));
  EXPECT_THAT(n.status().message(), HasSubstr("resource"));
  // An annotation holding one still cannot be saved.
  NodeSpec p{"Placeholder", "p"};
  p.attrs = {
      {"dtype", DType::kFloat32},
      {"shape", TensorShape({2})},
      {"_handle", Tensor::ForResource(std::make_shared<FakeResource>())}};
  ASSERT_TRUE(g.AddNode(p).ok());
  absl::StatusOr<GraphDef> def = ToGraphDef(g);
  EXPECT_EQ(def.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(def.status().message(), HasSubstr("Placeholder 'p'"));
  EXPECT_THAT(def.status().message(), HasSubstr("resource"));
}

}  // namespace
}  // namespace ipuflow
