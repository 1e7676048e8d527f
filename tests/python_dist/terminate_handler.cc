// Preloaded by exit_loop.py --handler (LD_PRELOAD): on std::terminate or SIGABRT, prints
// this thread's id, name and backtrace, then has gdb write every thread's stack to
// $TERM_DIR/gdb.PID.txt. A diagnostic for a rank that aborts at exit; not part of any library.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <execinfo.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void Dump(const char* why) {
  char name[32] = {0};
  pthread_getname_np(pthread_self(), name, sizeof name);
  fprintf(stderr, "TERMHANDLER: %s in pid %d tid %ld name '%s'\n", why, getpid(),
          (long)syscall(SYS_gettid), name);
  void* frames[64];
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  char out[512];
  const char* dir = getenv("TERM_DIR") ? getenv("TERM_DIR") : "/tmp";
  snprintf(out, sizeof out, "%s/gdb.%d.txt", dir, getpid());
  char pid[32];
  snprintf(pid, sizeof pid, "%d", getpid());
  pid_t child = fork();
  if (child == 0) {
    FILE* f = freopen(out, "w", stdout);
    (void)f;
    dup2(1, 2);
    execlp("gdb", "gdb", "-p", pid, "-batch", "-ex", "info threads", "-ex",
           "thread apply all bt", (char*)nullptr);
    _exit(127);
  }
  int st;
  waitpid(child, &st, 0);
  fprintf(stderr, "TERMHANDLER: stacks in %s\n", out);
}

static void Terminate() {
  Dump("std::terminate");
  signal(SIGABRT, SIG_DFL);
  abort();
}

static void OnAbrt(int) {
  Dump("SIGABRT");
  signal(SIGABRT, SIG_DFL);
  raise(SIGABRT);
}

__attribute__((constructor)) static void Install() {
  std::set_terminate(Terminate);
  signal(SIGABRT, OnAbrt);
}
