#include "feeds/infeed_queue.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "core/ipu/ipu_device.h"
#include "core/kernel.h"
#include "core/op_registry.h"

namespace ipuflow::feeds {
namespace {

Mutex registry_mu;
std::map<std::string, IPUInfeedQueue*>& Registry() {
  static auto* registry = new std::map<std::string, IPUInfeedQueue*>();
  return *registry;
}
std::atomic<int> next_id{0};

}  // namespace

absl::StatusOr<std::unique_ptr<IPUInfeedQueue>> IPUInfeedQueue::Create(
    DatasetPtr dataset, int prefetch_depth) {
  if (dataset == nullptr) return absl::InvalidArgumentError("IPUInfeedQueue: null dataset");
  RETURN_IF_ERROR(dataset->status());
  if (prefetch_depth < 1 || prefetch_depth > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUInfeedQueue: prefetch_depth must be in [1, 255], got ",
        prefetch_depth, " (the default is ", kDefaultPrefetchDepth, ")"));
  }
  const ElementSpec& spec = dataset->spec();
  if (!spec.known()) {
    return absl::InvalidArgumentError(
        "IPUInfeedQueue: the dataset's element spec is unknown; give Map an "
        "output_spec");
  }
  for (int i = 0; i < spec.size(); ++i) {
    if (!spec.shapes[i].IsFullyDefined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "IPUInfeedQueue: output shape ", spec.shapes[i].DebugString(),
          " of component ", i, " is not fully defined. If using "
          "Dataset::Batch, set drop_remainder = true."));
    }
    if (spec.shapes[i].num_elements() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "IPUInfeedQueue: component ", i, " has shape ",
          spec.shapes[i].DebugString(), " with a dimension of size 0"));
    }
  }
  return std::unique_ptr<IPUInfeedQueue>(
      new IPUInfeedQueue(std::move(dataset), prefetch_depth));
}

IPUInfeedQueue::IPUInfeedQueue(DatasetPtr dataset, int prefetch_depth)
    : dataset_(std::move(dataset)),
      prefetch_depth_(prefetch_depth),
      id_(absl::StrCat("infeed_", next_id.fetch_add(1))) {
  MutexLock l(&registry_mu);
  Registry()[id_] = this;
}

IPUInfeedQueue::~IPUInfeedQueue() {
  {
    MutexLock l(&registry_mu);
    Registry().erase(id_);
  }
  for (auto& ring : rings_) {
    ring->Cancel(absl::CancelledError(
        absl::StrCat("IPUInfeedQueue '", id_, "' was destroyed")));
  }
  if (host_thread_.joinable()) host_thread_.join();
}

IPUInfeedQueue* IPUInfeedQueue::Find(const std::string& id) {
  MutexLock l(&registry_mu);
  auto it = Registry().find(id);
  return it == Registry().end() ? nullptr : it->second;
}

absl::StatusOr<std::vector<Output>> IPUInfeedQueue::BuildDequeue(
    const Scope& scope) {
  const ElementSpec& s = spec();
  Node* n = scope.AddNode("InfeedDequeue", {},
                          {{"feed_id", id_}, {"dtypes", s.dtypes},
                           {"shapes", s.shapes}},
                          "InfeedDequeue");
  RETURN_IF_ERROR(scope.status());
  dequeued_ = true;
  std::vector<Output> out;
  for (int i = 0; i < n->num_outputs(); ++i) out.push_back(Output(n, i));
  return out;
}

absl::Status IPUInfeedQueue::Start(int num_replicas) {
  MutexLock l(&mu_);
  if (num_replicas_ == num_replicas) return absl::OkStatus();
  if (num_replicas_ != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "IPUInfeedQueue '", id_, "' feeds ", num_replicas_,
        " replicas; it cannot also feed a program with ", num_replicas));
  }
  for (int r = 0; r < num_replicas; ++r) {
    rings_.push_back(std::make_unique<RingBuffer<Slot>>(
        prefetch_depth_, absl::StrCat("infeed '", id_, "' replica ", r)));
  }
  consumed_.assign(num_replicas, 0);
  num_replicas_ = num_replicas;
  host_thread_ = std::thread([this] { HostLoop(); });
  started_replicas_.store(num_replicas, std::memory_order_release);
  return absl::OkStatus();
}

void IPUInfeedQueue::HostLoop() {
  std::unique_ptr<Iterator> it = dataset_->MakeIterator();
  const int replicas = static_cast<int>(rings_.size());
  for (int64_t i = 0;; ++i) {
    absl::StatusOr<Element> element = it->GetNext();
    if (absl::IsOutOfRange(element.status())) break;
    produced_.fetch_add(1, std::memory_order_relaxed);
    if (!rings_[i % replicas]->Push(std::move(element)).ok()) return;  // Cancelled.
  }
  for (auto& ring : rings_) ring->Close();
}

absl::StatusOr<Element> IPUInfeedQueue::Dequeue(
    int replica, int num_replicas, CancellationManager* cancellation) {
  // Per element: check without mu_ once started (Start rechecks under it).
  if (started_replicas_.load(std::memory_order_acquire) != num_replicas) {
    RETURN_IF_ERROR(Start(num_replicas));
  }
  RingBuffer<Slot>& ring = *rings_[replica];
  int token = -1;
  if (cancellation != nullptr) {
    token = cancellation->Register([&ring, this] {
      ring.Cancel(absl::CancelledError(absl::StrCat(
          "IPUInfeedQueue '", id_, "': the IPU system was reset")));
    });
  }
  absl::StatusOr<Slot> slot = ring.Pop();
  if (cancellation != nullptr) cancellation->Unregister(token);
  if (absl::IsOutOfRange(slot.status())) {
    return absl::OutOfRangeError(absl::StrCat(
        "IPUInfeedQueue '", id_, "': the dataset ended after ",
        produced_.load(), " element(s); replica ", replica,
        " asked for another (its element ", consumed_[replica] + 1,
        "). Repeat() the dataset or run fewer iterations."));
  }
  RETURN_IF_ERROR(slot.status());
  ++consumed_[replica];
  return *std::move(slot);
}

int64_t IPUInfeedQueue::elements_produced() const {
  return produced_.load(std::memory_order_relaxed);
}

namespace {

REGISTER_OP("InfeedDequeue")
    .RequiredAttr("feed_id")
    .RequiredAttr("dtypes")
    .RequiredAttr("shapes")
    .SetStateful()
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      ASSIGN_OR_RETURN(auto dtypes, c.attr<std::vector<DType>>("dtypes"));
      ASSIGN_OR_RETURN(auto shapes, c.attr<std::vector<TensorShape>>("shapes"));
      if (dtypes.size() != shapes.size() || dtypes.empty()) {
        return absl::InvalidArgumentError("dtypes and shapes must match");
      }
      for (size_t i = 0; i < dtypes.size(); ++i) c.set_output(i, dtypes[i], shapes[i]);
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      const std::string& id = ctx.attr<std::string>("feed_id");
      IPUInfeedQueue* queue = IPUInfeedQueue::Find(id);
      if (queue == nullptr) {
        return ctx.Error(absl::StatusCode::kFailedPrecondition, "infeed '", id,
                         "' does not exist (was its IPUInfeedQueue destroyed?)");
      }
      absl::StatusOr<Element> element = queue->Dequeue(
          ctx.env().replica, ctx.env().num_replicas, ctx.env().cancellation);
      RETURN_IF_ERROR(element.status());
      if (static_cast<int>(element->size()) != ctx.num_outputs()) {
        return ctx.InvalidArgument("infeed element has ", element->size(),
                                   " components, expected ", ctx.num_outputs());
      }
      for (int i = 0; i < ctx.num_outputs(); ++i) {
        const Tensor& t = (*element)[i];
        if (t.dtype() != ctx.output_dtype(i) || t.shape() != ctx.planned_shape(i)) {
          return ctx.InvalidArgument(
              "infeed element component ", i, " is ", DTypeName(t.dtype()),
              t.shape().DebugString(), ", expected ",
              DTypeName(ctx.output_dtype(i)), ctx.planned_shape(i).DebugString());
        }
      }
      int64_t bytes = 0;
      for (size_t i = 0; i < element->size(); ++i) {
        bytes += (*element)[i].TotalBytes();
        ctx.set_output(static_cast<int>(i), std::move((*element)[i]));
      }
      if (ctx.env().device != nullptr) {
        ctx.env().device->counters().host_to_device.fetch_add(
            bytes, std::memory_order_relaxed);
      }
      return absl::OkStatus();
    })
    .NotDifferentiable("data from the host has no inputs");

}  // namespace
}  // namespace ipuflow::feeds
