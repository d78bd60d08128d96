#include "feeds/outfeed_queue.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "core/kernel.h"
#include "core/op_registry.h"
#include "core/option_checks.h"
#include "core/thread_pool.h"
#include "feeds/feed_channel.h"
#include "feeds/outfeed_channel.h"

namespace ipuflow::feeds {
namespace {

std::atomic<int> next_outfeed_id{0};

}  // namespace

absl::Status CheckOutfeedOptions(OutputMode output_mode, OutfeedMode mode,
                                 int buffer_depth, int64_t max_host_bytes) {
  // The original's text for its own check.
  if (output_mode.kind == OutputMode::Kind::kEveryN && output_mode.period < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "IPUOutfeedQueue: EveryN anchor must have output_return_period set "
        "to valid positive integer, got ",
        output_mode.period));
  }
  OptionChecker check("IPUOutfeedQueue");
  check.Enum("output_mode.kind", "OutputMode::Kind", output_mode.kind,
             {{OutputMode::Kind::kAll, "kAll"},
              {OutputMode::Kind::kFinal, "kFinal"},
              {OutputMode::Kind::kSum, "kSum"},
              {OutputMode::Kind::kEveryN, "kEveryN"},
              {OutputMode::Kind::kDefault, "kDefault"}});
  if (output_mode.kind == OutputMode::Kind::kEveryN) {
    check.Range("output_mode.period", output_mode.period, 1, kMaxOutputPeriod);
  } else if (output_mode.period != 1) {
    // Not silently ignored: only EveryN has a period.
    check.Range("output_mode.period", output_mode.period, 1, 1,
                " (only EveryN has a period)");
  }
  check.Enum("mode", "OutfeedMode", mode,
             {{OutfeedMode::kAll, "kAll"}, {OutfeedMode::kLast, "kLast"}});
  check.Range(
      "buffer_depth", buffer_depth, 1, kMaxOutfeedBufferDepth,
      absl::StrCat(" (the default is ", kDefaultOutfeedBufferDepth, ")"));
  check.Range("max_host_bytes", max_host_bytes, 1, PhysicalMemoryBytes(),
              " (this machine's memory)");
  return check.status();
}

absl::StatusOr<std::unique_ptr<IPUOutfeedQueue>> IPUOutfeedQueue::Create(
    OutfeedMode mode, int buffer_depth, int64_t max_host_bytes) {
  return Create(OutputMode::All(), mode, buffer_depth, max_host_bytes);
}

absl::StatusOr<std::unique_ptr<IPUOutfeedQueue>> IPUOutfeedQueue::Create(
    OutputMode output_mode, OutfeedMode mode, int buffer_depth,
    int64_t max_host_bytes) {
  RETURN_IF_ERROR(
      CheckOutfeedOptions(output_mode, mode, buffer_depth, max_host_bytes));
  return std::unique_ptr<IPUOutfeedQueue>(
      new IPUOutfeedQueue(output_mode, mode, buffer_depth, max_host_bytes));
}

IPUOutfeedQueue::IPUOutfeedQueue(OutputMode output_mode, OutfeedMode mode,
                                 int buffer_depth, int64_t max_host_bytes)
    : id_(absl::StrCat("outfeed_", next_outfeed_id.fetch_add(1))),
      channel_(std::make_shared<internal::OutfeedChannel>(
          id_, output_mode, mode, buffer_depth, max_host_bytes)) {}

// Wakes every caller, then waits for them to leave: a monitor blocked in
// Next or a device blocked on a full ring returns Cancelled on live memory.
IPUOutfeedQueue::~IPUOutfeedQueue() {
  channel_->Shutdown();
  channel_->callers().CloseAndWait(absl::CancelledError(
      absl::StrCat("IPUOutfeedQueue '", id_, "' was destroyed")));
}

OutfeedMode IPUOutfeedQueue::mode() const { return channel_->mode(); }

Node* IPUOutfeedQueue::Enqueue(const Scope& scope,
                               const std::vector<Output>& values) {
  std::vector<std::pair<std::string, Output>> named;
  for (size_t i = 0; i < values.size(); ++i) {
    named.push_back({absl::StrCat(i), values[i]});
  }
  return Enqueue(scope, named);
}

Node* IPUOutfeedQueue::Enqueue(
    const Scope& scope,
    const std::vector<std::pair<std::string, Output>>& values,
    OutfeedIteration iteration) {
  if (iteration.pushes < 1) {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("IPUOutfeedQueue '", id_, "': ", iteration.pushes,
                     " pushes per iteration; at least 1")));
    return nullptr;
  }
  Node* n = channel_->Enqueue(scope, values, iteration);
  if (n != nullptr) scope.graph()->AddHostResource(id_, channel_, n);
  return n;
}

absl::Status IPUOutfeedQueue::Push(int replica, int num_replicas,
                                   std::vector<Tensor> values,
                                   CancellationManager* cancellation,
                                   int64_t iteration, IPUDevice* device) {
  return internal::ChannelCall(channel_)
      ->Push(replica, num_replicas, std::move(values), cancellation, iteration,
             device)
      .status();
}

absl::Status IPUOutfeedQueue::RunFinished() {
  return internal::ChannelCall(channel_)->RunFinished();
}

OutputMode IPUOutfeedQueue::output_mode() const {
  return channel_->output_mode();
}

void IPUOutfeedQueue::RunStopped(const absl::Status& status) {
  internal::ChannelCall(channel_)->RunStopped(status);
}

absl::Status IPUOutfeedQueue::Start(int num_replicas, bool training) {
  return internal::ChannelCall(channel_)->Start(num_replicas, training);
}

absl::StatusOr<OutfeedResult> IPUOutfeedQueue::Dequeue() {
  return internal::ChannelCall(channel_)->Dequeue();
}

absl::StatusOr<OutfeedElement> IPUOutfeedQueue::Next() {
  return internal::ChannelCall(channel_)->Next();
}

std::vector<OutfeedElement> IPUOutfeedQueue::TakeAvailable() {
  return internal::ChannelCall(channel_)->TakeAvailable();
}

void IPUOutfeedQueue::Close() { channel_->Close(); }

int64_t IPUOutfeedQueue::steps_delivered() const {
  return channel_->steps_delivered();
}

int64_t IPUOutfeedQueue::host_bytes() const { return channel_->host_bytes(); }

int IPUOutfeedQueue::waiting_readers() const {
  return channel_->waiting_readers();
}

int IPUOutfeedQueue::waiting_pushes() const {
  return channel_->waiting_pushes();
}

int64_t IPUOutfeedQueue::peak_host_bytes() const {
  return channel_->peak_host_bytes();
}

std::vector<OutfeedElement>::const_iterator IPUOutfeedQueue::begin() {
  iterated_ = TakeAvailable();
  return iterated_.cbegin();
}

std::vector<OutfeedElement>::const_iterator IPUOutfeedQueue::end() {
  return iterated_.cend();
}

namespace {

REGISTER_OP("OutfeedEnqueue")
    .VariadicInput("values")
    .RequiredAttr("feed_id", AttrType::kString)
    .RequiredAttr("names", AttrType::kStringList)
    // OutfeedIteration: a pipeline's micro-batches per device iteration.
    .Attr("pushes_per_iteration", int64_t{1})
    .Attr("sum_per_iteration", false)
    .SetStateful()
    .SetShapeFn([](ShapeContext& c) -> absl::Status {
      if (c.num_inputs() == 0) {
        return absl::InvalidArgumentError("nothing to enqueue");
      }
      ASSIGN_OR_RETURN(const int64_t pushes,
                       c.attr<int64_t>("pushes_per_iteration"));
      if (pushes < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("pushes_per_iteration must be >= 1, got ", pushes));
      }
      return absl::OkStatus();
    })
    .SetKernel([](KernelContext& ctx) -> absl::Status {
      // Held for the whole push (feed_channel.h).
      ASSIGN_OR_RETURN(std::shared_ptr<internal::OutfeedChannel> queue,
                       internal::FeedChannel<internal::OutfeedChannel>(
                           ctx, "outfeed", "IPUOutfeedQueue"));
      std::vector<Tensor> values;
      values.reserve(ctx.num_inputs());
      for (int i = 0; i < ctx.num_inputs(); ++i) {
        values.push_back(ctx.input(i).Copy());  // Inputs may be arena views.
      }
      const OutfeedIteration group{ctx.attr<int64_t>("pushes_per_iteration"),
                                   ctx.attr<bool>("sum_per_iteration")};
      return queue
          ->Push(ctx.env().replica, ctx.env().num_replicas, std::move(values),
                 ctx.env().cancellation, /*iteration=*/-1, ctx.env().device,
                 group)
          .status();
    })
    .NotDifferentiable("sends data to the host; has no outputs");

}  // namespace
}  // namespace ipuflow::feeds
