// What tests of threads and devices share: an emulated system of N IPUs,
// and a wait for another thread's state that does not sleep (a test's
// verdict never depends on time).
//
// Thread safety: plain functions.
#ifndef IPUFLOW_CORE_TESTING_TEST_SYSTEM_H_
#define IPUFLOW_CORE_TESTING_TEST_SYSTEM_H_

#include <memory>
#include <thread>
#include <utility>

#include "core/ipu/ipu_system.h"

namespace ipuflow::testing {

// A system of `ipus` emulated IPUs; aborts the test binary if it cannot be
// created (a test's setup, not its subject).
inline std::unique_ptr<IPUSystem> MakeSystem(int ipus) {
  IPUConfig config;
  config.set_auto_select_ipus(ipus);
  return std::move(IPUSystem::Create(config)).value();
}

// Spins (yielding) until `ready()`: how a test knows another thread is
// blocked before it acts, without sleeping or timing.
template <typename Fn>
void AwaitTrue(Fn ready) {
  while (!ready()) std::this_thread::yield();
}

}  // namespace ipuflow::testing

#endif  // IPUFLOW_CORE_TESTING_TEST_SYSTEM_H_
