// How feed code reaches its channel. A feed kernel (InfeedDequeue,
// OutfeedEnqueue) finds it as the graph's host resource named by the node's
// "feed_id", looked up on the first run of a program and then kept weakly
// in the kernel's state; a queue's method holds it for the call. An id
// names one channel for its whole life, so later elements skip the
// attribute, the graph's map and the cast; weak, so a destroyed queue is
// still reported (FailedPrecondition) and never kept alive by a program.
//
//   ASSIGN_OR_RETURN(
//       std::shared_ptr<InfeedChannel> queue,
//       FeedChannel<InfeedChannel>(ctx, "infeed", "IPUInfeedQueue"));
//
// The caller holds the returned pointer for the whole transfer: destroying
// the queue meanwhile cancels the wait instead of freeing it under it.
#ifndef IPUFLOW_FEEDS_FEED_CHANNEL_H_
#define IPUFLOW_FEEDS_FEED_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "core/kernel.h"
#include "core/lifetime_gate.h"

namespace ipuflow::feeds::internal {

template <typename Channel>
struct FeedChannelState : KernelState {
  std::weak_ptr<Channel> channel;
};

// `kind` and `owner` name the feed in the error ("infeed", "IPUInfeedQueue").
template <typename Channel>
absl::StatusOr<std::shared_ptr<Channel>> FeedChannel(KernelContext& ctx,
                                                     const char* kind,
                                                     const char* owner) {
  std::unique_ptr<KernelState>& slot = ctx.state();
  if (slot != nullptr) {
    std::shared_ptr<Channel> queue =
        static_cast<FeedChannelState<Channel>*>(slot.get())->channel.lock();
    if (queue != nullptr) return queue;
  }
  const std::string& id = ctx.attr<std::string>("feed_id");
  std::shared_ptr<Channel> queue = std::dynamic_pointer_cast<Channel>(
      ctx.node().graph()->FindHostResource(id));
  if (queue == nullptr) {
    return ctx.Error(absl::StatusCode::kFailedPrecondition, kind, " '", id,
                     "' is not available: its ", owner,
                     " was destroyed (or this graph was not built with it)");
  }
  if (slot == nullptr) slot = std::make_unique<FeedChannelState<Channel>>();
  static_cast<FeedChannelState<Channel>*>(slot.get())->channel = queue;
  return queue;
}

// Holds a queue's channel, and a pass of its callers' gate, for one call of
// the queue's methods. The gate closes only in the queue's destructor, so a
// call never finds it closed.
//
//   return ChannelCall(channel_)->Dequeue(replica, num_replicas, cancel);
template <typename Channel>
class ChannelCall {
 public:
  explicit ChannelCall(const std::shared_ptr<Channel>& c)
      : c_(c), pass_(c_->callers().Enter()) {}
  Channel* operator->() const { return c_.get(); }

 private:
  std::shared_ptr<Channel> c_;
  absl::StatusOr<LifetimeGate::Pass> pass_;
};

}  // namespace ipuflow::feeds::internal

#endif  // IPUFLOW_FEEDS_FEED_CHANNEL_H_
