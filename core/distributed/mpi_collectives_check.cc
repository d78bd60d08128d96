// Run by mpirun_test.sh under `mpirun -np P`: CollectiveGroup across P
// processes x R local replicas (MpiLink) against one in-process group of
// P x R replicas, bitwise, for every reduce op, dtype, replica group type
// and a size that spans many chunks; Broadcast and AllGatherStrings.
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "core/distributed/mpi_link.h"
#include "core/half.h"
#include "core/ipu/collective_group.h"
#include "gtest/gtest.h"

namespace ipuflow::distributed {
namespace {

using Op = CollectiveGroup::ReduceOp;
constexpr int kLocalReplicas = 2;

std::shared_ptr<MpiLink> Link() {
  MpiLink::Options options;
  options.chunk_bytes = 64 << 10;  // Large tensors span many chunks.
  static std::shared_ptr<MpiLink> link = *MpiLink::World(options);
  return link;
}

std::vector<absl::Status> OnThreads(
    int n, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> st(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { st[r] = fn(r); });
  for (auto& t : threads) t.join();
  return st;
}

// Global replica g's input: values whose exponents spread over 2^-12..2^12,
// so a sum in any other order than rank order differs in some element.
Tensor Input(DType dtype, int g, int64_t n) {
  std::mt19937 rng(1000 + g);
  std::uniform_real_distribution<float> mant(-1, 1);
  std::uniform_int_distribution<int> exp(-12, 12);
  Tensor t(dtype, TensorShape({n}));
  for (int64_t j = 0; j < n; ++j) {
    const float v = std::ldexp(mant(rng), exp(rng));
    switch (dtype) {
      case DType::kFloat32:
        t.data<float>()[j] = v;
        break;
      case DType::kFloat16:
        t.data<half>()[j] = half(v / 64);
        break;
      default:
        t.data<int32_t>()[j] = static_cast<int32_t>(v * 1000);
    }
  }
  return t;
}

enum class Kind { kAllReduce, kReduceScatter, kAllGather };

int64_t OutElements(Kind kind, int64_t n, int g) {
  return kind == Kind::kAllReduce       ? n
         : kind == Kind::kReduceScatter ? (n + g - 1) / g
                                        : g * n;
}

absl::Status Call(CollectiveGroup& group, Kind kind, int replica,
                  const std::string& key, const Tensor& in, const Tensor& out,
                  Op op, const ReplicaGroups& groups) {
  switch (kind) {
    case Kind::kAllReduce:
      return group.AllReduce(replica, key, in, out, op, groups);
    case Kind::kReduceScatter:
      return group.ReduceScatter(replica, key, in, out, op, groups);
    case Kind::kAllGather:
      return group.AllGather(replica, key, in, out, groups);
  }
  return absl::InternalError("kind");
}

// Every local replica's output across processes equals the in-process
// group's output for the same global replica, bit for bit.
void ExpectAcrossEqualsInProcess(Kind kind, Op op, DType dtype, int64_t n,
                                 const ReplicaGroups& groups,
                                 const std::string& key) {
  auto link = Link();
  const int P = link->process_count(), me = link->process_index();
  const int R = kLocalReplicas, N = P * R;
  const int g = *groups.GroupSize(N);
  const int64_t out_n = OutElements(kind, n, g);

  CollectiveGroup one(N);
  std::vector<Tensor> in(N), expected(N);
  for (int r = 0; r < N; ++r) {
    in[r] = Input(dtype, r, n);
    expected[r] = Tensor(dtype, TensorShape({out_n}));
  }
  for (const absl::Status& s : OnThreads(N, [&](int r) {
         return Call(one, kind, r, key, in[r], expected[r], op, groups);
       })) {
    ASSERT_TRUE(s.ok()) << s;
  }

  CollectiveGroup across(R, link, /*program_tag=*/7);
  ASSERT_EQ(across.num_replicas(), N);
  std::vector<Tensor> out(R);
  for (int r = 0; r < R; ++r) out[r] = Tensor(dtype, TensorShape({out_n}));
  for (const absl::Status& s : OnThreads(R, [&](int r) {
         return Call(across, kind, r, key, in[me * R + r], out[r], op, groups);
       })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  for (int r = 0; r < R; ++r) {
    const Tensor& want = expected[me * R + r];
    ASSERT_EQ(
        std::memcmp(out[r].raw_data(), want.raw_data(), want.TotalBytes()), 0)
        << key << ": process " << me << " replica " << r << " (global "
        << me * R + r << ") differs from one process with " << N << " replicas";
  }
}

std::vector<ReplicaGroups> GroupsSpanningProcesses(int N) {
  std::vector<ReplicaGroups> all = {ReplicaGroups::All()};
  for (int k = 2; k < N; ++k) {
    if (N % k != 0) continue;
    all.push_back(ReplicaGroups::Consecutive(k));
    all.push_back(ReplicaGroups::Orthogonal(k));
  }
  return all;
}

TEST(MpiCollectivesTest, AllReduceBitwiseAsOneProcess) {
  const int N = Link()->process_count() * kLocalReplicas;
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kInt32}) {
    for (int64_t n : {1, 7, 40001}) {
      for (Op op : {Op::kSum, Op::kMean}) {
        for (const ReplicaGroups& groups : GroupsSpanningProcesses(N)) {
          SCOPED_TRACE(testing::Message() << DTypeName(dtype) << " n=" << n
                                          << " " << groups.DebugString()
                                          << " mean=" << (op == Op::kMean));
          ExpectAcrossEqualsInProcess(Kind::kAllReduce, op, dtype, n, groups,
                                      "ar");
        }
      }
    }
  }
}

TEST(MpiCollectivesTest, ReduceScatterAndAllGatherAsOneProcess) {
  const int N = Link()->process_count() * kLocalReplicas;
  for (int64_t n : {5, 30011}) {
    for (const ReplicaGroups& groups : GroupsSpanningProcesses(N)) {
      SCOPED_TRACE(testing::Message()
                   << "n=" << n << " " << groups.DebugString());
      ExpectAcrossEqualsInProcess(Kind::kReduceScatter, Op::kSum,
                                  DType::kFloat32, n, groups, "rs");
      ExpectAcrossEqualsInProcess(Kind::kAllGather, Op::kSum, DType::kFloat16,
                                  n, groups, "ag");
    }
  }
}

// The inputs tell orders apart: the per-process partial sums an ordinary
// hierarchical all-reduce adds would differ from rank order.
TEST(MpiCollectivesTest, InputsTellSummationOrdersApart) {
  const int N = Link()->process_count() * kLocalReplicas;
  const int64_t n = 40001;
  std::vector<Tensor> in;
  for (int r = 0; r < N; ++r) in.push_back(Input(DType::kFloat32, r, n));
  int64_t differ = 0;
  for (int64_t j = 0; j < n; ++j) {
    float rank_order = in[0].data<float>()[j];
    for (int r = 1; r < N; ++r) rank_order += in[r].data<float>()[j];
    float by_process = 0;
    for (int p = 0; p < N / kLocalReplicas; ++p) {
      float part = 0;
      for (int r = 0; r < kLocalReplicas; ++r) {
        part += in[p * kLocalReplicas + r].data<float>()[j];
      }
      by_process += part;
    }
    differ += rank_order != by_process;
  }
  EXPECT_GT(differ, 0);
}

TEST(MpiCollectivesTest, BroadcastAndStrings) {
  auto link = Link();
  const int P = link->process_count(), me = link->process_index();
  const int root = 1 % P;
  std::vector<int64_t> data(100000, me);
  if (me == root) {
    for (size_t j = 0; j < data.size(); ++j) data[j] = j * 3 + 1;
  }
  ASSERT_TRUE(link->Broadcast(11, root, data.data(),
                              data.size() * sizeof(int64_t),
                              [] { return absl::OkStatus(); })
                  .ok());
  for (size_t j = 0; j < data.size(); ++j) {
    ASSERT_EQ(data[j], static_cast<int64_t>(j * 3 + 1)) << j;
  }
  auto all = link->AllGatherStrings(12, std::string(me * 3, 'a' + me));
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), static_cast<size_t>(P));
  for (int p = 0; p < P; ++p) {
    EXPECT_EQ((*all)[p], std::string(p * 3, 'a' + p));
  }
}

}  // namespace
}  // namespace ipuflow::distributed
