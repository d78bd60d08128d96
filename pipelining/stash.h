// Activation stash: how many micro-batches' forward activations each stage
// keeps while waiting for their backward pass (training only).
//
//   StashDepths(PipelineSchedule::kGrouped, 4)      // {6, 4, 2, 0}
//   StashDepths(PipelineSchedule::kInterleaved, 4)  // {3, 2, 1, 0}
//   ASSIGN_OR_RETURN(ScheduleTable t, MakeSchedule(kGrouped, 4, {}, 16, true));
//   MeasureStashOccupancy(t)                        // {7, 5, 3, 1}
//
// StashDepths is Graphcore's rule for the FIFO inserted between forward stage
// s and backward stage s (pipeline_fifo_inserter.cc, GetFifoDepthMultiplier):
//   depth(s) = multiplier x (N - 1 - s), multiplier = 2 Grouped,
//   1 Interleaved, 0 Sequential (no FIFOs at all).
//
// MeasureStashOccupancy simulates a table instead. Convention: it samples at
// every step boundary (after all items of step t) the micro-batches m with
// F(s,m) done and B(s,m) not done, and returns the maximum per stage. The
// micro-batch forwarded in step t itself counts; a micro-batch is never
// sampled in the middle of a step. For every training table MakeSchedule
// builds with micro_batches >= the overlap length (validation.h):
//   MeasureStashOccupancy(t)[s] == StashDepths(kind, N)[s] + 1.
// The "+1" is the activation outside the FIFO: a FIFO of depth d returns the
// value pushed d steps earlier, and that value waits one step boundary in
// the backward stage's input buffer (for the last stage, depth 0, the forward
// output goes straight to the next step's backward; for Sequential, depth 0,
// the one micro-batch in flight sits in the stage buffers).
// Note: Graphcore's rule of thumb "2N+1 activations on the first IPU
// (Grouped), N+1 (Interleaved)" counts buffers differently; we follow the
// C++ depths. torch.distributed.pipelining's schedules have no FIFO rule:
// their peaks (PredictedPeakStashPerIpu) are those of its per-rank orders.
// Inference tables have no backward, so nothing is stashed (all zeros).
//
// Thread safety: pure functions.
#ifndef IPUFLOW_PIPELINING_STASH_H_
#define IPUFLOW_PIPELINING_STASH_H_

#include <vector>

#include "pipelining/schedule.h"

namespace ipuflow::pipelining {

// FIFO depth per stage, training (see above); all zeros for the schedules
// that are not Graphcore's. REQUIRES: num_stages >= 1.
std::vector<int> StashDepths(PipelineSchedule schedule, int num_stages);

// Peak live stash per stage measured on `table` (see the convention above).
// REQUIRES: VerifyScheduleTable(table).ok().
std::vector<int> MeasureStashOccupancy(const ScheduleTable& table);

// Most micro-batches stage s holds at any moment when the table runs item
// by item, in table order, a forward adding its micro-batch when it ends and
// a backward removing it when it starts: the stash FIFO capacity a runtime
// needs (the pipeline runtime's). On the generated training tables it is
// MeasureStashOccupancy + 1 for Grouped (a stage's forward of a step lands
// before that step's backward takes its input) and equal to it for
// Interleaved and Sequential (one item per IPU per step). All zeros for
// inference.
// REQUIRES: VerifyScheduleTable(table).ok().
std::vector<int> PeakStashEntries(const ScheduleTable& table);

// As PeakStashEntries, per IPU: the most micro-batch activations the IPU's
// stages hold at once (one entry = one stage's activations for one
// micro-batch: a "chunk" of torch's interleaved schedules). All zeros for
// inference. REQUIRES: VerifyScheduleTable(table).ok().
std::vector<int> PeakStashEntriesPerIpu(const ScheduleTable& table);

// torch.distributed.pipelining's peak activations per IPU for its own
// schedules (its schedules.py; the Megatron-LM and PipeDream-Flush papers),
// in PeakStashEntriesPerIpu's units, for the tables MakeSchedule builds:
//  - GPipe: M (every forward before any backward);
//  - 1F1B: min(M, N - s) on stage s's IPU (its warm-up forwards; after them
//    a backward always comes before the next forward);
//  - Interleaved1F1B: on IPU r, w(r) = min(vM, (v-1)R + 2(p-1-r)) warm-up
//    forwards (schedule.h), + 1 if w(r) < vM: in its steady phase torch
//    runs a forward before each backward, so one more chunk is live;
//  - LoopedBFS: vM (all forwards first).
// Empty for the other schedules and for inference.
// REQUIRES: `table` was built by MakeSchedule.
std::vector<int> PredictedPeakStashPerIpu(const ScheduleTable& table);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_STASH_H_
