// Run under `mpirun -np P` (//tests/distributed:mpi_data_test): the
// DataLoader's split by process. Over an epoch, with shuffling, the
// processes' samples (by id) are a partition of the samples a step uses:
// none twice, none never but the leftover; processes that disagree on the
// seed or the dataset all get the same error, naming the field.
#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/distributed/mpi_link.h"
#include "feeds/data_loader.h"
#include "feeds/dataset.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

std::shared_ptr<distributed::MpiLink> Link() {
  static std::shared_ptr<distributed::MpiLink> link =
      *distributed::MpiLink::World();
  return link;
}

DataLoaderOptions Options(const ProcessLink& link) {
  DataLoaderOptions o;
  o.batch_size = 3;
  o.replicas = 2;
  o.shuffle = true;
  o.seed = 11;
  o.process_index = link.process_index();
  o.process_count = link.process_count();
  return o;
}

TEST(MpiDataTest, EpochIsAPartitionBySampleId) {
  auto link = Link();
  const int64_t n = 1000;
  auto loader = DataLoader::Create(Range(0, n), Options(*link));
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE(
      AgreeAcrossProcesses((*loader)->plan_key(), link->process_index(), *link)
          .ok());
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::string mine;
    for (int64_t s = 0; s < (*loader)->len(); ++s) {
      auto batch = (*loader)->Next();
      ASSERT_TRUE(batch.ok()) << batch.status();
      const Tensor& ids = (*batch)[0];
      for (int64_t k = 0; k < ids.NumElements(); ++k) {
        absl::StrAppend(&mine, ids.data<int64_t>()[k], ",");
      }
    }
    auto all = link->AllGatherStrings(100 + epoch, mine);
    ASSERT_TRUE(all.ok()) << all.status();
    std::set<int64_t> seen;
    int64_t total = 0;
    for (const std::string& text : *all) {
      for (absl::string_view id :
           absl::StrSplit(text, ',', absl::SkipEmpty())) {
        int64_t v = 0;
        ASSERT_TRUE(absl::SimpleAtoi(id, &v));
        ASSERT_TRUE(seen.insert(v).second) << "sample " << v << " used twice";
        ++total;
      }
    }
    EXPECT_EQ(total, n - (*loader)->unused_samples_per_epoch());
    EXPECT_EQ(total, link->process_count() * (*loader)->samples_per_epoch());
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(),
                            [&](int64_t v) { return v >= 0 && v < n; }));
    (*loader)->StartNextEpoch();
  }
}

TEST(MpiDataTest, DisagreementIsAnErrorOnEveryProcess) {
  auto link = Link();
  if (link->process_count() < 2) GTEST_SKIP();
  DataLoaderOptions o = Options(*link);
  o.seed = 11 + link->process_index();  // Process 1 differs.
  auto loader = DataLoader::Create(Range(0, 1000), o);
  ASSERT_TRUE(loader.ok()) << loader.status();
  absl::Status s =
      AgreeAcrossProcesses((*loader)->plan_key(), o.process_index, *link);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("processes disagree on the seed: process 0 has "
                             "11, process 1 has 12"),
            std::string::npos)
      << s;
  // A loader whose options say another process index.
  o.seed = 11;
  o.process_index = (link->process_index() + 1) % link->process_count();
  auto other = DataLoader::Create(Range(0, 1000), o);
  ASSERT_TRUE(other.ok());
  s = AgreeAcrossProcesses((*other)->plan_key(), o.process_index, *link);
  EXPECT_NE(s.message().find("but this is process"), std::string::npos) << s;
}

}  // namespace
}  // namespace ipuflow::feeds
