// ThreadPool: the split rule (ShardCount) as a table, without timing, and
// ParallelFor's coverage, nesting and inline fallback.
#include "core/thread_pool.h"

#include <atomic>
#include <vector>

#include "core/mutex.h"
#include "gtest/gtest.h"

namespace ipuflow {
namespace {

constexpr double kShard = ThreadPool::kMinCyclesPerShard;

TEST(ThreadPoolTest, ShardCountKeepsSmallWorkOnTheCaller) {
  struct Case {
    int64_t n;
    double cost;
    int parallelism;
    int64_t shards;
  };
  const Case cases[] = {
      {0, 1e9, 2, 0},  // Nothing to do.
      {-3, 1e9, 2, 0},
      {1, 1e9, 2, 1},                   // One unit cannot be split.
      {1000, 1, 2, 1},                  // 1000 cycles: inline.
      {100, kShard / 100, 2, 1},        // One shard's worth.
      {100, 2 * kShard / 100, 2, 2},    // Two shards' worth.
      {100, 1.9 * kShard / 100, 2, 1},  // Not quite two.
      {100, 10 * kShard / 100, 2, 2},   // Capped by the threads.
      {100, 10 * kShard / 100, 4, 4},
      {3, 10 * kShard, 8, 3},    // Capped by the units.
      {100, 10 * kShard, 1, 1},  // One thread: inline.
      {100, 10 * kShard, 0, 1},
      {100, -5, 2, 1},  // Nonsense cost: inline.
      // A 256 x 256 x 256 MatMul (rows of 2*256*256 flops): split in two.
      {256, 2.0 * 256 * 256, 2, 2},
      // ReluGrad over 57,600 floats at 4 cycles each: 3.8 shards' worth.
      {57600, 4, 2, 2},
      // ReluGrad over 5,760 floats: under one shard, inline.
      {5760, 4, 2, 1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ThreadPool::ShardCount(c.n, c.cost, c.parallelism), c.shards)
        << "n=" << c.n << " cost=" << c.cost
        << " parallelism=" << c.parallelism;
  }
}

TEST(ThreadPoolTest, ParallelismIsCappedByCores) {
  const int cores =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool none("none", 0), many("many", cores + 3);
  EXPECT_EQ(none.Parallelism(), 1);
  EXPECT_EQ(many.Parallelism(), cores);
}

// Every unit of [0, n) is visited exactly once, whatever the split.
TEST(ThreadPoolTest, ParallelForCoversEachUnitOnce) {
  for (int workers : {0, 1, 2, 3}) {
    ThreadPool pool("cover", workers);
    for (int64_t n : {1, 2, 3, 7, 64, 1001}) {
      for (double cost : {1.0, kShard / 2, 3 * kShard}) {
        std::vector<std::atomic<int>> hits(n);
        pool.ParallelFor(n, cost, [&](int64_t b, int64_t e) {
          ASSERT_LE(0, b);
          ASSERT_LT(b, e);
          ASSERT_LE(e, n);
          for (int64_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[i].load(), 1) << "workers=" << workers << " n=" << n
                                       << " cost=" << cost << " i=" << i;
        }
      }
    }
  }
}

// The caller claims shards too, so a ParallelFor inside a task of the same
// pool completes even with every worker busy in that task.
TEST(ThreadPoolTest, NestedParallelForCompletes) {
  ThreadPool pool("nested", 1);
  Notification done;
  std::atomic<int64_t> sum{0};
  pool.Schedule([&] {
    pool.ParallelFor(100, 10 * kShard, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
    });
    done.Notify();
  });
  done.WaitForNotification();
  EXPECT_EQ(sum.load(), 99 * 100 / 2);
}

// Many back-to-back loops (the executor's pattern): no shard lost or run
// twice when workers wake late and find their shards taken.
TEST(ThreadPoolTest, BackToBackLoops) {
  ThreadPool pool("loops", 2);
  int64_t total = 0;
  for (int round = 0; round < 2000; ++round) {
    std::atomic<int64_t> sum{0};
    pool.ParallelFor(8, kShard,
                     [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
    total += sum.load();
  }
  EXPECT_EQ(total, 2000 * 8);
}

}  // namespace
}  // namespace ipuflow
