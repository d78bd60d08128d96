#include "core/command_line.h"

#include <algorithm>
#include <cstdlib>

#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"

namespace ipuflow {

std::vector<std::string> DashesToUnderscores(std::vector<std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t k = 2; k < end; ++k) {
      if (arg[k] == '-') arg[k] = '_';
    }
  }
  return args;
}

std::vector<std::string> ParseCommandLine(int argc, char** argv) {
  std::vector<std::string> args =
      DashesToUnderscores(std::vector<std::string>(argv, argv + argc));
  std::vector<char*> ptrs;
  for (std::string& arg : args) ptrs.push_back(arg.data());
  std::vector<char*> rest =
      absl::ParseCommandLine(static_cast<int>(ptrs.size()), ptrs.data());
  return std::vector<std::string>(rest.begin(), rest.end());
}

std::string ResolveOutputPath(const std::string& path,
                              const std::string& working_directory) {
  if (path.empty() || path[0] == '/' || working_directory.empty()) {
    return path;
  }
  return absl::StrCat(working_directory, "/", path);
}

std::string ResolveOutputPath(const std::string& path) {
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");  // bazel run.
  return ResolveOutputPath(path, cwd == nullptr ? "" : cwd);
}

}  // namespace ipuflow
