// DataLoader (issue 10): combined-batch arithmetic against the reference
// table, len() with and without drop_last, the split by process with
// shuffle for P = 1..5 and the leftover rotation, kSync == kAsync ==
// kAsyncRebatched element for element, the infeed layout per replica with
// and without replica grouping, workers blocked at destruction, errors in
// order, every error text (samples that do not stack included), and batch
// memory reused only once no batch or slice of it is held. No sleeps: tests
// wait on observable counts.
#include "feeds/data_loader.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <iterator>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "core/testing/test_system.h"
#include "feeds/infeed_queue.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ipuflow::feeds {
namespace {

using ::ipuflow::testing::AwaitTrue;

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Sample i = {float32[2] {i, -i}, int64 i}.
DatasetPtr Samples(int64_t n) {
  return Range(0, n)->Map(
      [](Element e) -> absl::StatusOr<Element> {
        const int64_t i = e[0].scalar<int64_t>();
        return Element{Tensor::FromVector<float>(
                           {static_cast<float>(i), static_cast<float>(-i)}),
                       e[0]};
      },
      1, ElementSpec{{DType::kFloat32, DType::kInt64}, {TensorShape({2}), {}}});
}

// The sample ids of a batch (its int64 component; Range yields only it).
std::vector<int64_t> Ids(const Element& batch) {
  return batch.back().ToVector<int64_t>();
}

std::unique_ptr<DataLoader> Make(DatasetPtr ds, const DataLoaderOptions& o) {
  absl::StatusOr<std::unique_ptr<DataLoader>> l = DataLoader::Create(ds, o);
  EXPECT_TRUE(l.ok()) << l.status();
  return l.ok() ? *std::move(l) : nullptr;
}

// Every sample id of the current epoch, batch by batch.
std::vector<std::vector<int64_t>> Epoch(DataLoader* l) {
  std::vector<std::vector<int64_t>> out;
  for (;;) {
    absl::StatusOr<Element> b = l->Next();
    if (b.status().code() == absl::StatusCode::kOutOfRange) break;
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) break;
    out.push_back(Ids(*b));
  }
  return out;
}

std::vector<int64_t> Flat(const std::vector<std::vector<int64_t>>& v) {
  std::vector<int64_t> f;
  for (const auto& b : v) f.insert(f.end(), b.begin(), b.end());
  return f;
}

absl::Status CreateError(DatasetPtr ds, const DataLoaderOptions& o) {
  return DataLoader::Create(std::move(ds), o).status();
}

// {batch, device_iterations, replicas, input_group_size, GA, combined}:
// wave2_reference.md 3.1 and the seed's listings.
TEST(DataLoaderTest, CombinedBatchMatchesTheReferenceTable) {
  const int64_t table[][6] = {
      {1, 1, 1, 1, 1, 1},      // defaults
      {2, 100, 1, 1, 1, 200},  // seed listing 5.2: deviceIterations(100)
      {2, 1, 4, 1, 1, 8},      // seed listing 5.3: replicationFactor(4)
      {4, 10, 2, 1, 8, 640},   // training: B x DI x R x GA
      {4, 3, 8, 2, 5, 240},    // grouped: 8 / 2 = 4 slices
      {1, 1, 8, 8, 1, 1},      // every replica reads the same input
      {3, 2, 6, 3, 2, 24},
  };
  for (const auto& row : table) {
    DataLoaderOptions o;
    o.batch_size = row[0];
    o.device_iterations = row[1];
    o.replicas = row[2];
    o.input_group_size = row[3];
    o.gradient_accumulation = row[4];
    auto l = Make(Samples(row[5] * 3 - 1), o);  // 2 steps, C - 1 left.
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->combined_batch_size(), row[5]);
    EXPECT_EQ(l->len(), 2);
    absl::StatusOr<Element> b = l->Next();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)[0].shape(), TensorShape({row[5], 2}));
    EXPECT_EQ((*b)[1].shape(), TensorShape({row[5]}));
  }
}

TEST(DataLoaderTest, LenWithAndWithoutDropLast) {
  DataLoaderOptions o;
  o.batch_size = 5;
  auto dropped = Make(Samples(23), o);
  ASSERT_NE(dropped, nullptr);
  EXPECT_EQ(dropped->len(), 4);
  EXPECT_EQ(dropped->steps_per_epoch(), 4);
  EXPECT_EQ(dropped->unused_samples_per_epoch(), 3);
  std::vector<std::vector<int64_t>> e = Epoch(dropped.get());
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(Flat(e).size(), 20u);
  EXPECT_THAT(dropped->Next().status().message(), HasSubstr("end of epoch 0"));

  o.drop_last = false;
  auto kept = Make(Samples(23), o);
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->len(), 5);
  e = Epoch(kept.get());
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e.back().size(), 3u);  // The short last batch.
  std::vector<int64_t> all(23);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(Flat(e), all);
}

// Without shuffle the epochs walk a ring: each starts with the samples the
// previous one left out.
TEST(DataLoaderTest, WithoutShuffleTheLeftoversComeFirstNextEpoch) {
  DataLoaderOptions o;
  o.batch_size = 3;
  auto l = Make(Samples(10), o);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(Flat(Epoch(l.get())),
            std::vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8}));
  l->StartNextEpoch();
  EXPECT_EQ(l->epoch(), 1);
  EXPECT_EQ(Flat(Epoch(l.get())),
            std::vector<int64_t>({9, 0, 1, 2, 3, 4, 5, 6, 7}));
  l->StartNextEpoch();
  EXPECT_EQ(Flat(Epoch(l.get())),
            std::vector<int64_t>({8, 9, 0, 1, 2, 3, 4, 5, 6}));
}

// P = 1..5 processes, one loader each, shuffled with the same seed: within
// an epoch no sample is used twice across processes, exactly P * n are used,
// and every sample left out of epoch e is used in epoch e + 1. With
// drop_last = false every sample is used exactly once per epoch. Includes
// the reference's N = 100, C = 10, P = 4 case (PopTorch: 0 leftovers).
TEST(DataLoaderTest, SplitByProcessCoversEverySampleAndRotatesLeftovers) {
  for (auto [n, batch] : {std::pair<int64_t, int64_t>{103, 4}, {100, 10}}) {
    for (int64_t procs = 1; procs <= 5; ++procs) {
      for (bool drop_last : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "N=" << n << " P=" << procs
                                          << " drop_last=" << drop_last);
        std::vector<std::unique_ptr<DataLoader>> loaders;
        for (int64_t p = 0; p < procs; ++p) {
          DataLoaderOptions o;
          o.batch_size = batch;
          o.process_index = p;
          o.process_count = procs;
          o.shuffle = true;
          o.seed = 42;
          o.drop_last = drop_last;
          loaders.push_back(Make(Samples(n), o));
          ASSERT_NE(loaders.back(), nullptr);
        }
        const int64_t used =
            drop_last ? n / (batch * procs) * batch * procs : n;
        EXPECT_EQ(loaders[0]->unused_samples_per_epoch(), n - used);
        std::set<int64_t> left_before;
        for (int epoch = 0; epoch < 4; ++epoch) {
          std::multiset<int64_t> seen;
          for (auto& l : loaders) {
            if (epoch > 0) l->StartNextEpoch();
            std::vector<int64_t> ids = Flat(Epoch(l.get()));
            EXPECT_EQ(ids, l->EpochSampleIndices(epoch));
            EXPECT_EQ(static_cast<int64_t>(ids.size()), l->samples_per_epoch());
            seen.insert(ids.begin(), ids.end());
          }
          EXPECT_EQ(static_cast<int64_t>(seen.size()), used);
          std::set<int64_t> distinct(seen.begin(), seen.end());
          EXPECT_EQ(distinct.size(), seen.size()) << "a sample used twice";
          for (int64_t s : left_before) {
            EXPECT_EQ(distinct.count(s), 1u) << "sample " << s << " starved";
          }
          left_before.clear();
          for (int64_t s = 0; s < n; ++s) {
            if (!distinct.count(s)) left_before.insert(s);
          }
          EXPECT_EQ(static_cast<int64_t>(left_before.size()), n - used);
        }
      }
    }
  }
}

TEST(DataLoaderTest, ShuffleDependsOnTheSeedAndTheEpoch) {
  DataLoaderOptions o;
  o.batch_size = 8;
  o.shuffle = true;
  o.seed = 1;
  auto a = Make(Samples(64), o);
  auto b = Make(Samples(64), o);
  o.seed = 2;
  auto c = Make(Samples(64), o);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(a->EpochSampleIndices(0), b->EpochSampleIndices(0));
  EXPECT_NE(a->EpochSampleIndices(0), c->EpochSampleIndices(0));
  EXPECT_NE(a->EpochSampleIndices(0), a->EpochSampleIndices(1));
}

// Every mode yields kSync's batches, for several worker counts, ring sizes
// and worker batch sizes, over three shuffled epochs; both components.
TEST(DataLoaderTest, AsyncModesYieldSyncsOrder) {
  for (bool drop_last : {true, false}) {
    DataLoaderOptions base;
    base.batch_size = 3;
    base.device_iterations = 2;
    base.replicas = 2;  // C = 12.
    base.shuffle = true;
    base.seed = 5;
    base.drop_last = drop_last;
    auto collect = [](DataLoader* l) {
      std::vector<std::vector<float>> out;
      for (int epoch = 0; epoch < 3; ++epoch) {
        if (epoch > 0) l->StartNextEpoch();
        for (;;) {
          absl::StatusOr<Element> b = l->Next();
          if (b.status().code() == absl::StatusCode::kOutOfRange) break;
          EXPECT_TRUE(b.ok()) << b.status();
          if (!b.ok()) return out;
          out.push_back((*b)[0].ToVector<float>());
          // Both components describe the same samples.
          std::vector<int64_t> ids = Ids(*b);
          for (size_t i = 0; i < ids.size(); ++i) {
            EXPECT_EQ(out.back()[2 * i], static_cast<float>(ids[i]));
          }
        }
      }
      return out;
    };
    auto sync = Make(Samples(157), base);
    ASSERT_NE(sync, nullptr);
    const std::vector<std::vector<float>> expected = collect(sync.get());
    ASSERT_EQ(expected.size(), drop_last ? 3u * 13 : 3u * 14);
    for (auto mode :
         {DataLoaderMode::kAsync, DataLoaderMode::kAsyncRebatched}) {
      for (int64_t workers : {1, 2, 3}) {
        for (int64_t buffer : {1, 3}) {
          for (int64_t worker_size : {0, 1, 5, 12}) {
            for (bool indefinitely : {true, false}) {
              if (mode == DataLoaderMode::kAsync && drop_last &&
                  worker_size != 0) {
                continue;  // Same as worker_size 0.
              }
              DataLoaderOptions o = base;
              o.mode = mode;
              o.num_workers = workers;
              o.buffer_size = buffer;
              o.rebatched_worker_size = worker_size;
              o.load_indefinitely = indefinitely;
              o.early_preload = workers == 2;
              SCOPED_TRACE(::testing::Message()
                           << DataLoaderModeName(mode) << " workers=" << workers
                           << " buffer=" << buffer << " w=" << worker_size
                           << " indefinitely=" << indefinitely
                           << " drop_last=" << drop_last);
              absl::StatusOr<std::unique_ptr<DataLoader>> l =
                  DataLoader::Create(Samples(157), o);
              if (mode == DataLoaderMode::kAsync && !drop_last &&
                  worker_size == 0) {
                EXPECT_FALSE(l.ok());  // Checked in ErrorTexts.
                continue;
              }
              ASSERT_TRUE(l.ok()) << l.status();
              EXPECT_EQ(collect(l->get()), expected);
            }
          }
        }
      }
    }
  }
}

// StartNextEpoch in the middle of an epoch skips its rest: every mode then
// yields kSync's next epoch (async modes drain what the workers loaded,
// rebatched mode drops the rows it carried).
TEST(DataLoaderTest, StartingTheNextEpochEarlySkipsTheRestInEveryMode) {
  DataLoaderOptions base;
  base.batch_size = 4;
  base.device_iterations = 2;  // C = 8.
  base.shuffle = true;
  base.seed = 3;
  auto run = [](DataLoader* l) {
    std::vector<std::vector<int64_t>> out;
    for (int epoch = 0; epoch < 3; ++epoch) {
      if (epoch > 0) l->StartNextEpoch();
      for (int step = 0; step < epoch + 1; ++step) {  // 1, 2, 3 of 8 steps.
        absl::StatusOr<Element> b = l->Next();
        EXPECT_TRUE(b.ok()) << b.status();
        if (b.ok()) out.push_back(Ids(*b));
      }
    }
    return out;
  };
  auto sync = Make(Samples(70), base);
  ASSERT_NE(sync, nullptr);
  const std::vector<std::vector<int64_t>> expected = run(sync.get());
  const std::vector<int64_t> epoch1 = sync->EpochSampleIndices(1);
  EXPECT_EQ(expected[1],
            std::vector<int64_t>(epoch1.begin(), epoch1.begin() + 8));
  for (auto mode : {DataLoaderMode::kAsync, DataLoaderMode::kAsyncRebatched}) {
    for (bool indefinitely : {true, false}) {
      DataLoaderOptions o = base;
      o.mode = mode;
      o.num_workers = 2;
      o.load_indefinitely = indefinitely;
      o.rebatched_worker_size = mode == DataLoaderMode::kAsync ? 0 : 3;
      auto l = Make(Samples(70), o);
      ASSERT_NE(l, nullptr);
      EXPECT_EQ(run(l.get()), expected) << DataLoaderModeName(mode);
    }
  }
}

// A dataset error comes back in place of its batch, in order, and the
// batches after it still come: the same in every mode.
TEST(DataLoaderTest, ADatasetErrorReachesTheConsumerInOrder) {
  DatasetPtr ds = Range(0, 20)->Map(
      [](Element e) -> absl::StatusOr<Element> {
        if (e[0].scalar<int64_t>() == 7) {
          return absl::DataLossError("bad record");
        }
        return e;
      },
      1, ElementSpec{{DType::kInt64}, {{}}});
  for (auto mode : {DataLoaderMode::kSync, DataLoaderMode::kAsync,
                    DataLoaderMode::kAsyncRebatched}) {
    DataLoaderOptions o;
    o.batch_size = 4;
    o.mode = mode;
    o.num_workers = 3;
    o.rebatched_worker_size = mode == DataLoaderMode::kAsyncRebatched ? 4 : 0;
    auto l = Make(ds, o);
    ASSERT_NE(l, nullptr);
    for (int64_t step = 0; step < 5; ++step) {
      absl::StatusOr<Element> b = l->Next();
      if (step == 1) {
        EXPECT_EQ(b.status().code(), absl::StatusCode::kDataLoss);
        EXPECT_THAT(b.status().message(), HasSubstr("DataLoader: sample 7: "));
        EXPECT_THAT(b.status().message(), HasSubstr("bad record"));
      } else {
        ASSERT_TRUE(b.ok()) << b.status();
        EXPECT_EQ(Ids(*b)[0], step * 4);
      }
    }
  }
}

TEST(DataLoaderTest, ADatasetOfUnknownCardinalityIsCounted) {
  DatasetPtr ds = FromGenerator(ElementSpec{{DType::kInt64}, {{}}}, [] {
    auto i = std::make_shared<int64_t>(0);
    return [i]() -> absl::StatusOr<Element> {
      if (*i == 11) return absl::OutOfRangeError("end");
      return Element{Tensor::Scalar<int64_t>((*i)++)};
    };
  });
  DataLoaderOptions o;
  o.batch_size = 2;
  o.unknown_size_limit = 11;  // Exactly its size: enough.
  auto l = Make(ds, o);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->num_samples(), 11);
  EXPECT_EQ(l->len(), 5);
}

// Issue 30: a generator that never ends (not a Repeat) was read into memory
// until the OOM killer. A dataset of unknown size is read only up to a
// bound: refused unread without one, refused after limit + 1 samples past
// DataLoaderOptions::unknown_size_limit, counted under a Take(n).
TEST(DataLoaderTest, ADatasetOfUnknownSizeIsNeverReadWithoutABound) {
  auto reads = std::make_shared<std::atomic<int64_t>>(0);
  DatasetPtr endless =
      FromGenerator(ElementSpec{{DType::kInt64}, {{}}}, [reads] {
        return [reads, i = int64_t{0}]() mutable -> absl::StatusOr<Element> {
          reads->fetch_add(1);
          return Element{Tensor::Scalar<int64_t>(i++)};
        };
      });
  ASSERT_FALSE(endless->RepeatsForever());
  DataLoaderOptions o;
  auto refused = DataLoader::Create(endless, o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("the samples dataset " + endless->DebugString() +
                        " has an unknown size, and a DataLoader keeps every "
                        "sample in memory"));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("DataLoaderOptions::unknown_size_limit"));
  EXPECT_EQ(reads->load(), 0);

  o.unknown_size_limit = 1000;
  refused = DataLoader::Create(endless, o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("has an unknown size, more than DataLoaderOptions::"
                        "unknown_size_limit = 1000 samples"));
  EXPECT_EQ(reads->load(), 1001);

  reads->store(0);
  auto taken = DataLoader::Create(endless->Take(40), DataLoaderOptions());
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ((*taken)->num_samples(), 40);
  EXPECT_LE(reads->load(), 41);  // The Take may ask for one more.

  o.unknown_size_limit = -1;
  EXPECT_THAT(DataLoader::Create(endless, o).status().message(),
              HasSubstr("unknown_size_limit must be >= 0"));
}

int64_t SliceOf(int64_t r, const DataLoaderOptions& o) {
  const int64_t g = o.replicas / o.input_group_size;
  return o.input_group_type == ReplicaGroupType::kConsecutive
             ? r / o.input_group_size
             : r % g;
}

// The infeed gives replica r, for step s, device iteration di and GA
// micro-batch ga, rows ((di * GA + ga) * G + slice(r)) * B + b of step s's
// combined batch; replicas of a group get the same rows.
TEST(DataLoaderTest, InfeedLayoutPerReplicaWithGrouping) {
  const std::tuple<int64_t, ReplicaGroupType> groupings[] = {
      {1, ReplicaGroupType::kConsecutive},
      {2, ReplicaGroupType::kConsecutive},
      {2, ReplicaGroupType::kOrthogonal},
      {4, ReplicaGroupType::kOrthogonal},
  };
  for (const auto& [k, type] : groupings) {
    DataLoaderOptions o;
    o.batch_size = 2;
    o.device_iterations = 2;
    o.gradient_accumulation = 3;
    o.replicas = 4;
    o.input_group_size = k;
    o.input_group_type = type;
    o.mode = DataLoaderMode::kAsync;
    SCOPED_TRACE((ReplicaGroups{type, static_cast<int>(k)}.DebugString()));
    const int64_t c = 2 * 2 * 3 * (4 / k);
    auto l = Make(Samples(2 * c + 1), o);  // Two steps; one sample left.
    ASSERT_NE(l, nullptr);
    absl::StatusOr<DatasetPtr> micro = l->ToInfeedDataset();
    ASSERT_TRUE(micro.ok()) << micro.status();
    EXPECT_EQ((*micro)->spec().DebugString(), "(float32[2,2], int64[2])");
    auto infeed = IPUInfeedQueue::Create(*micro, 2);
    ASSERT_TRUE(infeed.ok()) << infeed.status();
    const int64_t g = 4 / k;
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t di = 0; di < 2; ++di) {
        for (int64_t ga = 0; ga < 3; ++ga) {
          std::vector<std::vector<int64_t>> got(4);
          for (int r = 0; r < 4; ++r) {
            absl::StatusOr<Element> e = (*infeed)->Dequeue(r, 4, nullptr);
            ASSERT_TRUE(e.ok()) << e.status();
            got[r] = Ids(*e);
            const int64_t row = ((di * 3 + ga) * g + SliceOf(r, o)) * 2;
            EXPECT_EQ(got[r],
                      std::vector<int64_t>({s * c + row, s * c + row + 1}))
                << "step " << s << " di " << di << " ga " << ga << " replica "
                << r;
          }
        }
      }
    }
    // The epoch is over: the next dequeue sees the end of the dataset.
    EXPECT_FALSE((*infeed)->Dequeue(0, 4, nullptr).ok());
  }
}

TEST(DataLoaderTest, InfeedPassesAreEpochs) {
  DataLoaderOptions o;
  o.batch_size = 1;
  o.replicas = 2;
  auto l = Make(Samples(5), o);  // C = 2: 2 steps, sample 4 left over.
  ASSERT_NE(l, nullptr);
  absl::StatusOr<DatasetPtr> micro = l->ToInfeedDataset();
  ASSERT_TRUE(micro.ok()) << micro.status();
  absl::StatusOr<std::vector<Element>> all = Collect((*micro)->Repeat(2));
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<int64_t> ids;
  for (const Element& e : *all) ids.push_back(Ids(e)[0]);
  EXPECT_EQ(ids, std::vector<int64_t>({0, 1, 2, 3, 4, 0, 1, 2}));
  EXPECT_EQ(l->epoch(), 1);
}

// The infeed dataset shares the loader's state: it still works after the
// loader is gone (an infeed destroyed after its loader reads no freed memory).
TEST(DataLoaderTest, InfeedDatasetOutlivesTheLoader) {
  DataLoaderOptions o;
  o.batch_size = 2;
  o.mode = DataLoaderMode::kAsync;
  o.num_workers = 2;
  auto l = Make(Samples(8), o);
  ASSERT_NE(l, nullptr);
  absl::StatusOr<DatasetPtr> micro = l->ToInfeedDataset();
  ASSERT_TRUE(micro.ok()) << micro.status();
  l.reset();
  absl::StatusOr<std::vector<Element>> all = Collect(*micro);
  ASSERT_TRUE(all.ok()) << all.status();
  std::vector<int64_t> ids;
  for (const Element& e : *all) {
    for (int64_t id : Ids(e)) ids.push_back(id);
  }
  EXPECT_EQ(ids, std::vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(DataLoaderTest, InfeedRefusesAShortLastBatch) {
  DataLoaderOptions o;
  o.batch_size = 2;
  o.device_iterations = 3;
  o.drop_last = false;
  auto l = Make(Samples(13), o);
  ASSERT_NE(l, nullptr);
  absl::Status s = l->ToInfeedDataset().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Invalid batch dimension"));
  EXPECT_THAT(s.message(),
              HasSubstr("the last batch of each epoch has 1 samples"));
  EXPECT_THAT(s.message(),
              HasSubstr("batch_size(2) x device_iterations(3) x (replicas(1) "
                        "/ input_group_size(1)) x gradient_accumulation(1) = "
                        "6"));
  EXPECT_THAT(s.message(), HasSubstr("use drop_last = true"));
}

// Workers blocked on a full ring, or waiting for the first Next, are woken
// and joined by the destructor (a hang here fails by timeout).
TEST(DataLoaderTest, DestroyingWhileWorkersAreBlockedJoinsThem) {
  for (bool preload : {true, false}) {
    for (int round = 0; round < 10; ++round) {
      DataLoaderOptions o;
      o.batch_size = 2;
      o.mode = DataLoaderMode::kAsync;
      o.num_workers = 3;
      o.buffer_size = 2;
      o.early_preload = preload;
      auto l = Make(Samples(40), o);
      ASSERT_NE(l, nullptr);
      if (preload) {
        AwaitTrue(
            [&] { return l->ready_units() == 2 && l->waiting_workers() == 3; });
      } else {
        AwaitTrue([&] { return l->waiting_workers() == 3; });
        EXPECT_EQ(l->ready_units(), 0);  // Nothing loads before Next().
      }
      l.reset();
    }
  }
}

// load_indefinitely fills the ring past the end of the epoch; without it the
// workers stop at the epoch's last batch until StartNextEpoch.
TEST(DataLoaderTest, LoadIndefinitelyRunsIntoTheNextEpoch) {
  for (bool indefinitely : {true, false}) {
    DataLoaderOptions o;
    o.batch_size = 5;
    o.mode = DataLoaderMode::kAsync;
    o.num_workers = 2;
    o.buffer_size = 5;
    o.early_preload = true;
    o.load_indefinitely = indefinitely;
    auto l = Make(Samples(10), o);  // 2 steps per epoch.
    ASSERT_NE(l, nullptr);
    const int64_t expected = indefinitely ? 5 : 2;
    AwaitTrue([&] {
      return l->ready_units() == expected && l->waiting_workers() == 2;
    });
    EXPECT_EQ(Flat(Epoch(l.get())).size(), 10u);
    l->StartNextEpoch();
    EXPECT_EQ(Flat(Epoch(l.get())).size(), 10u);
  }
}

TEST(DataLoaderTest, ErrorTexts) {
  DataLoaderOptions o;
  o.batch_size = 0;
  EXPECT_THAT(CreateError(Samples(10), o).message(),
              HasSubstr("batch_size must be >= 1, got 0"));
  o = {};
  o.gradient_accumulation = -2;
  EXPECT_THAT(CreateError(Samples(10), o).message(),
              HasSubstr("gradient_accumulation must be >= 1, got -2"));

  o = {};
  o.replicas = 4;
  o.input_group_size = 8;
  absl::Status s = CreateError(Samples(100), o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("input_group_size cannot be larger than "
                        "replication_factor: input_group_size(8) > "
                        "replicas(4); use input_group_size 4"));
  EXPECT_THAT(s.message(), HasSubstr("1, 2, 4"));

  o.replicas = 6;
  o.input_group_size = 4;
  EXPECT_THAT(CreateError(Samples(100), o).message(),
              HasSubstr("input_group_size must be a factor of "
                        "replication_factor: replicas(6) / "
                        "input_group_size(4) leaves 2; use input_group_size "
                        "3 or 6"));
  o.input_group_size = 2;
  o.input_group_type = ReplicaGroupType::kAll;  // The collectives' type.
  EXPECT_THAT(CreateError(Samples(100), o).message(),
              HasSubstr("input_group_type cannot be All"));

  o = {};
  o.batch_size = 4;
  o.mode = DataLoaderMode::kAsync;
  o.drop_last = false;
  EXPECT_THAT(CreateError(Samples(100), o).message(),
              HasSubstr("The 'drop_last=False' option from the DataLoader "
                        "only works if 'rebatched_size' is specified too."));
  EXPECT_THAT(CreateError(Samples(100), o).message(),
              HasSubstr("use mode kAsyncRebatched"));

  o.mode = DataLoaderMode::kAsyncRebatched;
  o.rebatched_worker_size = 20;
  EXPECT_THAT(CreateError(Samples(100), o).message(),
              HasSubstr("The rebatched_worker_size (20) must be <= to the "
                        "combined batch size (4)"));

  o = {};
  o.mode = DataLoaderMode::kAsync;
  o.num_workers = 0;
  EXPECT_THAT(CreateError(Samples(100), o).message(),
              HasSubstr("needs num_workers >= 1, got 0"));

  o = {};
  o.process_index = 2;
  o.process_count = 2;
  EXPECT_THAT(CreateError(Samples(100), o).message(),
              HasSubstr("process_index(2) must be in [0, process_count(2))"));
}

// Samples(n), but sample i is what `odd(i)` returns if that is not empty
// (an unknown spec: the loader alone checks the samples).
DatasetPtr SamplesWith(int64_t n,
                       std::function<std::optional<Element>(int64_t)> odd) {
  return Range(0, n)->Map([odd](Element e) -> absl::StatusOr<Element> {
    const int64_t i = e[0].scalar<int64_t>();
    if (std::optional<Element> o = odd(i)) return *o;
    if (i == 13) return absl::DataLossError("bad record 13");
    return Element{Tensor::FromVector<float>(
                       {static_cast<float>(i), static_cast<float>(-i)}),
                   e[0]};
  });
}

// Samples that do not stack, in the middle of a unit (batch 4..7), in every
// mode: the exact texts, which check comes first (a later sample's read
// error, then a component count, then the lowest component), and the other
// batches intact.
TEST(DataLoaderTest, SamplesThatDoNotStackNameTheirBatch) {
  const Tensor i32 = Tensor::FromVector<int32_t>({5, -5});
  const Tensor f3 = Tensor::FromVector<float>({6, -6, 0});
  const Tensor f_scalar = Tensor::Scalar<float>(1);
  struct Case {
    std::function<std::optional<Element>(int64_t)> odd;
    int64_t n;
    absl::StatusCode code;
    std::string message;
  };
  const Case cases[] = {
      {[&](int64_t i) -> std::optional<Element> {
         if (i == 6) return Element{i32, Tensor::Scalar<int64_t>(i)};
         return std::nullopt;
       },
       12, absl::StatusCode::kInvalidArgument,
       "DataLoader: batching samples 4..7, component 0: Stack: element 2 is "
       "int32[2] but element 0 is float32[2]"},
      {[&](int64_t i) -> std::optional<Element> {
         if (i == 5) return Element{f3, Tensor::Scalar<int64_t>(i)};
         return std::nullopt;
       },
       12, absl::StatusCode::kInvalidArgument,
       "DataLoader: batching samples 4..7, component 0: Stack: element 1 is "
       "float32[3] but element 0 is float32[2]"},
      // Component 1 of sample 5 and component 0 of sample 7: component 0.
      {[&](int64_t i) -> std::optional<Element> {
         if (i == 5) {
           return Element{Tensor::FromVector<float>({5, -5}), f_scalar};
         }
         if (i == 7) return Element{f3, Tensor::Scalar<int64_t>(i)};
         return std::nullopt;
       },
       12, absl::StatusCode::kInvalidArgument,
       "DataLoader: batching samples 4..7, component 0: Stack: element 3 is "
       "float32[3] but element 0 is float32[2]"},
      // The first sample of the batch is the odd one: the others are named.
      {[&](int64_t i) -> std::optional<Element> {
         if (i == 4) return Element{i32, Tensor::Scalar<int64_t>(i)};
         return std::nullopt;
       },
       12, absl::StatusCode::kInvalidArgument,
       "DataLoader: batching samples 4..7, component 0: Stack: element 1 is "
       "float32[2] but element 0 is int32[2]"},
      // A shape mismatch of sample 5, then a component count at sample 6:
      // the count.
      {[&](int64_t i) -> std::optional<Element> {
         if (i == 5) return Element{f3, Tensor::Scalar<int64_t>(i)};
         if (i == 6) return Element{Tensor::FromVector<float>({6, -6})};
         return std::nullopt;
       },
       12, absl::StatusCode::kInvalidArgument,
       "DataLoader: sample 6 has 1 components, sample 4 has 2"},
      {[&](int64_t i) -> std::optional<Element> {
         if (i == 7) {
           return Element{Tensor::FromVector<float>({7, -7}),
                          Tensor::Scalar<int64_t>(i), f_scalar};
         }
         return std::nullopt;
       },
       12, absl::StatusCode::kInvalidArgument,
       "DataLoader: sample 7 has 3 components, sample 4 has 2"},
      // A mismatch at sample 9, a read error at sample 13 of the same batch
      // (8..15: n = 16, batch 8): the read error.
      {[&](int64_t i) -> std::optional<Element> {
         if (i == 9) return Element{f3, Tensor::Scalar<int64_t>(i)};
         return std::nullopt;
       },
       16, absl::StatusCode::kDataLoss, "DataLoader: sample 13: "},
  };
  for (size_t k = 0; k < std::size(cases); ++k) {
    const Case& c = cases[k];
    const int64_t b = c.n == 16 ? 8 : 4;
    for (auto mode : {DataLoaderMode::kSync, DataLoaderMode::kAsync,
                      DataLoaderMode::kAsyncRebatched}) {
      SCOPED_TRACE(::testing::Message()
                   << "case " << k << " " << DataLoaderModeName(mode));
      DataLoaderOptions o;
      o.batch_size = b;
      o.mode = mode;
      o.num_workers = 2;
      auto l = Make(SamplesWith(c.n, c.odd), o);
      ASSERT_NE(l, nullptr);
      for (int64_t step = 0; step < c.n / b; ++step) {
        absl::StatusOr<Element> batch = l->Next();
        if (step == 1) {
          EXPECT_EQ(batch.status().code(), c.code);
          if (c.code == absl::StatusCode::kDataLoss) {  // Map adds context.
            EXPECT_THAT(std::string(batch.status().message()),
                        StartsWith(c.message));
            EXPECT_THAT(batch.status().message(), HasSubstr("bad record 13"));
          } else {
            EXPECT_EQ(batch.status().message(), c.message);
          }
        } else {
          ASSERT_TRUE(batch.ok()) << batch.status();
          std::vector<int64_t> want(b);
          std::iota(want.begin(), want.end(), step * b);
          EXPECT_EQ(Ids(*batch), want);
        }
      }
    }
  }
}

// The loader reuses the memory of batches nobody holds any more, never that
// of one still held, whole or as a slice (the infeed's micro-batches): the
// held batches keep their values while later ones are loaded, in every mode.
TEST(DataLoaderTest, HeldBatchesAndSlicesKeepTheirValues) {
  for (auto mode : {DataLoaderMode::kSync, DataLoaderMode::kAsync,
                    DataLoaderMode::kAsyncRebatched}) {
    for (bool drop_last : {true, false}) {
      if (mode == DataLoaderMode::kAsync && !drop_last) continue;
      SCOPED_TRACE(::testing::Message()
                   << DataLoaderModeName(mode) << " drop_last=" << drop_last);
      DataLoaderOptions o;
      o.batch_size = 3;
      o.device_iterations = 2;  // C = 6.
      o.shuffle = true;
      o.seed = 11;
      o.drop_last = drop_last;
      o.mode = mode;
      o.num_workers = 2;
      o.rebatched_worker_size = 4;
      auto l = Make(Samples(40), o);
      ASSERT_NE(l, nullptr);
      // Batch k: held whole if k % 3 == 0, as rows 1..3 if k % 3 == 1,
      // dropped otherwise.
      struct Held {
        std::vector<int64_t> ids;
        Element tensors;
      };
      std::vector<Held> held;
      for (int epoch = 0; epoch < 3; ++epoch) {
        if (epoch > 0) l->StartNextEpoch();
        for (int64_t k = 0;; ++k) {
          absl::StatusOr<Element> b = l->Next();
          if (b.status().code() == absl::StatusCode::kOutOfRange) break;
          ASSERT_TRUE(b.ok()) << b.status();
          std::vector<int64_t> ids = Ids(*b);
          for (const Held& h : held) {
            for (size_t c = 0; c < b->size(); ++c) {
              EXPECT_FALSE((*b)[c].SharesBufferWith(h.tensors[c]));
            }
          }
          if (k % 3 == 0) {
            held.push_back({ids, *b});
          } else if (k % 3 == 1 && ids.size() >= 4) {
            held.push_back(
                {std::vector<int64_t>(ids.begin() + 1, ids.begin() + 4),
                 {(*b)[0].Slice(1, 4), (*b)[1].Slice(1, 4)}});
          }
        }
      }
      ASSERT_GT(held.size(), 6u);
      for (const Held& h : held) {
        EXPECT_EQ(Ids(h.tensors), h.ids);
        const std::vector<float> v = h.tensors[0].ToVector<float>();
        for (size_t i = 0; i < h.ids.size(); ++i) {
          EXPECT_EQ(v[2 * i], static_cast<float>(h.ids[i]));
          EXPECT_EQ(v[2 * i + 1], -static_cast<float>(h.ids[i]));
        }
      }
    }
  }
}

// kSync: the memory of a batch dropped (with its slices) is used again for a
// later one; while a slice of it is held, it is not.
TEST(DataLoaderTest, ADroppedBatchsMemoryIsReused) {
  DataLoaderOptions o;
  o.batch_size = 4;
  auto l = Make(Samples(40), o);
  ASSERT_NE(l, nullptr);
  absl::StatusOr<Element> b0 = l->Next();
  ASSERT_TRUE(b0.ok()) << b0.status();
  const void* first = (*b0)[0].raw_data();
  Tensor slice = (*b0)[0].Slice(2, 3);
  b0 = absl::UnknownError("dropped");
  absl::StatusOr<Element> b1 = l->Next();
  ASSERT_TRUE(b1.ok()) << b1.status();
  EXPECT_NE((*b1)[0].raw_data(), first);
  EXPECT_EQ(slice.ToVector<float>(), std::vector<float>({2, -2}));
  slice = Tensor();
  absl::StatusOr<Element> b2 = l->Next();
  ASSERT_TRUE(b2.ok()) << b2.status();
  EXPECT_EQ((*b2)[0].raw_data(), first);
  EXPECT_EQ(Ids(*b2), std::vector<int64_t>({8, 9, 10, 11}));
  EXPECT_EQ((*b1)[0].ToVector<float>(),
            std::vector<float>({4, -4, 5, -5, 6, -6, 7, -7}));
  // A batch outlives its loader.
  l.reset();
  EXPECT_EQ(Ids(*b2), std::vector<int64_t>({8, 9, 10, 11}));
}

// Where PopTorch yields 0 steps silently (one process) or divides by zero
// (several): an error with the sizes, the factors and settings that fit.
TEST(DataLoaderTest, ADatasetSmallerThanAStepIsAnError) {
  DataLoaderOptions o;
  o.batch_size = 4;
  o.device_iterations = 4;
  o.replicas = 8;
  o.input_group_size = 2;
  o.process_count = 2;
  o.process_index = 1;
  absl::Status s = CreateError(Samples(100), o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("has 100 samples, fewer than one "
                                     "combined batch per process"));
  EXPECT_THAT(s.message(),
              HasSubstr("batch_size(4) x device_iterations(4) x (replicas(8) "
                        "/ input_group_size(2)) x gradient_accumulation(1) = "
                        "64 samples per step x process_count(2) = 128"));
  EXPECT_THAT(s.message(), HasSubstr("an epoch would have 0 steps"));
  EXPECT_THAT(s.message(),
              HasSubstr("batch_size = 3, device_iterations = 3, drop_last = "
                        "false"));

  // The single-process case PopTorch runs as an empty epoch.
  o = {};
  o.batch_size = 8;
  s = CreateError(Samples(5), o);
  EXPECT_THAT(s.message(), HasSubstr("has 5 samples"));
  EXPECT_THAT(s.message(), HasSubstr("batch_size = 5"));

  o = {};
  o.drop_last = false;
  o.process_count = 4;
  EXPECT_THAT(CreateError(Samples(3), o).message(),
              HasSubstr("has 3 samples, fewer than process_count(4)"));

  o = {};
  EXPECT_THAT(CreateError(Range(0, 0), o).message(),
              HasSubstr("The Dataset is empty"));
  EXPECT_THAT(CreateError(Range(0, 3)->Repeat(), o).message(),
              HasSubstr("is infinite"));
}

// Processes that read different data, or shuffle with different seeds,
// would not partition the dataset: the keys they exchange say which.
TEST(DataLoaderTest, ProcessesThatDisagreeAreNamed) {
  std::vector<DataLoaderPlanKey> keys;
  for (int64_t p = 0; p < 3; ++p) {
    DataLoaderOptions o;
    o.batch_size = 4;
    o.process_index = p;
    o.process_count = 3;
    o.shuffle = true;
    o.seed = 9;
    auto l = Make(Samples(p == 2 ? 98 : 100), o);
    ASSERT_NE(l, nullptr);
    keys.push_back(l->plan_key());
  }
  absl::Status s = CheckProcessesAgree(keys);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("processes disagree on the dataset length (samples): "
                        "process 0 has 100, process 2 has 98"));
  keys[2].num_samples = 100;
  EXPECT_TRUE(CheckProcessesAgree(keys).ok());
  keys[1].seed = 10;
  EXPECT_THAT(CheckProcessesAgree(keys).message(),
              HasSubstr("disagree on the seed: process 0 has 9, process 1 "
                        "has 10"));
  keys.pop_back();
  EXPECT_THAT(CheckProcessesAgree(keys).message(),
              HasSubstr("got 2 keys, but process 0 has process_count(3)"));
}

}  // namespace
}  // namespace ipuflow::feeds

namespace ipuflow::feeds {
namespace {

// CreateAt (a checkpoint's resume) at every step of three epochs gives the
// batches an uninterrupted kSync loader gives from there, in every mode and
// worker count, shuffled or not, with the leftovers of drop_last carried
// between epochs as they are.
TEST(DataLoaderCreateAtTest, ContinuesExactlyWhereTheLoaderStood) {
  for (bool shuffle : {true, false}) {
    DataLoaderOptions base;
    base.batch_size = 3;
    base.device_iterations = 2;
    base.replicas = 2;  // C = 12; 157 samples: 13 steps, 1 left over.
    base.shuffle = shuffle;
    base.seed = 5;
    auto sync = Make(Samples(157), base);
    ASSERT_NE(sync, nullptr);
    std::vector<std::vector<int64_t>> expected;  // Every step of 3 epochs.
    for (int epoch = 0; epoch < 3; ++epoch) {
      if (epoch > 0) sync->StartNextEpoch();
      for (const auto& b : Epoch(sync.get())) expected.push_back(b);
    }
    ASSERT_EQ(expected.size(), 39u);
    for (auto [mode, workers, worker_size] :
         {std::tuple{DataLoaderMode::kSync, 1, 0},
          std::tuple{DataLoaderMode::kAsync, 2, 0},
          std::tuple{DataLoaderMode::kAsyncRebatched, 2, 5}}) {
      for (int64_t step : {0, 1, 6, 12, 13, 14, 26}) {
        SCOPED_TRACE(::testing::Message()
                     << DataLoaderModeName(mode) << " shuffle=" << shuffle
                     << " step=" << step);
        DataLoaderOptions o = base;
        o.mode = mode;
        o.num_workers = workers;
        o.rebatched_worker_size = worker_size;
        o.early_preload = true;
        auto l =
            DataLoader::CreateAt(Samples(157), o, step / 13, (step % 13) * 12);
        ASSERT_TRUE(l.ok()) << l.status();
        EXPECT_EQ((*l)->start_epoch(), step / 13);
        EXPECT_EQ((*l)->start_sample(), (step % 13) * 12);
        std::vector<std::vector<int64_t>> got;
        for (int epoch = static_cast<int>(step / 13); epoch < 3; ++epoch) {
          if (static_cast<int64_t>(got.size()) > 0 || epoch > step / 13) {
            (*l)->StartNextEpoch();
          }
          for (const auto& b : Epoch(l->get())) got.push_back(b);
        }
        EXPECT_EQ(got, std::vector<std::vector<int64_t>>(
                           expected.begin() + step, expected.end()));
      }
    }
  }
  // The end of an epoch is the start of the next; positions that are not
  // whole steps are refused.
  DataLoaderOptions o;
  o.batch_size = 4;  // C = 4, 10 samples: 2 steps, 8 samples per epoch.
  auto end = DataLoader::CreateAt(Samples(10), o, 0, 8);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ((*end)->epoch(), 1);
  absl::Status s = DataLoader::CreateAt(Samples(10), o, 0, 6).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("cannot start at sample 6 of epoch 0: the position "
                        "must be a whole number of steps of"));
  EXPECT_FALSE(DataLoader::CreateAt(Samples(10), o, -1, 0).ok());
  EXPECT_FALSE(DataLoader::CreateAt(Samples(10), o, 0, 12).ok());
}

}  // namespace
}  // namespace ipuflow::feeds
