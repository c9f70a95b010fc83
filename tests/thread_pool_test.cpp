// core/thread_pool.h and core/threads.h: every chunk once, nesting and
// concurrent callers without deadlock, errors carried to the caller, helpers
// that sleep instead of spinning (and at once when told to rest), and the
// volunteer's controls (--threads values, background mode, the machine-load
// reading behind it).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/machine_load.h"
#include "core/thread_pool.h"
#include "core/threads.h"

namespace bonfire {
namespace {

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

TEST(ThreadPool, RunsEveryChunkExactlyOnce) {
  ThreadPool pool(4);
  for (int64_t chunks : {1, 2, 3, 7, 64, 1000, 70000}) {
    for (int width : {1, 2, 4, 9}) {
      std::vector<std::atomic<int>> hits(chunks);
      pool.run(chunks, width, [&](int64_t c) { hits[c].fetch_add(1); });
      for (int64_t c = 0; c < chunks; ++c) ASSERT_EQ(hits[c].load(), 1) << "chunk " << c << " of " << chunks;
    }
  }
}

TEST(ThreadPool, ManyShortJobsBackToBack) {
  // A decode step: hundreds of small jobs, each seeing the previous one done.
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int job = 0; job < 5000; ++job) {
    const int64_t before = total.load();
    pool.run(6, 3, [&](int64_t c) { total.fetch_add(c + 1); });
    ASSERT_EQ(total.load(), before + 21) << "job " << job;
  }
}

TEST(ThreadPool, NestedRunsInline) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.run(4, 2, [&](int64_t) {
    EXPECT_TRUE(ThreadPool::in_job());
    pool.run(5, 2, [&](int64_t) { inner.fetch_add(1); });
  });
  EXPECT_EQ(inner.load(), 20);
  EXPECT_FALSE(ThreadPool::in_job());
}

// Pools made, used once and destroyed at once, four threads at a time: a
// helper that has not yet looked at the job counter when its pool is done
// must still see the stop. (A helper that counted from the epoch it first
// read could sleep through it; this stress did not catch that on demand,
// the race needs a helper preempted in a window of a few instructions.) A
// hang fails the test after 60 s instead of holding ctest to its timeout.
TEST(ThreadPool, DestroyedBeforeItsHelpersLookStillJoins) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  // Four threads making pools at once on the 2 cores, so helpers are often
  // preempted just after they start.
  std::thread([done] {
    std::vector<std::thread> makers;
    for (int t = 0; t < 4; ++t)
      makers.emplace_back([] {
        for (int i = 0; i < 500; ++i) {
          ThreadPool pool(2);
          std::atomic<int> n{0};
          pool.run(2, 2, [&](int64_t) { n.fetch_add(1); });
          if (n.load() != 2) std::abort();
        }
      });
    for (auto& m : makers) m.join();
    done->store(true);
  }).detach();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done->load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!done->load()) {
    ADD_FAILURE() << "a pool's destructor waited on a helper that never woke";
    std::fflush(nullptr);
    std::_Exit(1);  // the stuck thread cannot be joined
  }
}

TEST(ThreadPool, ConcurrentCallersAllFinish) {
  // Worker lanes (steps, graphs) may call at once: one gets the pool, the
  // others run inline; none waits for another's job.
  ThreadPool pool(2);
  std::vector<std::thread> callers;
  std::vector<int64_t> sums(4, 0);
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int rep = 0; rep < 200; ++rep) {
        std::atomic<int64_t> s{0};
        pool.run(100, 2, [&](int64_t c) { s.fetch_add(c); });
        sums[t] += s.load();
      }
    });
  for (auto& c : callers) c.join();
  for (int64_t s : sums) EXPECT_EQ(s, 200 * 4950);
}

TEST(ThreadPool, ExceptionReachesTheCaller) {
  ThreadPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.run(16, 2,
                        [&](int64_t c) {
                          ran.fetch_add(1);
                          if (c == 5) throw std::runtime_error("chunk 5 failed");
                        }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 16);  // the others still ran
  // The pool is still usable.
  std::atomic<int> after{0};
  pool.run(8, 2, [&](int64_t) { after.fetch_add(1); });
  EXPECT_EQ(after.load(), 8);
}

TEST(ThreadPool, IdleHelpersSleepInsteadOfSpinning) {
  // After a job, helpers poll for ~100 µs and then sleep: a worker waiting on
  // the network must leave the cores to I/O. OpenMP's default spin (hundreds
  // of milliseconds of CPU per idle helper) fails this.
  ThreadPool pool(4, 100);
  pool.run(64, 4, [](int64_t) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const double used = process_cpu_seconds() - before;
  EXPECT_LT(used, 0.05) << "3 idle helpers used " << used << " s of CPU in 0.4 s";
}

TEST(ThreadPool, RestEndsThePollingAtOnce) {
  // Helpers that would poll for a whole second after a job sleep as soon as
  // rest() is called, and the next job still reaches them.
  ThreadPool pool(3, 1000000);
  pool.run(64, 3, [](int64_t) {});
  pool.rest();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double used = process_cpu_seconds() - before;
  EXPECT_LT(used, 0.05) << "2 resting helpers used " << used << " s of CPU in 0.3 s";
  std::mutex mu;
  std::set<std::thread::id> ran_on;
  pool.run(64, 3, [&](int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::lock_guard<std::mutex> lock(mu);
    ran_on.insert(std::this_thread::get_id());
  });
  EXPECT_GT(ran_on.size(), 1u) << "the job after a rest ran on the caller alone";
}

TEST(Threads, ParallelForCoversTheRange) {
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  for (int64_t n : {1, 5, 17, 1000}) {
    std::vector<int> hits(n, 0);
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++hits[i];
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1);
  }
  set_num_threads(0);
  EXPECT_EQ(num_threads(), available_cores());
}

TEST(Threads, ThreadCountIsChecked) {
  const int cores = available_cores();
  std::string warning;
  EXPECT_EQ(checked_thread_count(1, &warning), 1);
  EXPECT_TRUE(warning.empty());
  for (int bad : {0, -1, -64}) {
    try {
      checked_thread_count(bad, &warning);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--threads must be at least 1"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(checked_thread_count(cores + 5, &warning), cores);
  EXPECT_NE(warning.find("more than the " + std::to_string(cores) + " cores"), std::string::npos) << warning;
}

TEST(Threads, MachineLoadThatCannotBeReadSaysSo) {
  MachineLoad load("/nonexistent-proc");
  EXPECT_FALSE(load.readable());
  EXPECT_FALSE(load.other_busy_cores().has_value());
}

TEST(Threads, MachineLoadIsReadOnLinux) {
  MachineLoad load;
  ASSERT_TRUE(load.readable());
  load.other_busy_cores();
  // Keep one thread of ours busy: it is this process's, not another's.
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
  const auto others = load.other_busy_cores();
  ASSERT_TRUE(others.has_value());
  EXPECT_GE(*others, 0.0);
  EXPECT_LE(*others, available_cores() + 0.5);
}

TEST(Threads, BackgroundModeKeepsResultsAndAdapts) {
  set_num_threads(2);
  std::string why;
  ASSERT_TRUE(set_background(true, &why)) << why;
  EXPECT_TRUE(background());
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  adapt_to_machine_load();
  EXPECT_GE(active_threads(), 1);
  EXPECT_LE(active_threads(), 2);
  std::atomic<int64_t> sum{0};
  parallel_for(1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
  });
  EXPECT_EQ(sum.load(), 499500);
  // The calling thread took the mode's priority with its parallel_for.
  const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
  EXPECT_EQ(getpriority(PRIO_PROCESS, tid), 19);
  ASSERT_TRUE(set_background(false, &why));
  EXPECT_EQ(active_threads(), 2);
  std::atomic<int64_t> again{0};
  parallel_for(10, 1, [&](int64_t b, int64_t e) { again.fetch_add(e - b); });
  EXPECT_EQ(again.load(), 10);
  // Back to normal needs the right to raise priority (root, or RLIMIT_NICE).
  if (geteuid() == 0) {
    EXPECT_EQ(getpriority(PRIO_PROCESS, tid), 0);
  }
  set_num_threads(0);
}

}  // namespace
}  // namespace bonfire
