// What one run of a pipeline measured, as a PipelineReport: the device
// layer's record of the run (core/ipu/work_list_program.h: every item's
// virtual and wall times, channel peaks, traffic) read back through the
// layout (which stage, pass and micro-batch each item was), beside the
// dry-run planner's prediction. Internal to pipelining/.
#ifndef IPUFLOW_PIPELINING_PIPELINE_RUN_REPORT_H_
#define IPUFLOW_PIPELINING_PIPELINE_RUN_REPORT_H_

#include <vector>

#include "core/ipu/work_list_program.h"
#include "core/memory_plan.h"
#include "pipelining/pipeline_internal.h"
#include "pipelining/pipeline_programs.h"
#include "pipelining/pipeline_report.h"

namespace ipuflow::pipelining {

// `program` ran `record`; `memory`: what each IPU of the replica holds
// (the device program's plan, offloaded state placed).
PipelineReport MeasuredReport(const BuiltPipeline& b,
                              const PipelineLayout& layout,
                              const WorkListProgram& program,
                              const WorkListRecord& record,
                              const std::vector<IpuMemory>& memory);

}  // namespace ipuflow::pipelining

#endif  // IPUFLOW_PIPELINING_PIPELINE_RUN_REPORT_H_
