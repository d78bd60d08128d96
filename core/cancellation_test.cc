#include "core/cancellation.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "gtest/gtest.h"

namespace ipuflow {
namespace {

TEST(CancellationManagerTest, CallbacksRunOnceAndLateOnesAtOnce) {
  CancellationManager cm;
  int runs = 0;
  const int token = cm.Register([&] { ++runs; });
  cm.StartCancel(absl::CancelledError("stop"));
  cm.StartCancel(absl::AbortedError("again"));  // Ignored.
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(cm.reason().message(), "stop");
  cm.Unregister(token);
  EXPECT_EQ(cm.Register([&] { ++runs; }), -1);
  EXPECT_EQ(runs, 2);
}

TEST(CancellationManagerTest, UnregisteredCallbacksDoNotRun) {
  CancellationManager cm;
  bool ran = false;
  cm.Unregister(cm.Register([&] { ran = true; }));
  cm.StartCancel(absl::CancelledError());
  EXPECT_FALSE(ran);
}

TEST(CancellationManagerTest, UnregisterWaitsForARunningCallback) {
  for (int i = 0; i < 20; ++i) {
    CancellationManager cm;
    auto state = std::make_unique<std::atomic<int>>(0);
    std::atomic<bool> entered{false};
    const int token = cm.Register([&] {
      entered = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      state->store(1);  // Would be a use-after-free without the wait.
    });
    std::thread canceller([&] { cm.StartCancel(absl::CancelledError()); });
    while (!entered) std::this_thread::yield();
    cm.Unregister(token);
    EXPECT_EQ(state->load(), 1);
    state.reset();
    canceller.join();
  }
}

TEST(CancellationManagerTest, CallbackMayUnregisterItself) {
  CancellationManager cm;
  int token = -1;
  bool ran = false;
  token = cm.Register([&] {
    cm.Unregister(token);  // Must not wait for itself.
    ran = true;
  });
  cm.StartCancel(absl::CancelledError());
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace ipuflow
