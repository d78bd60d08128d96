// The main example run as a user runs it, for the tests that check its
// report (examples/train_fashion_mnist_test, tests/distributed/
// mpi_example_checkpoint_test): the built binary from the test's runfiles
// with `flags`, after an optional launcher (mpirun), its stdout and stderr
// kept.
#ifndef IPUFLOW_EXAMPLES_EXAMPLE_RUN_H_
#define IPUFLOW_EXAMPLES_EXAMPLE_RUN_H_

#include <string>

namespace ipuflow::examples::testing {

struct ExampleResult {
  int exit_code = -1;  // -1: did not start or did not exit.
  std::string out;     // stdout: the report (process 0's under mpirun).
  std::string err;     // stderr: progress bar, errors.
};

// Runs `launcher` (e.g. "mpirun -np 2 ...", empty: none), then
// examples/train_fashion_mnist with `flags`.
ExampleResult RunMainExample(const std::string& flags,
                             const std::string& launcher = "");

// The number printed right after `label` (NaN if absent).
double NumberAfter(const std::string& text, const std::string& label);
// The rest of the line that starts with `label`, from `label` on ("" if
// absent).
std::string LineFrom(const std::string& text, const std::string& label);

// Two runs' reports end alike (a run and its stopped-and-resumed copy, or
// another strategy of the same model):
// the same line for the last 50 micro-batches' loss and accuracy, and the
// same test accuracy (correct of images; the images/s may differ).
void ExpectSameResults(const ExampleResult& a, const ExampleResult& b);

}  // namespace ipuflow::examples::testing

#endif  // IPUFLOW_EXAMPLES_EXAMPLE_RUN_H_
