// Runs every fuzz target (core/testing/fuzz.h) over its corpus: the seeds
// and the reproducers of crashes found by fuzzing, which must stay fixed.
// Arguments: target=corpus_dir, one per target (tests/fuzz/BUILD.bazel).
#include <dirent.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/testing/fuzz.h"
#include "feeds/dataset_benchmark_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow {
namespace {

std::map<std::string, std::string>* corpora = nullptr;

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> files;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return files;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") files.push_back(dir + "/" + name);
  }
  closedir(d);
  return files;
}

TEST(FuzzRegressionTest, EveryTargetRunsOverItsCorpus) {
  ASSERT_EQ(fuzzing::Targets().size(), corpora->size());
  for (const auto& [name, fn] : fuzzing::Targets()) {
    ASSERT_TRUE(corpora->count(name)) << "no corpus for fuzz target " << name;
    const std::vector<std::string> files = FilesIn(corpora->at(name));
    EXPECT_GE(files.size(), 3u) << name << ": seed corpus too small";
    for (const std::string& path : files) {
      std::ifstream in(path, std::ios::binary);
      std::stringstream bytes;
      bytes << in.rdbuf();
      const std::string s = bytes.str();
      SCOPED_TRACE(path);
      fn(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    }
    // The empty input too.
    fn(nullptr, 0);
  }
}

TEST(DatasetBenchmarkJsonTest, ReadsWhatDatasetBenchmarkWrites) {
  absl::StatusOr<feeds::DatasetBenchmarkResult> r =
      feeds::ParseDatasetBenchmarkJson(
          R"({"epochs":[{"elements_processed":1000,)"
          R"("total_bytes_processed":1e8,"time_elapsed":0.5,)"
          R"("elements_per_second":2000,"bandwidth":0.2}]})");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->epochs_size(), 1);
  EXPECT_EQ(r->epochs(0).elements_processed(), 1000);
  EXPECT_EQ(r->epochs(0).elements_per_second(), 2000);
}

TEST(DatasetBenchmarkJsonTest, MalformedOrImpossibleValuesAreErrors) {
  using ::testing::HasSubstr;
  absl::StatusOr<feeds::DatasetBenchmarkResult> r =
      feeds::ParseDatasetBenchmarkJson(R"({"epochs":[{"time_elapsed":-1}]})");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("epochs[0].time_elapsed is -1"));
  r = feeds::ParseDatasetBenchmarkJson(R"({"epochs":[{"speed":1}]})");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = feeds::ParseDatasetBenchmarkJson(R"({"epochs":[)");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = feeds::ParseDatasetBenchmarkJson(R"({"epochs":[{"bandwidth":"NaN"}]})");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ipuflow

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ipuflow::corpora = new std::map<std::string, std::string>();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      (*ipuflow::corpora)[arg.substr(0, eq)] = arg.substr(eq + 1);
    }
  }
  return RUN_ALL_TESTS();
}
