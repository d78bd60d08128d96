// IPUConfig in the one validation style (issue 22, item 5): every field
// through 0 (its default), -1, its largest value (accepted) and past it
// (refused, naming field, value and limit); esr values that name no
// StochasticRoundingBehaviour (3, 7, -1); the products that overflow or
// pass their limit; the line and column of text that does not parse.
#include <climits>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::string Error(const std::function<void(IPUConfig&)>& set) {
  IPUConfig c;
  set(c);
  absl::StatusOr<IPUConfig> r = ResolveIPUConfig(c);
  if (r.ok()) return "OK";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(r.status().message());
}

TEST(IPUConfigTest, EveryFieldThroughZeroMinusOneAndItsLargestValue) {
  struct Field {
    const char* name;
    std::function<void(IPUConfig&, int64_t)> set;
    int64_t largest;
    std::string why;  // Follows the limit in the error.
  };
  const std::vector<Field> fields = {
      {"auto_select_ipus",
       [](IPUConfig& c, int64_t v) { c.set_auto_select_ipus(v); }, kMaxIpus,
       " (the largest IPU-POD)"},
      {"replication_factor",
       [](IPUConfig& c, int64_t v) { c.set_replication_factor(v); }, kMaxIpus,
       " (the largest IPU-POD)"},
      {"tiles_per_ipu",
       [](IPUConfig& c, int64_t v) {
         c.set_tiles_per_ipu(v);
         c.set_memory_per_tile(1);  // So the largest fits in memory.
       },
       kMaxTilesPerIpu, ""},
      {"intra_op_threads_per_ipu",
       [](IPUConfig& c, int64_t v) { c.set_intra_op_threads_per_ipu(v); },
       kMaxIntraOpThreadsPerIpu, ""},
      {"memory_per_tile",
       [](IPUConfig& c, int64_t v) {
         c.set_memory_per_tile(v);
         c.set_tiles_per_ipu(1);
       },
       kInt64Max, ""},
      {"minimum_remote_tensor_size",
       [](IPUConfig& c, int64_t v) { c.set_minimum_remote_tensor_size(v); },
       kInt64Max, ""},
  };
  for (const Field& f : fields) {
    SCOPED_TRACE(f.name);
    EXPECT_EQ(Error([&](IPUConfig& c) { f.set(c, 0); }), "OK");
    const std::string range =
        absl::StrCat("; it must be between 0 and ", f.largest, f.why);
    EXPECT_THAT(
        Error([&](IPUConfig& c) { f.set(c, -1); }),
        HasSubstr(absl::StrCat("IPUConfig: ", f.name, " is -1", range)));
    if (std::string(f.name) == "memory_per_tile") {
      // The largest value passes the field's range; its product with the
      // tiles is over this machine's memory.
      EXPECT_THAT(Error([&](IPUConfig& c) { f.set(c, f.largest); }),
                  HasSubstr("tiles_per_ipu x memory_per_tile = 1 x "
                            "9223372036854775807 = 9223372036854775807; the "
                            "limit is"));
      continue;
    }
    EXPECT_EQ(Error([&](IPUConfig& c) { f.set(c, f.largest); }), "OK");
    if (f.largest < INT_MAX) {
      for (int64_t bad : {f.largest + 1, int64_t{INT_MAX}}) {
        EXPECT_THAT(Error([&](IPUConfig& c) { f.set(c, bad); }),
                    HasSubstr(absl::StrCat(f.name, " is ", bad, range)));
      }
    }
  }
}

TEST(IPUConfigTest, EsrMustNameAStochasticRoundingBehaviour) {
  for (int bad : {3, 7, -1}) {
    EXPECT_THAT(
        Error([bad](IPUConfig& c) {
          c.mutable_floating_point_behaviour()->set_esr(
              static_cast<
                  FloatingPointBehaviourConfig::StochasticRoundingBehaviour>(
                  bad));
        }),
        HasSubstr(absl::StrCat("floating_point_behaviour.esr is ", bad,
                               ", not a StochasticRoundingBehaviour (0 OFF, "
                               "1 ON, 2 REPLICA_IDENTICAL_ONLY)")));
  }
  for (auto good :
       {FloatingPointBehaviourConfig::OFF, FloatingPointBehaviourConfig::ON,
        FloatingPointBehaviourConfig::REPLICA_IDENTICAL_ONLY}) {
    EXPECT_EQ(Error([good](IPUConfig& c) {
                c.mutable_floating_point_behaviour()->set_esr(good);
              }),
              "OK");
  }
  // A bad config leaves a configured system as it was.
  IPUConfig two;
  two.set_auto_select_ipus(2);
  auto system = std::move(IPUSystem::Create(two)).value();
  IPUConfig bad = two;
  bad.mutable_floating_point_behaviour()->set_esr(
      static_cast<FloatingPointBehaviourConfig::StochasticRoundingBehaviour>(
          7));
  EXPECT_EQ(system->Configure(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(system->num_ipus(), 2);
}

TEST(IPUConfigTest, ProductsAreCheckedInInt64) {
  // 1472 tiles x 2^62 bytes overflows int64.
  EXPECT_THAT(
      Error([](IPUConfig& c) { c.set_memory_per_tile(int64_t{1} << 62); }),
      HasSubstr("tiles_per_ipu x memory_per_tile = 1472 x "
                "4611686018427387904 overflows int64; the limit is"));
  EXPECT_THAT(Error([](IPUConfig& c) {
                c.set_auto_select_ipus(kMaxIpus);
                c.set_intra_op_threads_per_ipu(kMaxIntraOpThreadsPerIpu);
              }),
              HasSubstr("auto_select_ipus x (1 + intra_op_threads_per_ipu) = "
                        "1024 x 257 = 263168; the limit is 4096 threads"));
  // Every field at fault is named at once.
  const std::string both = Error([](IPUConfig& c) {
    c.set_auto_select_ipus(-1);
    c.set_tiles_per_ipu(-1);
  });
  EXPECT_THAT(both, HasSubstr("auto_select_ipus is -1"));
  EXPECT_THAT(both, HasSubstr("tiles_per_ipu is -1"));
}

TEST(IPUConfigTest, TextThatDoesNotParseNamesTheLineAndColumn) {
  const std::string path =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/bad.ipu_config.txt");
  {
    std::ofstream out(path);
    out << "auto_select_ipus: 2\ntiles_per_ipu: many\n";
  }
  absl::Status st = LoadIPUConfig(path).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr(absl::StrCat("IPU config '", path,
                                     "' is not a valid IPUConfig in text "
                                     "format: line 2, column 16: ")));
  absl::StatusOr<IPUConfig> unknown =
      ParseIPUConfigText("\n\n  no_such_field: 1", "the test's config");
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("the test's config is not a valid IPUConfig in text "
                        "format: line 3, column 16: Message type "
                        "\"ipuflow.IPUConfig\" has no field named "
                        "\"no_such_field\""));
  // A number for the enum parses (proto3 keeps unknown values) and is
  // refused when resolved.
  absl::StatusOr<IPUConfig> seven =
      ParseIPUConfigText("floating_point_behaviour { esr: 7 }", "t");
  if (seven.ok()) {
    EXPECT_THAT(std::string(ResolveIPUConfig(*seven).status().message()),
                HasSubstr("floating_point_behaviour.esr is 7"));
  } else {
    EXPECT_THAT(std::string(seven.status().message()), HasSubstr("line 1"));
  }
}

}  // namespace
}  // namespace ipuflow
