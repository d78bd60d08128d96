#include "examples/example_run.h"

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ipuflow::examples::testing {

ExampleResult RunMainExample(const std::string& flags,
                             const std::string& launcher) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string err_path = absl::StrCat(tmp ? tmp : "/tmp", "/stderr.txt");
  const std::string command =
      absl::StrCat(launcher, launcher.empty() ? "" : " ", srcdir ? srcdir : ".",
                   "/", workspace ? workspace : "ipuflow",
                   "/examples/train_fashion_mnist ", flags, " 2>", err_path);
  ExampleResult r;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    r.out.append(buffer, n);
  }
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream text;
  text << err.rdbuf();
  r.err = text.str();
  return r;
}

double NumberAfter(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + at + label.size(), nullptr);
}

std::string LineFrom(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

void ExpectSameResults(const ExampleResult& a, const ExampleResult& b) {
  ASSERT_NE(LineFrom(a.out, "last 50 micro-batches"), "") << a.out;
  EXPECT_EQ(LineFrom(a.out, "last 50 micro-batches"),
            LineFrom(b.out, "last 50 micro-batches"));
  const std::string correct = LineFrom(a.out, "Test accuracy");
  ASSERT_NE(correct, "") << a.out;
  EXPECT_EQ(
      correct.substr(0, correct.find(" images")),
      LineFrom(b.out, "Test accuracy").substr(0, correct.find(" images")));
}

}  // namespace ipuflow::examples::testing
