// ProcessIdentity from its three sources (explicit, Open MPI, PopRun), and
// every malformed or inconsistent value refused with the values named.
#include "core/distributed/process_identity.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ipuflow::distributed {
namespace {

EnvReader Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(ProcessIdentityTest, ExplicitAsConfigureProcessId) {
  auto id = ConfigureProcessId(2, 3);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->process_index, 2);
  EXPECT_EQ(id->process_count, 3);
  EXPECT_TRUE(id->multi_process());
  EXPECT_EQ(id->GlobalReplica(1, 4), 9);
  for (auto [index, count] : std::vector<std::pair<int, int>>{
           {3, 3}, {-1, 3}, {0, 0}, {0, -1}, {0, kMaxProcesses + 1}}) {
    auto bad = ConfigureProcessId(index, count);
    ASSERT_FALSE(bad.ok()) << index << " " << count;
    EXPECT_NE(bad.status().message().find(absl::StrCat(
                  "process_index ", index, " and process_count ", count)),
              std::string::npos)
        << bad.status();
  }
}

TEST(ProcessIdentityTest, SingleProcessWithoutALauncher) {
  auto id = ProcessIdentityFromEnvironment(Env({}));
  ASSERT_TRUE(id.ok());
  EXPECT_EQ(id->process_count, 1);
  EXPECT_FALSE(id->multi_process());
}

TEST(ProcessIdentityTest, OpenMpiVariables) {
  auto id = ProcessIdentityFromEnvironment(
      Env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->process_index, 1);
  EXPECT_EQ(id->process_count, 2);
  EXPECT_EQ(id->source, "Open MPI");
  // Only one of the pair, text, negative, rank past size.
  for (const auto& vars : std::vector<std::map<std::string, std::string>>{
           {{"OMPI_COMM_WORLD_RANK", "1"}},
           {{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
           {{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
           {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
           {{"OMPI_COMM_WORLD_RANK", "0"},
            {"OMPI_COMM_WORLD_SIZE", "99999999999"}}}) {
    EXPECT_FALSE(ProcessIdentityFromEnvironment(Env(vars)).ok());
  }
}

TEST(ProcessIdentityTest, PopRunGivesTheSameIndicesAsMpirun) {
  // poprun --num-instances 2 --num-replicas 4: instance 1 owns replicas 2, 3.
  auto id = ProcessIdentityFromEnvironment(
      Env({{"OMPI_COMM_WORLD_RANK", "1"},
           {"OMPI_COMM_WORLD_SIZE", "2"},
           {"POPDIST_NUM_TOTAL_REPLICAS", "4"},
           {"POPDIST_NUM_LOCAL_REPLICAS", "2"},
           {"POPDIST_REPLICA_INDEX_OFFSET", "2"}}));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->source, "PopRun");
  auto plain = ProcessIdentityFromEnvironment(
      Env({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}));
  for (int local = 0; local < 2; ++local) {
    EXPECT_EQ(id->GlobalReplica(local, 2), plain->GlobalReplica(local, 2));
    EXPECT_EQ(id->GlobalReplica(local, 2), 2 + local);
  }
  EXPECT_TRUE(CheckLocalReplicas(*id, 2).ok());
  absl::Status other = CheckLocalReplicas(*id, 3);
  EXPECT_NE(other.message().find("PopRun's 2 local replicas"),
            std::string::npos)
      << other;
}

TEST(ProcessIdentityTest, PopRunInconsistenciesNameEveryValue) {
  // Uneven replicas per instance, a wrong offset, a missing variable.
  for (const auto& [total, local, offset] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"5", "2", "2"}, {"4", "2", "1"}, {"4", "", "2"}, {"0", "0", "0"}}) {
    std::map<std::string, std::string> vars = {
        {"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "2"},
        {"POPDIST_NUM_TOTAL_REPLICAS", total},
        {"POPDIST_REPLICA_INDEX_OFFSET", offset}};
    if (!local.empty()) vars["POPDIST_NUM_LOCAL_REPLICAS"] = local;
    auto id = ProcessIdentityFromEnvironment(Env(vars));
    ASSERT_FALSE(id.ok()) << total << " " << local << " " << offset;
    EXPECT_NE(id.status().message().find("POPDIST_NUM_TOTAL_REPLICAS=" + total),
              std::string::npos)
        << id.status();
    EXPECT_NE(id.status().message().find("OMPI_COMM_WORLD_RANK=1"),
              std::string::npos)
        << id.status();
  }
}

TEST(ProcessIdentityTest, LocalReplicasRange) {
  auto id = *ConfigureProcessId(0, 4);
  EXPECT_TRUE(CheckLocalReplicas(id, 1).ok());
  EXPECT_FALSE(CheckLocalReplicas(id, 0).ok());
  EXPECT_FALSE(CheckLocalReplicas(id, -1).ok());
  absl::Status big = CheckLocalReplicas(id, 1 << 30);
  EXPECT_NE(big.message().find("4294967296"), std::string::npos) << big;
}

}  // namespace
}  // namespace ipuflow::distributed
