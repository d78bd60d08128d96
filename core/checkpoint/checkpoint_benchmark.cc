// Checkpoint save / restore against plain file I/O of the same bytes, side
// by side in one run (issue 24): for the tutorial ConvNet with AdamW slots
// (each weight, its m and v, the step) and for a ~100 MB model (8 float32
// weights of 1M elements with their Adam slots: 96 MB), it prints the
// checkpoint's size and the median time of
//   save:     WriteCheckpointFile (CRC32C per tensor, write, fsync, rename,
//             directory fsync) vs a buffered fwrite of the same bytes +
//             fflush + fsync;
//   restore:  ReadCheckpointFile (read, every CRC and entry checked) vs a
//             plain read(2) of the same file into memory.
// The files go to $TMPDIR (default /tmp): the disk there is what is timed.
//
//   ./bazelw run -c opt //core/checkpoint:checkpoint_benchmark
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/checkpoint/checkpoint_file.h"
#include "core/checkpoint/crc32c.h"
#include "core/machine_info.h"
#include "core/status.h"
#include "examples/models.h"

namespace ipuflow::checkpoint {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Tensor Random(const TensorShape& shape, std::mt19937& rng) {
  Tensor t(DType::kFloat32, shape);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& x : t.span<float>()) x = u(rng);
  return t;
}

void Add(CheckpointContents* c, const std::string& name, Tensor t) {
  c->manifest.add_tensors()->set_name(name);
  c->manifest.mutable_tensors()->rbegin()->set_replica(-1);
  c->tensors.push_back(std::move(t));
}

// Each variable, its AdamW m and v, and the step counter.
CheckpointContents WithAdamSlots(
    const std::vector<std::pair<std::string, TensorShape>>& vars) {
  std::mt19937 rng(1);
  CheckpointContents c;
  for (const auto& [name, shape] : vars) {
    Add(&c, name, Random(shape, rng));
    Add(&c, name + "/AdamW/m", Random(shape, rng));
    Add(&c, name + "/AdamW/v", Random(shape, rng));
  }
  Add(&c, "AdamW/step", Tensor::Scalar<int64_t>(1000));
  return c;
}

std::vector<std::pair<std::string, TensorShape>> ConvNetVariables() {
  Scope s = Scope::NewRootScope();
  models::CreateConvNetParams(s);
  std::vector<std::pair<std::string, TensorShape>> out;
  for (const Node* n : s.graph()->collection("variables")) {
    out.push_back({n->name(), n->attr<TensorShape>("shape")});
  }
  return out;
}

// A buffered write of `bytes` + fflush + fsync: the baseline.
void PlainWrite(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  IPU_CHECK(f != nullptr);
  IPU_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  IPU_CHECK(std::fflush(f) == 0);
  IPU_CHECK(::fsync(fileno(f)) == 0);
  std::fclose(f);
}

std::string PlainRead(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  IPU_CHECK(fd >= 0);
  std::string out(static_cast<size_t>(::lseek(fd, 0, SEEK_END)), '\0');
  IPU_CHECK(::pread(fd, out.data(), out.size(), 0) ==
            static_cast<ssize_t>(out.size()));
  ::close(fd);
  return out;
}

void Measure(const std::string& what, CheckpointContents c, int reps) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  const std::string ckpt = dir + "/ipuflow_bench.ipuckpt";
  const std::string plain = dir + "/ipuflow_bench.plain";
  IPU_CHECK_OK(WriteCheckpointFile(ckpt, &c));
  const std::string bytes = PlainRead(ckpt);
  std::vector<double> save, write, restore, read;
  for (int i = 0; i < reps; ++i) {  // Interleaved: drift hits both alike.
    auto t0 = Clock::now();
    IPU_CHECK_OK(WriteCheckpointFile(ckpt, &c));
    auto t1 = Clock::now();
    PlainWrite(plain, bytes);
    auto t2 = Clock::now();
    absl::StatusOr<CheckpointContents> back = ReadCheckpointFile(ckpt);
    auto t3 = Clock::now();
    const std::string r = PlainRead(plain);
    auto t4 = Clock::now();
    IPU_CHECK(back.ok() && r.size() == bytes.size());
    save.push_back(Seconds(t0, t1));
    write.push_back(Seconds(t1, t2));
    restore.push_back(Seconds(t2, t3));
    read.push_back(Seconds(t3, t4));
  }
  const double mb = bytes.size() / 1e6;
  std::printf("%-34s %9.2f MB  %3d tensors\n", what.c_str(), mb,
              c.manifest.tensors_size());
  std::printf("  save    %8.2f ms  plain write+fsync %8.2f ms  ratio %.2fx\n",
              1e3 * Median(save), 1e3 * Median(write),
              Median(save) / Median(write));
  std::printf("  restore %8.2f ms  plain read        %8.2f ms  ratio %.2fx\n",
              1e3 * Median(restore), 1e3 * Median(read),
              Median(restore) / Median(read));
  std::remove(ckpt.c_str());
  std::remove(plain.c_str());
}

}  // namespace
}  // namespace ipuflow::checkpoint

int main() {
  using namespace ipuflow::checkpoint;
  std::printf("%s\n", ipuflow::MachineDescription().c_str());
  std::printf("CRC32C: %s\n", Crc32cUsesHardware() ? "SSE4.2 crc32 instruction"
                                                   : "slicing-by-8 tables");
  Measure("tutorial ConvNet + AdamW slots", WithAdamSlots(ConvNetVariables()),
          21);
  std::vector<std::pair<std::string, ipuflow::TensorShape>> big;
  for (int i = 0; i < 8; ++i) {
    big.push_back({absl::StrCat("layer", i, "/w"), {1024, 1024}});
  }
  Measure("~100 MB model (8 x 1M + Adam slots)", WithAdamSlots(big), 7);
  return 0;
}
