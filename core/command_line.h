// Command-line conventions shared by the binaries (examples, tools).
//
//   int main(int argc, char** argv) {
//     ipuflow::ParseCommandLine(argc, argv);   // --batch-size or --batch_size
//     std::string out = ipuflow::ResolveOutputPath(absl::GetFlag(FLAGS_svg));
//
// Why: the tutorials spell flags with dashes (--batch-size) while Abseil
// wants underscores; and `bazel run` starts a binary in its runfiles
// directory, so relative output paths must be taken from where the user
// typed the command (BUILD_WORKING_DIRECTORY).
#ifndef IPUFLOW_CORE_COMMAND_LINE_H_
#define IPUFLOW_CORE_COMMAND_LINE_H_

#include <string>
#include <vector>

namespace ipuflow {

// Rewrites "--a-b=c" to "--a_b=c" in args[1..]; values are left alone.
std::vector<std::string> DashesToUnderscores(std::vector<std::string> args);

// absl::ParseCommandLine after DashesToUnderscores. Exits on bad flags (as
// Abseil does); returns the positional arguments.
std::vector<std::string> ParseCommandLine(int argc, char** argv);

// `path` relative to `working_directory` (if both are non-empty and path is
// relative); the one-argument form reads BUILD_WORKING_DIRECTORY.
std::string ResolveOutputPath(const std::string& path,
                              const std::string& working_directory);
std::string ResolveOutputPath(const std::string& path);

}  // namespace ipuflow

#endif  // IPUFLOW_CORE_COMMAND_LINE_H_
