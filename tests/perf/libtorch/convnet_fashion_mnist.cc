// The tutorial ConvNet trained with libtorch (Debian's libtorch-dev 1.13):
// the peer that issue 12's "images/s vs libtorch" rows compare against. Same
// model as examples/models.cc (conv 5x5 1->10 + bias, max-pool 2, ReLU;
// conv 5x5 10->20 + bias, max-pool 2, ReLU; dense 320->256 + ReLU; dense
// 256->10), same data (Debian's dataset-fashion-mnist, (x - 0.5) / 0.5),
// same loss (softmax cross-entropy, mean over the micro-batch), same
// optimizer (AdamW lr 1e-3, weight decay 0.01 on every parameter, PyTorch's
// defaults as optimizers/adamw.h), micro-batch 40, a weight update every
// --accumulation micro-batches (gradients summed then scaled by 1/N, as
// PopTorch's mean reduction), one epoch over a shuffled training set.
//
// Not built by Bazel (libtorch is not a dependency of ipuflow):
// tests/perf/libtorch_peer.sh compiles it with g++ and runs it beside the
// ipuflow trainers. Prints one line: images/s of the training loop (data
// already in memory, as the ipuflow trainers report theirs) and the test
// accuracy.
#include <torch/torch.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const char* kDir = "/usr/share/datasets/fashion-mnist/";

std::vector<unsigned char> ReadGz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw std::runtime_error("cannot open " + path);
  std::vector<unsigned char> out;
  unsigned char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0)
    out.insert(out.end(), buf, buf + n);
  gzclose(f);
  return out;
}

uint32_t BigEndian(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | p[3];
}

// Images [N, 1, 28, 28] normalised as the tutorial's, labels [N] int64.
std::pair<torch::Tensor, torch::Tensor> Load(const std::string& split) {
  const std::vector<unsigned char> img =
      ReadGz(std::string(kDir) + split + "-images-idx3-ubyte.gz");
  const std::vector<unsigned char> lab =
      ReadGz(std::string(kDir) + split + "-labels-idx1-ubyte.gz");
  const int64_t n = BigEndian(img.data() + 4);
  if (BigEndian(img.data()) != 2051 || BigEndian(lab.data()) != 2049 ||
      BigEndian(lab.data() + 4) != n || img.size() != 16 + n * 784) {
    throw std::runtime_error("bad IDX files for " + split);
  }
  torch::Tensor x = torch::empty({n, 1, 28, 28});
  float* xp = x.data_ptr<float>();
  for (int64_t i = 0; i < n * 784; ++i)
    xp[i] = (img[16 + i] / 255.0f - 0.5f) / 0.5f;
  torch::Tensor y = torch::empty({n}, torch::kInt64);
  int64_t* yp = y.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) yp[i] = lab[8 + i];
  return {x, y};
}

struct ConvNetImpl : torch::nn::Module {
  ConvNetImpl()
      : conv1(register_module(
            "conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 10, 5)))),
        conv2(register_module(
            "conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(10, 20, 5)))),
        fc1(register_module("fc1", torch::nn::Linear(320, 256))),
        fc2(register_module("fc2", torch::nn::Linear(256, 10))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1(x), 2));
    x = torch::relu(torch::max_pool2d(conv2(x), 2));
    x = torch::relu(fc1(x.reshape({-1, 320})));
    return fc2(x);
  }
  torch::nn::Conv2d conv1, conv2;
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(ConvNet);

int IntArg(int argc, char** argv, const char* name, int fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoi(argv[i] + prefix.size());
    }
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int batch = IntArg(argc, argv, "batch", 40);
  const int accumulation = IntArg(argc, argv, "accumulation", 10);
  const int threads = IntArg(argc, argv, "threads", 2);
  const int seed = IntArg(argc, argv, "seed", 0);
  torch::set_num_threads(threads);
  torch::manual_seed(seed);
  auto [train_x, train_y] = Load("train");
  auto [test_x, test_y] = Load("t10k");

  ConvNet model;
  torch::optim::AdamW adamw(
      model->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  const int64_t n = train_x.size(0);
  const int64_t steps = n / batch / accumulation * accumulation;
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42 + seed));
  const torch::Tensor perm =
      torch::from_blob(order.data(), {n}, torch::kInt64).clone();

  float last_loss = 0;
  const auto start = std::chrono::steady_clock::now();
  adamw.zero_grad();
  for (int64_t s = 0; s < steps; ++s) {
    const torch::Tensor idx = perm.slice(0, s * batch, (s + 1) * batch);
    const torch::Tensor x = train_x.index_select(0, idx);
    const torch::Tensor y = train_y.index_select(0, idx);
    torch::Tensor loss =
        torch::nn::functional::cross_entropy(model->forward(x), y);
    (loss / accumulation).backward();
    if ((s + 1) % accumulation == 0) {
      adamw.step();
      adamw.zero_grad();
    }
    if (s + 1 == steps) last_loss = loss.item<float>();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();

  torch::NoGradGuard no_grad;
  model->eval();
  const torch::Tensor predicted = model->forward(test_x).argmax(1);
  const int64_t correct = predicted.eq(test_y).sum().item<int64_t>();
  std::printf(
      "libtorch %s, %d thread(s): batch %d x accumulation %d, %lld steps in "
      "%.1f s: "
      "%.0f images/s; last loss %.4f; test accuracy %.2f%%\n",
      TORCH_VERSION, threads, batch, accumulation,
      static_cast<long long>(steps), seconds, steps * batch / seconds,
      last_loss, 100.0 * correct / test_x.size(0));
  return 0;
}
