// The real clock of cbtask: CLOCK_MONOTONIC, absolute-deadline waits.
#include <cerrno>
#include <ctime>

#include "cbtask/cbtask.hpp"

namespace cbtask {

std::int64_t SteadyClock::now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

void SteadyClock::sleep_until_ns(std::int64_t deadline_ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000);
  // An absolute deadline: a signal that interrupts the wait does not stretch it.
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

Clock& steady_clock() {
  static SteadyClock clock;
  return clock;
}

}  // namespace cbtask
