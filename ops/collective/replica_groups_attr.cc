#include "ops/collective/replica_groups_attr.h"

#include "absl/strings/str_cat.h"

namespace ipuflow::ops {

AttrMap WithGroupAttrs(const ReplicaGroups& groups, AttrMap attrs) {
  const bool all = groups.type == ReplicaGroups::Type::kAll;
  attrs["replica_group_size"] = int64_t{all ? 0 : groups.size};
  attrs["replica_group_type"] = groups.type == ReplicaGroups::Type::kOrthogonal
                                    ? "orthogonal"
                                    : "consecutive";
  return attrs;
}

absl::Status CheckNumericInput(const ShapeContext& c, const char* verb) {
  const DType t = c.input_dtype(0);
  if (t != DType::kFloat32 && t != DType::kFloat16 && t != DType::kInt32 &&
      t != DType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.InputName(0), " is ", DTypeName(t), "; only numeric tensors can be ",
        verb, " across replicas"));
  }
  return absl::OkStatus();
}

absl::Status CheckGroupAttrs(const ShapeContext& c) {
  ASSIGN_OR_RETURN(int64_t size, c.attr<int64_t>("replica_group_size"));
  ASSIGN_OR_RETURN(std::string type, c.attr<std::string>("replica_group_type"));
  if (size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "replica_group_size is ", size, "; it must be >= 1, or 0 for all"));
  }
  if (type != "consecutive" && type != "orthogonal") {
    return absl::InvalidArgumentError(
        absl::StrCat("replica_group_type is '", type,
                     "'; expected 'consecutive' or 'orthogonal'"));
  }
  return absl::OkStatus();
}

int64_t StaticGroupSize(const AttrMap& attrs) {
  const int64_t size = *attrs.at("replica_group_size").get<int64_t>();
  return size > 0 ? size : kUnknownDim;
}

ReplicaGroups GroupsOf(const AttrMap& attrs) {
  const int64_t size = *attrs.at("replica_group_size").get<int64_t>();
  if (size == 0) return ReplicaGroups::All();
  const std::string& type = *attrs.at("replica_group_type").get<std::string>();
  return type == "orthogonal" ? ReplicaGroups::Orthogonal(size)
                              : ReplicaGroups::Consecutive(size);
}

absl::Status RunCollective(
    KernelContext& ctx,
    const std::function<absl::Status(CollectiveGroup&, int,
                                     const ReplicaGroups&)>& fn) {
  CollectiveGroup* group = ctx.env().collectives;
  // Outside a replicated program the op acts as on one replica.
  CollectiveGroup single(1);
  if (group == nullptr) group = &single;
  const int replica = group == &single ? 0 : ctx.env().replica;
  absl::Status s = fn(*group, replica, GroupsOf(ctx.node().attrs()));
  if (s.ok()) return s;
  return absl::Status(s.code(),
                      absl::StrCat(ctx.node().DebugName(), ": ", s.message()));
}

absl::StatusOr<int> RuntimeGroupSize(const KernelContext& ctx) {
  const CollectiveGroup* group = ctx.env().collectives;
  const int replicas = group == nullptr ? 1 : group->num_replicas();
  absl::StatusOr<int> g = GroupsOf(ctx.node().attrs()).GroupSize(replicas);
  if (g.ok()) return g;
  return ctx.InvalidArgument(g.status().message());
}

ReplicaIdentity AllReplicasIdentical(const Node& node) {
  return node.attr<int64_t>("replica_group_size") == 0
             ? ReplicaIdentity::kIdentical
             : ReplicaIdentity::kDiffers;
}

}  // namespace ipuflow::ops
