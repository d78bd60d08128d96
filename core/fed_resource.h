// FedResource: a host resource (a feed queue) that wants to know which
// executables can still push to it, so that its host-side readers never
// wait for a producer that is gone. A device program that uses the
// resource calls AddProducer when it is compiled and, once, RemoveProducer
// when it can no longer run: it was destroyed, or its IPU system was
// destroyed, reconfigured or cancelled (`why` says which). A queue whose
// last producer went wakes its readers with Cancelled naming `why`.
//
// Separate from HostResource (core/graph.h), which every host resource
// implements: only the queues with host-side readers implement this one,
// and executables find it by dynamic_cast.
//
// Thread safety: both calls may come from any thread (a compile, a
// destructor, the thread cancelling the system).
#ifndef IPUFLOW_CORE_FED_RESOURCE_H_
#define IPUFLOW_CORE_FED_RESOURCE_H_

#include "absl/status/status.h"

namespace ipuflow {

class FedResource {
 public:
  virtual ~FedResource() = default;
  virtual void AddProducer() = 0;
  virtual void RemoveProducer(const absl::Status& why) = 0;
};

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_FED_RESOURCE_H_
