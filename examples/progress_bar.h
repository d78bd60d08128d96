// The training progress bar of the examples: redrawn in place on a terminal
// (100 times per run), a line every 10% elsewhere (logs, CI).
//
//   DrawProgress(step, steps, loss, accuracy);   // from the monitor thread
#ifndef IPUFLOW_EXAMPLES_PROGRESS_BAR_H_
#define IPUFLOW_EXAMPLES_PROGRESS_BAR_H_

#include <cstdint>

namespace ipuflow::examples {

// Draws "[=====     ] done/total  loss L  accuracy A%" on stderr.
void DrawProgress(int64_t done, int64_t total, float loss, float accuracy);

}  // namespace ipuflow::examples

#endif  // IPUFLOW_EXAMPLES_PROGRESS_BAR_H_
