// The load and store nodes around a gradient-accumulation wrapper's
// conditional weight update when its optimizer state is offloaded
// (core/ipu/remote_state.h; TensorFlow IPU guide 6.9):
//
//   flag = OffloadedStateLoad(apply_now)     // state -> IPU when apply_now
//   loop = WhileLoop(flag) { inner update }  // at most once
//   done = OffloadedStateStore(loop output)  // IPU -> remote when it ran
//
// The load's second output, Output(flag.node, 1), is the update's shard
// (int32 [2] {index, count}, RemoteState::UpdateShardOf): {replica, R} when
// the program shards the update (ZeRO-1), else {0, 1}; the update ops take
// it (ops/state/update_shard.h).
//
// Each passes its bool scalar through, so the update depends on the load
// and the store on the update by data (no control edge into the inner
// optimizer's nodes, whose slot initialisers must stay out of the loop).
// Both do nothing when the flag is false, outside a device program that
// planned the state (RemoteState::Plan), or when the state is gone (its
// optimizer destroyed and no program holding it).
#ifndef IPUFLOW_OPTIMIZERS_OFFLOADED_STATE_H_
#define IPUFLOW_OPTIMIZERS_OFFLOADED_STATE_H_

#include <memory>
#include <string>

#include "core/ipu/remote_state.h"
#include "core/scope.h"

namespace ipuflow::optimizers {

// Registers `state` with the graph under `id` (unique in the graph) for
// the node built, and returns the flag passed through. `update`: which of
// the state's updates (RemoteState::AddVariable) the node brackets.
Output OffloadedStateLoad(const Scope& scope, const std::string& id,
                          const std::shared_ptr<RemoteState>& state, int update,
                          Output flag);
Output OffloadedStateStore(const Scope& scope, const std::string& id,
                           const std::shared_ptr<RemoteState>& state,
                           int update, Output flag);

}  // namespace ipuflow::optimizers

#endif  // IPUFLOW_OPTIMIZERS_OFFLOADED_STATE_H_
