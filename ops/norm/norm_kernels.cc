#include "ops/norm/norm_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ops/collective/replica_groups_attr.h"

namespace ipuflow::ops {
namespace {

constexpr int64_t kNormChunks = 16;

// Runs fn(chunk, n_begin, n_end) over at most kNormChunks fixed chunks of
// the batch, in parallel; returns the number of chunks.
template <typename F>
int64_t ForChunks(const KernelContext& ctx, const NormLayout& l,
                  double cost_per_element, const F& fn) {
  const int64_t n = l.batch;
  const int64_t k = std::max<int64_t>(1, std::min(n, kNormChunks));
  const double cost = cost_per_element * static_cast<double>(l.channels) *
                      static_cast<double>(l.spatial) * static_cast<double>(n) /
                      static_cast<double>(k);
  ctx.ParallelFor(k, cost, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i, n * i / k, n * (i + 1) / k);
  });
  return k;
}

// acc[c] += f(element index, c) over the spatial positions of batch
// element n.
template <typename F>
void ChannelSums(const NormLayout& l, int64_t n, double* acc, const F& f) {
  const int64_t c_n = l.channels, s_n = l.spatial;
  if (l.channels_last) {
    for (int64_t s = 0; s < s_n; ++s) {
      const int64_t base = (n * s_n + s) * c_n;
      for (int64_t c = 0; c < c_n; ++c) acc[c] += f(base + c, c);
    }
  } else {
    for (int64_t c = 0; c < c_n; ++c) {
      const int64_t base = (n * c_n + c) * s_n;
      double a = 0;
      for (int64_t s = 0; s < s_n; ++s) a += f(base + s, c);
      acc[c] += a;
    }
  }
}

// out[s] = the statistic s's sum of per-(n, g) sums (over n when across
// the batch, in order).
std::vector<double> ToStats(const NormLayout& l,
                            const std::vector<double>& per_group) {
  if (!l.across_batch) return per_group;
  std::vector<double> out(l.groups, 0.0);
  for (int64_t n = 0; n < l.batch; ++n) {
    for (int64_t g = 0; g < l.groups; ++g)
      out[g] += per_group[n * l.groups + g];
  }
  return out;
}

// Replaces v by its mean over the replicas' v (equal counts everywhere).
absl::Status ReplicaMean(KernelContext& ctx, const NormReplicas& replicas,
                         const std::string& key, std::vector<double>* v) {
  if (replicas.local) return absl::OkStatus();
  Tensor t(DType::kFloat32, TensorShape({static_cast<int64_t>(v->size())}));
  float* p = t.data<float>();
  for (size_t i = 0; i < v->size(); ++i) p[i] = static_cast<float>((*v)[i]);
  RETURN_IF_ERROR(RunCollective(ctx, [&](CollectiveGroup& group, int replica,
                                         const ReplicaGroups&) {
    return group.AllReduce(replica, ctx.node().name() + key, t, t,
                           CollectiveGroup::ReduceOp::kMean, replicas.groups);
  }));
  for (size_t i = 0; i < v->size(); ++i) (*v)[i] = p[i];
  return absl::OkStatus();
}

// Each channel's group, once per call: NormLayout::Group divides, and a
// division per element cost more than the rest of the kernel (LayerNorm
// over [1024, 768] took 14 ms instead of 0.3).
class Groups {
 public:
  explicit Groups(const NormLayout& l) : l_(l), of_(l.channels) {
    for (int64_t c = 0; c < l.channels; ++c) of_[c] = l.Group(c);
  }
  int64_t of(int64_t c) const { return of_[c]; }
  // NormLayout::Stat.
  int64_t stat(int64_t n, int64_t c) const {
    return l_.across_batch ? of_[c] : n * l_.groups + of_[c];
  }

 private:
  const NormLayout& l_;
  std::vector<int64_t> of_;
};

// Per batch element n, each channel's mean and inv_std.
void ChannelStats(const NormLayout& l, const Groups& g, int64_t n,
                  const float* mean, const float* inv_std, float* mean_c,
                  float* inv_c) {
  if (!l.across_batch && l.groups == 1) {  // LayerNorm: one per element n.
    std::fill_n(mean_c, l.channels, mean[n]);
    std::fill_n(inv_c, l.channels, inv_std[n]);
    return;
  }
  for (int64_t c = 0; c < l.channels; ++c) {
    mean_c[c] = mean[g.stat(n, c)];
    inv_c[c] = inv_std[g.stat(n, c)];
  }
}

// The elements of one statistic are one contiguous run of x, statistic s
// at [s * Count(), (s + 1) * Count()), when each batch element's groups
// are consecutive blocks: LayerNorm's tokens, GroupNorm / InstanceNorm
// channels first, or channels last with one group.
bool ContiguousStats(const NormLayout& l, const NormReplicas& replicas) {
  return replicas.local && !l.across_batch && !l.strided &&
         (!l.channels_last || l.groups == 1 || l.spatial == 1);
}

// sum f(i) for i < len in float64, in 8 lanes (so that it vectorises) added
// pairwise at the end: a fixed order, whatever the threads.
template <typename F>
double LaneSum(int64_t len, const F& f) {
  double lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) {
    for (int j = 0; j < 8; ++j) lane[j] += f(i + j);
  }
  for (int j = 0; i < len; ++i, ++j) lane[j] += f(i);
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) +
         ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

// NormForward's statistics for ContiguousStats layouts: each statistic on
// its own (mean, then the squares around it), split over the pool.
void ContiguousMoments(const KernelContext& ctx, const NormLayout& l,
                       const float* x, std::vector<double>* m,
                       std::vector<double>* v) {
  const int64_t len = l.Count();
  ctx.ParallelFor(l.NumStats(), 3.0 * len, [&](int64_t b, int64_t e) {
    for (int64_t st = b; st < e; ++st) {
      const float* p = x + st * len;
      const double mean =
          LaneSum(len, [p](int64_t i) { return double{p[i]}; }) / len;
      (*m)[st] = mean;
      (*v)[st] = LaneSum(len,
                         [p, mean](int64_t i) {
                           const double d = p[i] - mean;
                           return d * d;
                         }) /
                 len;
    }
  });
}

// NormForward's statistics for the other layouts: per channel sums in
// fixed chunks of the batch, added per statistic (and over the replicas),
// the mean first, then the squares around it.
absl::Status ChannelMoments(KernelContext& ctx, const NormLayout& l,
                            const NormReplicas& replicas, const float* x,
                            std::vector<double>* m, std::vector<double>* v) {
  const int64_t c_n = l.channels, g_n = l.groups;
  const double count = static_cast<double>(l.Count());
  const Groups groups(l);
  std::vector<double> sums(l.batch * g_n, 0.0);
  ForChunks(ctx, l, 2.0, [&](int64_t, int64_t nb, int64_t ne) {
    std::vector<double> acc(c_n);
    for (int64_t n = nb; n < ne; ++n) {
      std::fill(acc.begin(), acc.end(), 0.0);
      ChannelSums(l, n, acc.data(),
                  [&](int64_t i, int64_t) { return double{x[i]}; });
      for (int64_t c = 0; c < c_n; ++c) sums[n * g_n + groups.of(c)] += acc[c];
    }
  });
  *m = ToStats(l, sums);
  for (double& s : *m) s /= count;
  RETURN_IF_ERROR(ReplicaMean(ctx, replicas, "/mean", m));
  std::fill(sums.begin(), sums.end(), 0.0);
  ForChunks(ctx, l, 3.0, [&](int64_t, int64_t nb, int64_t ne) {
    std::vector<double> acc(c_n), mc(c_n);
    for (int64_t n = nb; n < ne; ++n) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t c = 0; c < c_n; ++c) mc[c] = (*m)[groups.stat(n, c)];
      ChannelSums(l, n, acc.data(), [&](int64_t i, int64_t c) {
        const double d = x[i] - mc[c];
        return d * d;
      });
      for (int64_t c = 0; c < c_n; ++c) sums[n * g_n + groups.of(c)] += acc[c];
    }
  });
  *v = ToStats(l, sums);
  for (double& s : *v) s /= count;
  return ReplicaMean(ctx, replicas, "/var", v);
}

}  // namespace

absl::StatusOr<NormLayout> ChannelLayout(const TensorShape& shape,
                                         int64_t channels_axis,
                                         int64_t groups) {
  const int rank = shape.rank();
  if (rank < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("input 'x' must have rank >= 2 (batch first), got ",
                     shape.DebugString()));
  }
  const int64_t axis = channels_axis < 0 ? channels_axis + rank : channels_axis;
  if (axis != 1 && axis != rank - 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channels_axis must be 1 or the last axis (", rank - 1, " or -1), got ",
        channels_axis, " for x of shape ", shape.DebugString()));
  }
  auto known = [](int64_t d) { return d == kUnknownDim ? int64_t{1} : d; };
  NormLayout l;
  l.batch = known(shape.dim(0));
  l.channels = known(shape.dim(axis));
  l.channels_last = axis == rank - 1;
  for (int d = 1; d < rank; ++d) {
    if (d == axis) continue;
    if (!CheckedMul(l.spatial, known(shape.dim(d)), &l.spatial)) {
      return absl::InvalidArgumentError(
          absl::StrCat("x's shape ", shape.DebugString(), " overflows"));
    }
  }
  if (groups < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups must be >= 1, got ", groups));
  }
  if (shape.dim(axis) != kUnknownDim && shape.dim(axis) % groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups (", groups, ") must divide the channel count ",
                     shape.dim(axis), " of x ", shape.DebugString()));
  }
  l.groups = groups;
  return l;
}

void NormApply(const KernelContext& ctx, const NormLayout& l, const float* x,
               const float* gamma, const float* beta, const float* mean,
               const float* inv_std, float* y) {
  const int64_t c_n = l.channels, s_n = l.spatial;
  const Groups groups(l);
  ctx.ParallelFor(l.batch, 4.0 * c_n * s_n, [&](int64_t b, int64_t e) {
    std::vector<float> m(c_n), scale(c_n);
    for (int64_t n = b; n < e; ++n) {
      ChannelStats(l, groups, n, mean, inv_std, m.data(), scale.data());
      for (int64_t c = 0; c < c_n; ++c) scale[c] *= gamma[c];
      if (l.channels_last) {
        const float* __restrict mr = m.data();
        const float* __restrict sr = scale.data();
        for (int64_t s = 0; s < s_n; ++s) {
          const int64_t base = (n * s_n + s) * c_n;
          const float* __restrict xr = x + base;
          float* __restrict yr = y + base;
          for (int64_t c = 0; c < c_n; ++c) {
            yr[c] = (xr[c] - mr[c]) * sr[c] + beta[c];
          }
        }
      } else {
        for (int64_t c = 0; c < c_n; ++c) {
          const int64_t base = (n * c_n + c) * s_n;
          for (int64_t s = 0; s < s_n; ++s) {
            y[base + s] = (x[base + s] - m[c]) * scale[c] + beta[c];
          }
        }
      }
    }
  });
}

absl::Status NormForward(KernelContext& ctx, const NormLayout& l,
                         const NormReplicas& replicas, const float* x,
                         const float* gamma, const float* beta, float epsilon,
                         float* y, float* mean, float* var, float* inv_std) {
  std::vector<double> m(l.NumStats()), v(l.NumStats());
  if (ContiguousStats(l, replicas)) {
    ContiguousMoments(ctx, l, x, &m, &v);
  } else {
    RETURN_IF_ERROR(ChannelMoments(ctx, l, replicas, x, &m, &v));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    mean[i] = static_cast<float>(m[i]);
    if (var != nullptr) var[i] = static_cast<float>(v[i]);
    inv_std[i] = static_cast<float>(1.0 / std::sqrt(v[i] + epsilon));
  }
  NormApply(ctx, l, x, gamma, beta, mean, inv_std, y);
  return absl::OkStatus();
}

absl::Status NormBackward(KernelContext& ctx, const NormLayout& l,
                          const NormReplicas& replicas, const float* dy,
                          const float* x, const float* gamma, const float* mean,
                          const float* inv_std, float* dx, float* dgamma,
                          float* dbeta) {
  const int64_t c_n = l.channels, g_n = l.groups, s_n = l.spatial;
  const double count = static_cast<double>(l.Count());
  const Groups groups(l);
  // Per chunk: its sums of dy and dy * xhat by channel (for dgamma and
  // dbeta); per (n, group): the sums of dy gamma and dy gamma xhat.
  const int64_t chunks = std::max<int64_t>(1, std::min(l.batch, kNormChunks));
  std::vector<double> part_a(chunks * c_n, 0.0), part_b(chunks * c_n, 0.0);
  std::vector<double> sa(l.batch * g_n, 0.0), sb(l.batch * g_n, 0.0);
  ForChunks(ctx, l, 5.0, [&](int64_t k, int64_t nb, int64_t ne) {
    std::vector<double> a(c_n), b(c_n);
    std::vector<float> mc(c_n), ic(c_n);
    for (int64_t n = nb; n < ne; ++n) {
      std::fill(a.begin(), a.end(), 0.0);
      std::fill(b.begin(), b.end(), 0.0);
      ChannelStats(l, groups, n, mean, inv_std, mc.data(), ic.data());
      ChannelSums(l, n, a.data(),
                  [&](int64_t i, int64_t) { return double{dy[i]}; });
      ChannelSums(l, n, b.data(), [&](int64_t i, int64_t c) {
        return double{dy[i]} * ((x[i] - mc[c]) * ic[c]);
      });
      for (int64_t c = 0; c < c_n; ++c) {
        part_a[k * c_n + c] += a[c];
        part_b[k * c_n + c] += b[c];
      }
      if (g_n == 1) {  // In lanes: a serial sum is most of the time.
        sa[n] += LaneSum(c_n, [&](int64_t c) { return gamma[c] * a[c]; });
        sb[n] += LaneSum(c_n, [&](int64_t c) { return gamma[c] * b[c]; });
      } else {
        for (int64_t c = 0; c < c_n; ++c) {
          sa[n * g_n + groups.of(c)] += gamma[c] * a[c];
          sb[n * g_n + groups.of(c)] += gamma[c] * b[c];
        }
      }
    }
  });
  for (int64_t c = 0; c < c_n; ++c) {
    double a = 0, b = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      a += part_a[k * c_n + c];
      b += part_b[k * c_n + c];
    }
    dbeta[c] = static_cast<float>(a);
    dgamma[c] = static_cast<float>(b);
  }
  std::vector<double> ma = ToStats(l, sa), mb = ToStats(l, sb);
  const int64_t stats = static_cast<int64_t>(ma.size());
  std::vector<double> both(2 * stats);
  for (int64_t i = 0; i < stats; ++i) {
    both[i] = ma[i] / count;
    both[stats + i] = mb[i] / count;
  }
  RETURN_IF_ERROR(ReplicaMean(ctx, replicas, "/grad", &both));
  ctx.ParallelFor(l.batch, 6.0 * c_n * s_n, [&](int64_t b, int64_t e) {
    std::vector<float> mc(c_n), ic(c_n), ac(c_n), bc(c_n);
    for (int64_t n = b; n < e; ++n) {
      ChannelStats(l, groups, n, mean, inv_std, mc.data(), ic.data());
      for (int64_t c = 0; c < c_n; ++c) {
        ac[c] = static_cast<float>(both[groups.stat(n, c)]);
        bc[c] = static_cast<float>(both[stats + groups.stat(n, c)]);
      }
      auto one = [&](int64_t i, int64_t c) {
        const float xhat = (x[i] - mc[c]) * ic[c];
        dx[i] = ic[c] * (dy[i] * gamma[c] - ac[c] - xhat * bc[c]);
      };
      if (l.channels_last) {
        for (int64_t s = 0; s < s_n; ++s) {
          const int64_t base = (n * s_n + s) * c_n;
          for (int64_t c = 0; c < c_n; ++c) one(base + c, c);
        }
      } else {
        for (int64_t c = 0; c < c_n; ++c) {
          const int64_t base = (n * c_n + c) * s_n;
          for (int64_t s = 0; s < s_n; ++s) one(base + s, c);
        }
      }
    }
  });
  return absl::OkStatus();
}

void NormApplyBackward(const KernelContext& ctx, const NormLayout& l,
                       const float* dy, const float* x, const float* gamma,
                       const float* mean, const float* inv_std, float* dx,
                       float* dgamma, float* dbeta, float* dmean, float* dvar) {
  const int64_t c_n = l.channels, s_n = l.spatial;
  const Groups groups(l);
  const int64_t chunks = std::max<int64_t>(1, std::min(l.batch, kNormChunks));
  std::vector<double> part_a(chunks * c_n, 0.0), part_b(chunks * c_n, 0.0);
  ForChunks(ctx, l, 6.0, [&](int64_t k, int64_t nb, int64_t ne) {
    std::vector<float> mc(c_n), ic(c_n);
    for (int64_t n = nb; n < ne; ++n) {
      ChannelStats(l, groups, n, mean, inv_std, mc.data(), ic.data());
      ChannelSums(l, n, part_a.data() + k * c_n,
                  [&](int64_t i, int64_t) { return double{dy[i]}; });
      ChannelSums(l, n, part_b.data() + k * c_n, [&](int64_t i, int64_t c) {
        return double{dy[i]} * ((x[i] - mc[c]) * ic[c]);
      });
      auto one = [&](int64_t i, int64_t c) {
        dx[i] = dy[i] * gamma[c] * ic[c];
      };
      if (l.channels_last) {
        for (int64_t s = 0; s < s_n; ++s) {
          const int64_t base = (n * s_n + s) * c_n;
          for (int64_t c = 0; c < c_n; ++c) one(base + c, c);
        }
      } else {
        for (int64_t c = 0; c < c_n; ++c) {
          const int64_t base = (n * c_n + c) * s_n;
          for (int64_t s = 0; s < s_n; ++s) one(base + s, c);
        }
      }
    }
  });
  std::vector<double> sm(l.NumStats(), 0.0), sv(l.NumStats(), 0.0);
  for (int64_t c = 0; c < c_n; ++c) {
    double a = 0, b = 0;
    for (int64_t k = 0; k < chunks; ++k) {
      a += part_a[k * c_n + c];
      b += part_b[k * c_n + c];
    }
    dbeta[c] = static_cast<float>(a);
    dgamma[c] = static_cast<float>(b);
    // Across the batch, one statistic per group: Stat(0, c).
    const int64_t st = groups.stat(0, c);
    sm[st] += -gamma[c] * a * inv_std[st];
    sv[st] += -0.5 * gamma[c] * b * inv_std[st] * inv_std[st];
  }
  for (int64_t i = 0; i < l.NumStats(); ++i) {
    dmean[i] = static_cast<float>(sm[i]);
    dvar[i] = static_cast<float>(sv[i]);
  }
}

}  // namespace ipuflow::ops
