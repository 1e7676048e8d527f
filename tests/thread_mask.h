// The calling thread's CPU affinity as a sorted list of CPU ids (empty if it cannot be
// read), for the tests that check where host threads run.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <vector>

namespace tandem::testing {

inline std::vector<int> ThreadMask() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> mask;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) mask.push_back(c);
  return mask;
}

}  // namespace tandem::testing
