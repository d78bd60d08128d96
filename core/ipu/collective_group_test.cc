// CollectiveGroup on R real threads: replica groups as Graphcore defines
// them, all-reduce / reduce-scatter / all-gather values checked by hand,
// padding, bitwise identical results, byte counts and cancellation.
#include "core/ipu/collective_group.h"

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "core/half.h"
#include "core/mutex.h"
#include "gtest/gtest.h"

namespace ipuflow {
namespace {

using Op = CollectiveGroup::ReduceOp;

// Runs fn(r) on R threads, one per replica; returns their statuses.
std::vector<absl::Status> OnReplicas(
    int R, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> st(R);
  std::vector<std::thread> threads;
  for (int r = 0; r < R; ++r) {
    threads.emplace_back([&, r] { st[r] = fn(r); });
  }
  for (auto& t : threads) t.join();
  return st;
}

void ExpectAllOk(const std::vector<absl::Status>& st) {
  for (size_t r = 0; r < st.size(); ++r) {
    EXPECT_TRUE(st[r].ok()) << "replica " << r << ": " << st[r];
  }
}

std::vector<float> Values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements());
}

// in_r[j] = (r + 1) * (j + 1).
Tensor Input(int r, int n) {
  std::vector<float> v(n);
  for (int j = 0; j < n; ++j) v[j] = static_cast<float>((r + 1) * (j + 1));
  return Tensor::FromVector<float>(v, {n});
}

TEST(ReplicaGroupsTest, ConsecutiveAndOrthogonalAsPoplar) {
  // 8 replicas. Consecutive(2): {0,1} {2,3} {4,5} {6,7}.
  ReplicaGroups c = ReplicaGroups::Consecutive(2);
  EXPECT_EQ(c.Member(5, 0, 8), 4);
  EXPECT_EQ(c.Member(5, 1, 8), 5);
  EXPECT_EQ(c.Rank(5, 8), 1);
  EXPECT_EQ(c.GroupIndex(5, 8), 2);
  // Orthogonal(2): m = 4 groups {0,4} {1,5} {2,6} {3,7}.
  ReplicaGroups o = ReplicaGroups::Orthogonal(2);
  EXPECT_EQ(o.Member(5, 0, 8), 1);
  EXPECT_EQ(o.Member(1, 1, 8), 5);
  EXPECT_EQ(o.Rank(5, 8), 1);
  EXPECT_EQ(o.Rank(1, 8), 0);
  EXPECT_EQ(o.GroupIndex(5, 8), 1);
  // Orthogonal(4): m = 2 groups {0,2,4,6} {1,3,5,7}.
  ReplicaGroups o4 = ReplicaGroups::Orthogonal(4);
  std::vector<int> g1;
  for (int k = 0; k < 4; ++k) g1.push_back(o4.Member(3, k, 8));
  EXPECT_EQ(g1, (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(o4.Rank(6, 8), 3);
  // All: one group in replica order.
  EXPECT_EQ(ReplicaGroups::All().GroupSize(8).value(), 8);
  EXPECT_EQ(ReplicaGroups::All().Rank(6, 8), 6);
}

TEST(ReplicaGroupsTest, InvalidSizesNameSizeAndReplicaCount) {
  for (ReplicaGroups g :
       {ReplicaGroups::Consecutive(3), ReplicaGroups::Orthogonal(0),
        ReplicaGroups::Consecutive(-2)}) {
    absl::StatusOr<int> s = g.GroupSize(8);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(absl::StrCat("size ", g.size)),
              std::string::npos)
        << s.status();
    EXPECT_NE(s.status().message().find("replicas, 8"), std::string::npos)
        << s.status();
  }
  // And through a collective, on every replica.
  CollectiveGroup group(4);
  auto st = OnReplicas(4, [&](int r) {
    Tensor in = Input(r, 2), out(DType::kFloat32, {2});
    return group.AllReduce(r, "k", in, out, Op::kSum,
                           ReplicaGroups::Orthogonal(3));
  });
  for (const auto& s : st)
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

TEST(CollectiveGroupTest, AllReduceOverAllReplicas) {
  for (int R : {1, 2, 4, 8}) {
    CollectiveGroup group(R);
    std::vector<Tensor> out(R, Tensor());
    for (auto& t : out) t = Tensor(DType::kFloat32, {3});
    ExpectAllOk(OnReplicas(R, [&](int r) {
      return group.AllReduce(r, "sum", Input(r, 3), out[r], Op::kSum);
    }));
    // sum_r (r + 1) = R (R + 1) / 2, times (j + 1).
    const float s = R * (R + 1) / 2.0f;
    for (int r = 0; r < R; ++r) {
      EXPECT_EQ(Values(out[r]), (std::vector<float>{s, 2 * s, 3 * s}))
          << "R=" << R << " replica " << r;
    }
  }
}

TEST(CollectiveGroupTest, AllReduceWithinGroups) {
  const int R = 8;
  CollectiveGroup group(R);
  std::vector<Tensor> cons(R), orth(R), mean(R);
  ExpectAllOk(OnReplicas(R, [&](int r) -> absl::Status {
    cons[r] = Tensor(DType::kFloat32, {1});
    orth[r] = Tensor(DType::kFloat32, {1});
    mean[r] = Tensor(DType::kFloat32, {1});
    RETURN_IF_ERROR(group.AllReduce(r, "x", Input(r, 1), cons[r], Op::kSum,
                                    ReplicaGroups::Consecutive(2)));
    // The same key with other groups is another rendezvous.
    RETURN_IF_ERROR(group.AllReduce(r, "x", Input(r, 1), orth[r], Op::kSum,
                                    ReplicaGroups::Orthogonal(2)));
    return group.AllReduce(r, "m", Input(r, 1), mean[r], Op::kMean,
                           ReplicaGroups::Orthogonal(4));
  }));
  // Consecutive(2): {0,1} -> 1+2, {2,3} -> 3+4, {4,5} -> 5+6, {6,7} -> 7+8.
  const float c[R] = {3, 3, 7, 7, 11, 11, 15, 15};
  // Orthogonal(2): {0,4} -> 1+5, {1,5} -> 2+6, {2,6} -> 3+7, {3,7} -> 4+8.
  const float o[R] = {6, 8, 10, 12, 6, 8, 10, 12};
  // Orthogonal(4) mean: {0,2,4,6} -> (1+3+5+7)/4, {1,3,5,7} -> (2+4+6+8)/4.
  const float m[R] = {4, 5, 4, 5, 4, 5, 4, 5};
  for (int r = 0; r < R; ++r) {
    EXPECT_EQ(cons[r].data<float>()[0], c[r]) << "replica " << r;
    EXPECT_EQ(orth[r].data<float>()[0], o[r]) << "replica " << r;
    EXPECT_EQ(mean[r].data<float>()[0], m[r]) << "replica " << r;
  }
}

TEST(CollectiveGroupTest, ReduceScatterPadsToTheGroupSize) {
  // 4 replicas, n = 5: sum = 10 (j + 1) = [10 20 30 40 50], chunks of 2.
  CollectiveGroup group(4);
  std::vector<Tensor> out(4), mean(4);
  ExpectAllOk(OnReplicas(4, [&](int r) -> absl::Status {
    out[r] = Tensor(DType::kFloat32, {2});
    mean[r] = Tensor(DType::kFloat32, {2});
    RETURN_IF_ERROR(
        group.ReduceScatter(r, "rs", Input(r, 5), out[r], Op::kSum));
    return group.ReduceScatter(r, "rm", Input(r, 5), mean[r], Op::kMean);
  }));
  EXPECT_EQ(Values(out[0]), (std::vector<float>{10, 20}));
  EXPECT_EQ(Values(out[1]), (std::vector<float>{30, 40}));
  EXPECT_EQ(Values(out[2]), (std::vector<float>{50, 0}));
  EXPECT_EQ(Values(out[3]), (std::vector<float>{0, 0}));
  EXPECT_EQ(Values(mean[0]), (std::vector<float>{2.5, 5}));
  EXPECT_EQ(Values(mean[2]), (std::vector<float>{12.5, 0}));
}

TEST(CollectiveGroupTest, ReduceScatterWithinGroups) {
  for (int R : {1, 2, 4, 8}) {
    for (bool orthogonal : {false, true}) {
      const int G = R == 1 ? 1 : 2;
      ReplicaGroups groups = orthogonal ? ReplicaGroups::Orthogonal(G)
                                        : ReplicaGroups::Consecutive(G);
      CollectiveGroup group(R);
      std::vector<Tensor> out(R);
      // n = 3 with G = 2: chunks of 2, the last one padded.
      ExpectAllOk(OnReplicas(R, [&](int r) {
        out[r] = Tensor(DType::kFloat32, {G == 1 ? 3 : 2});
        return group.ReduceScatter(r, "rs", Input(r, 3), out[r], Op::kSum,
                                   groups);
      }));
      for (int r = 0; r < R; ++r) {
        // The group's members, as poplar lists them.
        float s = 0;
        for (int k = 0; k < G; ++k) s += groups.Member(r, k, R) + 1;
        const int rank = groups.Rank(r, R);
        std::vector<float> want = G == 1 ? std::vector<float>{s, 2 * s, 3 * s}
                                  : rank == 0 ? std::vector<float>{s, 2 * s}
                                              : std::vector<float>{3 * s, 0};
        EXPECT_EQ(Values(out[r]), want)
            << "R=" << R << " " << groups.DebugString() << " replica " << r;
      }
    }
  }
  // By hand, R = 8, Orthogonal(2): replica 4 is rank 1 of {0,4}: 1+5 = 6.
  CollectiveGroup group(8);
  std::vector<Tensor> out(8);
  ExpectAllOk(OnReplicas(8, [&](int r) {
    out[r] = Tensor(DType::kFloat32, {2});
    return group.ReduceScatter(r, "rs", Input(r, 4), out[r], Op::kSum,
                               ReplicaGroups::Orthogonal(2));
  }));
  EXPECT_EQ(Values(out[0]), (std::vector<float>{6, 12}));
  EXPECT_EQ(Values(out[4]), (std::vector<float>{18, 24}));
  EXPECT_EQ(Values(out[7]), (std::vector<float>{36, 48}));  // {3,7}: 4+8.
}

TEST(CollectiveGroupTest, ReduceScatterLocalKeepsOwnChunk) {
  CollectiveGroup group(2);
  std::vector<Tensor> out(2);
  ExpectAllOk(OnReplicas(2, [&](int r) {
    out[r] = Tensor(DType::kFloat32, {2});
    return group.ReduceScatter(r, "local", Input(r, 3), out[r], Op::kLocal);
  }));
  EXPECT_EQ(Values(out[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(Values(out[1]), (std::vector<float>{6, 0}));  // 2 * 3, padding.
  EXPECT_EQ(group.bytes_sent(0), 0);
}

TEST(CollectiveGroupTest, AllGatherInRankOrder) {
  for (int R : {1, 2, 4, 8}) {
    CollectiveGroup group(R);
    std::vector<Tensor> out(R);
    ExpectAllOk(OnReplicas(R, [&](int r) {
      out[r] = Tensor(DType::kFloat32, {R, 2});
      return group.AllGather(r, "ag", Input(r, 2), out[r]);
    }));
    std::vector<float> want;
    for (int k = 0; k < R; ++k) {
      want.push_back(k + 1);
      want.push_back(2 * (k + 1));
    }
    for (int r = 0; r < R; ++r) EXPECT_EQ(Values(out[r]), want) << "R=" << R;
  }
  // Orthogonal(2) over 4: {0,2} and {1,3}.
  CollectiveGroup group(4);
  std::vector<Tensor> out(4);
  ExpectAllOk(OnReplicas(4, [&](int r) {
    out[r] = Tensor(DType::kFloat32, {4});
    return group.AllGather(r, "ag", Input(r, 2), out[r],
                           ReplicaGroups::Orthogonal(2));
  }));
  EXPECT_EQ(Values(out[0]), (std::vector<float>{1, 2, 3, 6}));
  EXPECT_EQ(Values(out[2]), (std::vector<float>{1, 2, 3, 6}));
  EXPECT_EQ(Values(out[3]), (std::vector<float>{2, 4, 4, 8}));
}

TEST(CollectiveGroupTest, BitwiseIdenticalAndEqualToScatterThenGather) {
  const int R = 8, n = 37;  // Not a multiple of 8: the last chunks padded.
  CollectiveGroup group(R);
  std::vector<Tensor> in(R), reduced(R), gathered(R);
  for (int r = 0; r < R; ++r) {
    std::vector<float> v(n);
    // Values whose float sum depends on the order of addition.
    for (int j = 0; j < n; ++j)
      v[j] = 1.0f / (3 + r * 7 + j) * (r % 2 ? 1e4f : 1);
    in[r] = Tensor::FromVector<float>(v, {n});
  }
  const int chunk = (n + R - 1) / R;
  ExpectAllOk(OnReplicas(R, [&](int r) -> absl::Status {
    reduced[r] = in[r].Copy();
    // In place: the output aliases the input.
    RETURN_IF_ERROR(group.AllReduce(r, "ar", reduced[r], reduced[r], Op::kSum));
    Tensor shard(DType::kFloat32, {chunk});
    RETURN_IF_ERROR(group.ReduceScatter(r, "rs", in[r], shard, Op::kSum));
    gathered[r] = Tensor(DType::kFloat32, {R * chunk});
    return group.AllGather(r, "ag", shard, gathered[r]);
  }));
  for (int r = 0; r < R; ++r) {
    EXPECT_EQ(std::memcmp(reduced[r].raw_data(), reduced[0].raw_data(), n * 4),
              0);
    EXPECT_EQ(std::memcmp(gathered[r].raw_data(), reduced[0].raw_data(), n * 4),
              0);
    for (int j = n; j < R * chunk; ++j)
      EXPECT_EQ(gathered[r].data<float>()[j], 0);
  }
}

// Groups of two take a one-pass path: still (rank 0 + rank 1), then / 2
// for the mean, element by element, as computed here by hand (float32 and
// float16, whose sums round, and int32, whose mean truncates).
TEST(CollectiveGroupTest, PairsReduceInRankOrderBitwise) {
  const int n = 1000;  // Several vector packets and a tail.
  for (Op op : {Op::kSum, Op::kMean}) {
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kInt32}) {
      // R = 4 in consecutive pairs: each pair reduces on its own.
      const int R = 4;
      CollectiveGroup group(R);
      std::vector<Tensor> in(R), out(R);
      for (int r = 0; r < R; ++r) {
        std::vector<float> v(n);
        for (int j = 0; j < n; ++j) {
          v[j] = (r % 2 ? 1e3f : 1.0f) / (3 + r * 7 + j) * (j % 3 ? 1 : -1);
        }
        Tensor f = Tensor::FromVector<float>(v, {n});
        in[r] = Tensor(dtype, {n});
        for (int j = 0; j < n; ++j) {
          if (dtype == DType::kFloat32) in[r].data<float>()[j] = v[j];
          if (dtype == DType::kFloat16) {
            in[r].data<Eigen::half>()[j] = Eigen::half(v[j]);
          }
          if (dtype == DType::kInt32) {
            in[r].data<int32_t>()[j] = static_cast<int32_t>(v[j] * 1e5f);
          }
        }
        out[r] = Tensor(dtype, {n});
      }
      ExpectAllOk(OnReplicas(R, [&](int r) {
        return group.AllReduce(r, "pair", in[r], out[r], op,
                               ReplicaGroups::Consecutive(2));
      }));
      for (int r = 0; r < R; ++r) {
        const Tensor& a = in[r - r % 2];
        const Tensor& b = in[r - r % 2 + 1];
        for (int j = 0; j < n; ++j) {
          if (dtype == DType::kFloat32) {
            float want = a.data<float>()[j] + b.data<float>()[j];
            if (op == Op::kMean) want = want / 2.0f;
            ASSERT_EQ(std::memcmp(&want, out[r].data<float>() + j, 4), 0)
                << "float32 r=" << r << " j=" << j;
          } else if (dtype == DType::kFloat16) {
            Eigen::half want =
                a.data<Eigen::half>()[j] + b.data<Eigen::half>()[j];
            if (op == Op::kMean) want = want / Eigen::half(2);
            ASSERT_EQ(std::memcmp(&want, out[r].data<Eigen::half>() + j, 2), 0)
                << "float16 r=" << r << " j=" << j;
          } else {
            int32_t want = a.data<int32_t>()[j] + b.data<int32_t>()[j];
            if (op == Op::kMean) want = want / 2;
            ASSERT_EQ(out[r].data<int32_t>()[j], want)
                << "int32 r=" << r << " j=" << j;
          }
        }
      }
    }
  }
}

TEST(CollectiveGroupTest, CountsBytesAsARing) {
  CollectiveGroup group(4);
  ExpectAllOk(OnReplicas(4, [&](int r) -> absl::Status {
    Tensor out(DType::kFloat32, {8});
    RETURN_IF_ERROR(group.AllReduce(r, "ar", Input(r, 8), out, Op::kSum));
    return absl::OkStatus();
  }));
  EXPECT_EQ(group.bytes_sent(1), 2 * 3 * 32 / 4);  // 2 (G-1)/G x 32 bytes.
  group.Reset();
  ExpectAllOk(OnReplicas(4, [&](int r) -> absl::Status {
    Tensor shard(DType::kFloat32, {2});
    // n = 7 pads to 8: (G-1)/G x 32 bytes.
    RETURN_IF_ERROR(group.ReduceScatter(r, "rs", Input(r, 7), shard, Op::kSum));
    return absl::OkStatus();
  }));
  EXPECT_EQ(group.bytes_sent(2), 24);
  group.Reset();
  ExpectAllOk(OnReplicas(4, [&](int r) -> absl::Status {
    // Consecutive(2): output 2 x 2 floats, (G-1)/G x 16 bytes.
    return group.AllGather(r, "ag", Input(r, 2), Tensor(DType::kFloat32, {4}),
                           ReplicaGroups::Consecutive(2));
  }));
  EXPECT_EQ(group.bytes_sent(3), 8);
}

TEST(CollectiveGroupTest, ReusedKeyInALoop) {
  CollectiveGroup group(4);
  std::vector<float> last(4);
  ExpectAllOk(OnReplicas(4, [&](int r) -> absl::Status {
    Tensor x = Tensor::FromVector<float>({1.0f}, {1});
    for (int step = 0; step < 5; ++step) {
      RETURN_IF_ERROR(group.AllReduce(r, "loop", x, x, Op::kSum,
                                      ReplicaGroups::Consecutive(2)));
    }
    last[r] = x.data<float>()[0];
    return absl::OkStatus();
  }));
  for (float v : last) EXPECT_EQ(v, 32);  // Doubled 5 times.
}

TEST(CollectiveGroupTest, DisagreeingInputsFailOnEveryMember) {
  CollectiveGroup group(2);
  auto st = OnReplicas(2, [&](int r) {
    Tensor in = Input(r, r == 0 ? 4 : 6);
    Tensor out(DType::kFloat32, {r == 0 ? 8 : 12});
    return group.AllGather(r, "ag", in, out);
  });
  for (const auto& s : st) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("disagree"), std::string::npos) << s;
  }
  // A wrong output size is caught before the rendezvous.
  absl::Status s = group.ReduceScatter(0, "rs", Input(0, 5),
                                       Tensor(DType::kFloat32, {2}), Op::kSum);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("3 elements"), std::string::npos) << s;
}

TEST(CollectiveGroupTest, CancelWakesAWaiter) {
  CollectiveGroup group(2);
  Notification entering;
  absl::Status waiter;
  // Replica 1 never comes: only Cancel can release replica 0. Whether it
  // is already waiting or not when Cancel comes, it must return Cancelled.
  std::thread t([&] {
    entering.Notify();
    Tensor out(DType::kFloat32, {2});
    waiter = group.ReduceScatter(0, "rs", Input(0, 4), out, Op::kSum,
                                 ReplicaGroups::Consecutive(2));
  });
  entering.WaitForNotification();
  group.Cancel(absl::CancelledError("replica 1 failed"));
  t.join();
  EXPECT_TRUE(absl::IsCancelled(waiter)) << waiter;
  EXPECT_NE(waiter.message().find("replica 1 failed"), std::string::npos);
  // After Reset the group works again, the abandoned arrival forgotten.
  group.Reset();
  std::vector<Tensor> out(2);
  ExpectAllOk(OnReplicas(2, [&](int r) {
    out[r] = Tensor(DType::kFloat32, {2});
    return group.ReduceScatter(r, "rs", Input(r, 4), out[r], Op::kSum,
                               ReplicaGroups::Consecutive(2));
  }));
  EXPECT_EQ(Values(out[1]), (std::vector<float>{9, 12}));
}

}  // namespace
}  // namespace ipuflow
