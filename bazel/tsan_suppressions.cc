// ThreadSanitizer's built-in suppressions for every test binary (linked in
// through @system//:gtest_main; the runtime asks for them at start-up).
//
// Why: Debian ships Abseil as uninstrumented shared libraries, so TSan sees
// none of its atomics. An absl::Status with a message is reference counted
// inside libabsl_status; when two threads share one (a queue's close or
// cancellation status, returned to a device thread and kept by the host),
// the last Unref frees it after an acq_rel decrement TSan cannot see, and it
// reports the other thread's earlier read of the message as a race with that
// free. Only reports whose freeing stack passes through Status::Unref (or
// UnrefNonInlined) are suppressed. Our own locking goes through std::mutex
// (core/mutex.h), which TSan does see. Checked by
// //tests/toolchain:absl_status_tsan_test.
extern "C" const char* __tsan_default_suppressions() {
  return "race:absl::*Status::Unref\n";
}
