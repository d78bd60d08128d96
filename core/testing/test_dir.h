// A fresh directory path for a test's files: $TEST_TMPDIR/<name> (/tmp
// without Bazel), emptied of what an earlier run left. `create` makes it;
// otherwise it does not exist, for code under test that must make it.
#ifndef IPUFLOW_CORE_TESTING_TEST_DIR_H_
#define IPUFLOW_CORE_TESTING_TEST_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <string>

namespace ipuflow::testing {

inline std::string FreshTestDir(const std::string& name, bool create) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  if (create) std::filesystem::create_directories(dir);
  return dir;
}

// FreshTestDir(name, true): an empty directory.
inline std::string EmptyTestDir(const std::string& name) {
  return FreshTestDir(name, /*create=*/true);
}

// FreshTestDir(name, false): a path nothing exists at yet.
inline std::string AbsentTestDir(const std::string& name) {
  return FreshTestDir(name, /*create=*/false);
}

}  // namespace ipuflow::testing

#endif  // IPUFLOW_CORE_TESTING_TEST_DIR_H_
