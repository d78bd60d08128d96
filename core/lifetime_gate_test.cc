#include "core/lifetime_gate.h"

#include <atomic>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "gtest/gtest.h"

namespace ipuflow {
namespace {

TEST(LifetimeGateTest, EnterAndLeaveCount) {
  LifetimeGate gate;
  EXPECT_EQ(gate.inside(), 0);
  {
    absl::StatusOr<LifetimeGate::Pass> a = gate.Enter();
    ASSERT_TRUE(a.ok());
    absl::StatusOr<LifetimeGate::Pass> b = gate.Enter();
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(gate.inside(), 2);
    b->Release();
    b->Release();  // Idempotent.
    EXPECT_EQ(gate.inside(), 1);
    LifetimeGate::Pass moved = *std::move(a);
    EXPECT_EQ(gate.inside(), 1);
  }
  EXPECT_EQ(gate.inside(), 0);
  ASSERT_TRUE(gate.EnterRaw().ok());
  EXPECT_EQ(gate.inside(), 1);
  gate.Leave();
  EXPECT_EQ(gate.inside(), 0);
  EXPECT_TRUE(gate.status().ok());
  EXPECT_FALSE(gate.closed());
}

TEST(LifetimeGateTest, EnterAfterCloseFailsWithTheFirstReason) {
  LifetimeGate gate;
  gate.Close(absl::CancelledError("strategy destroyed"));
  gate.Close(absl::AbortedError("again"));  // The first reason stays.
  EXPECT_TRUE(gate.closed());
  absl::StatusOr<LifetimeGate::Pass> pass = gate.Enter();
  EXPECT_EQ(pass.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(pass.status().message(), "strategy destroyed");
  EXPECT_EQ(gate.EnterRaw().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(gate.inside(), 0);
  gate.AwaitEmpty();  // Nobody inside: returns at once.
}

TEST(LifetimeGateTest, CloseWithOkStillCloses) {
  LifetimeGate gate;
  gate.Close(absl::OkStatus());
  EXPECT_EQ(gate.Enter().status().code(), absl::StatusCode::kCancelled);
}

// CloseAndWait returns only after the caller inside has left, and the
// caller sees the object alive until it leaves.
TEST(LifetimeGateTest, CloseAndWaitWaitsForTheCallerInside) {
  LifetimeGate gate;
  Notification entered, may_leave;
  std::atomic<bool> left{false};
  std::thread caller([&] {
    absl::StatusOr<LifetimeGate::Pass> pass = gate.Enter();
    ASSERT_TRUE(pass.ok());
    entered.Notify();
    may_leave.WaitForNotification();
    left = true;
  });
  entered.WaitForNotification();
  std::thread closer([&] {
    gate.CloseAndWait(absl::CancelledError("gone"));
    EXPECT_TRUE(left.load());
  });
  // The closer is blocked until the caller leaves; new callers are refused
  // once the gate is closed.
  while (!gate.closed()) std::this_thread::yield();
  EXPECT_EQ(gate.Enter().status().message(), "gone");
  EXPECT_EQ(gate.inside(), 1);
  may_leave.Notify();
  caller.join();
  closer.join();
  EXPECT_EQ(gate.inside(), 0);
}

// Many threads enter and leave while the owner closes: every Enter either
// fails with the reason or is matched by a Leave before AwaitEmpty
// returns; nobody is inside afterwards.
TEST(LifetimeGateTest, StressEnterLeaveAgainstClose) {
  for (int round = 0; round < 50; ++round) {
    LifetimeGate gate;
    std::atomic<int> inside{0}, refused{0}, entered{0};
    std::atomic<bool> closed_and_empty{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 200; ++i) {
          absl::StatusOr<LifetimeGate::Pass> pass = gate.Enter();
          if (!pass.ok()) {
            EXPECT_EQ(pass.status().code(), absl::StatusCode::kCancelled);
            ++refused;
            continue;
          }
          ++entered;
          ++inside;
          // Inside the gate the owner has not finished AwaitEmpty.
          EXPECT_FALSE(closed_and_empty.load());
          --inside;
        }
      });
    }
    gate.CloseAndWait(absl::CancelledError("closing"));
    closed_and_empty = true;
    EXPECT_EQ(inside.load(), 0);
    EXPECT_EQ(gate.inside(), 0);
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(entered.load() + refused.load(), 4 * 200);
  }
}

}  // namespace
}  // namespace ipuflow
