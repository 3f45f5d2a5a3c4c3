/* test_hosts.c -- server execution mode's supervisor (hosts.c) on a real loop with stand-in hosts
 * (CEREA_NODE = a small shell script, trusted: no bubblewrap here): refusals at start (no bwrap
 * without the trusted flag, bad counts, missing node), restarts with backoff, every process reaped,
 * and the server closing with its hosts so that uv_loop_close() == 0.  The full sandboxed stack is
 * tested in tests/fullstack/. */
#include "orch.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SBX_SOURCE_DIR
#error "SBX_SOURCE_DIR must name the checkout (worker/headless-host.js is looked up there)"
#endif

static char data_dir[64], static_dir[96], script[160], log_path[160];

/* The previous case's temp tree goes before the next one is made (tests leave nothing in /tmp). */
static void remove_dirs(void) {
  if (data_dir[0] == '\0')
    return;
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", data_dir);
  ck_assert_int_eq(system(cmd), 0);
  data_dir[0] = '\0';
}

static void make_dirs(const char *script_body) {
  remove_dirs();
  snprintf(data_dir, sizeof(data_dir), "/tmp/cerea-thosts-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(data_dir));
  snprintf(static_dir, sizeof(static_dir), "%s/www", data_dir);
  ck_assert_int_eq(mkdir(static_dir, 0755), 0);
  char p[200];
  snprintf(p, sizeof(p), "%s/pyodide", static_dir);
  ck_assert_int_eq(mkdir(p, 0755), 0);
  snprintf(p, sizeof(p), "%s/hosts", data_dir);
  ck_assert_int_eq(mkdir(p, 0700), 0);
  snprintf(script, sizeof(script), "%s/hosts/fake-node.sh", data_dir);
  snprintf(log_path, sizeof(log_path), "%s/hosts/starts.log", data_dir);
  FILE *f = fopen(script, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "#!/bin/sh\nL='%s'\necho \"start $(date +%%s%%N)\" >> \"$L\"\n%s", log_path,
          script_body);
  fclose(f);
  chmod(script, 0755);
  setenv("CEREA_NODE", script, 1);
  setenv("CEREA_ROOT", SBX_SOURCE_DIR, 1);
  setenv("CEREA_SERVER_TRUSTED", "1", 1);
  unsetenv("CEREA_BWRAP");
  unsetenv("CEREA_HOSTS");
  unsetenv("CEREA_HOST_KERNELS");
}

static void config(struct orch_config *c) {
  ck_assert_int_eq(orch_config_defaults(c), 0);
  ck_assert_int_eq(orch_config_set(c, "CHAT_CODE_EXECUTION", "server", NULL), 0);
  ck_assert_int_eq(orch_config_set(c, "CEREA_LISTEN", "127.0.0.1:0", NULL), 0);
  ck_assert_int_eq(orch_config_set(c, "CEREA_DATA_DIR", data_dir, NULL), 0);
  ck_assert_int_eq(orch_config_set(c, "CEREA_STATIC_DIR", static_dir, NULL), 0);
  ck_assert_int_eq(orch_config_set(c, "CEREA_API_KEY", "unit-test-key-0123456789", NULL), 0);
}

/* Lines of the file at path that start with word ("": every line). */
static int count_lines_in(const char *path, const char *word) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  int n = 0;
  char line[4096];
  while (fgets(line, sizeof(line), f))
    n += strncmp(line, word, strlen(word)) == 0;
  fclose(f);
  return n;
}

static int count_lines(const char *word) { return count_lines_in(log_path, word); }

static int count_starts(void) { return count_lines("start"); }

/* When the i-th host (0-based) started, in ms of the wall clock (its log line says). */
static uint64_t start_ms(int i) {
  FILE *f = fopen(log_path, "r");
  ck_assert_ptr_nonnull(f);
  char line[64];
  unsigned long long ns = 0;
  for (int k = 0; k <= i && fgets(line, sizeof(line), f); k++)
    ck_assert_int_eq(sscanf(line, "start %llu", &ns), 1);
  fclose(f);
  return ns / 1000000;
}

static int closed;
static void on_closed(void *ud) {
  (void)ud;
  closed = 1;
}
static void on_stop(uv_timer_t *t) {
  orch_close(t->data, on_closed, NULL);
  uv_close((uv_handle_t *)t, NULL);
}

/* run_for(0) closes once the file poll_path holds poll_want lines starting with poll_word, seen
 * every 20 ms: the event the case waits for (hosts started, a host ignoring SIGTERM, the stand-in
 * bubblewrap done), not a window that a loaded machine overruns.  The wait is bounded by the
 * case's own timeout. */
static const char *poll_path, *poll_word;
static int poll_want;
static uint64_t close_started_ms;
static void on_poll(uv_timer_t *t) {
  if (count_lines_in(poll_path, poll_word) < poll_want)
    return;
  close_started_ms = sbx_now_mono_ms();
  orch_close(t->data, on_closed, NULL);
  uv_close((uv_handle_t *)t, NULL);
}

static void close_when(const char *path, const char *word, int want) {
  poll_path = path, poll_word = word, poll_want = want;
}

/* Runs a server for run_ms, then closes it (run_ms 0: once close_when's lines are there); every
 * handle must be gone afterwards. */
static void run_for(uint64_t run_ms) {
  struct orch_config c;
  config(&c);
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  struct orch *o = NULL;
  struct sbx_error err;
  sbx_error_clear(&err);
  int rc = orch_new(&loop, &c, &o, &err);
  ck_assert_msg(rc == 0, "orch_new: %s", err.msg);
  uv_timer_t stop;
  uv_timer_init(&loop, &stop);
  stop.data = o;
  if (run_ms > 0)
    uv_timer_start(&stop, on_stop, run_ms, 0);
  else
    uv_timer_start(&stop, on_poll, 20, 20);
  closed = 0;
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(closed, 1);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  orch_config_free(&c);
}

START_TEST(test_restart_with_backoff_and_close) {
  make_dirs("echo ready\nexit 7\n");
  /* Exits at once: started, then again after 250, 500 and 1000 ms of backoff.  The fourth start
   * comes at least 1750 ms after the first (a loaded machine only adds to that): 4 starts, not
   * the 20 that restarting at once would make in that time. */
  close_when(log_path, "start", 4);
  run_for(0);
  int n = count_starts();
  uint64_t spread = start_ms(3) - start_ms(0);
  ck_assert_msg(n >= 4 && n <= 5, "starts before the close: %d", n);
  ck_assert_msg(spread >= 1750 - 50, "the fourth start %llu ms after the first",
                (unsigned long long)spread);
  /* Every child was reaped by its exit callback. */
  ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
  ck_assert_int_eq(errno, ECHILD);
  remove_dirs();
}
END_TEST

START_TEST(test_close_kills_running_hosts) {
  /* A host that ignores SIGTERM: the close waits, SIGKILLs it after the grace, then finishes.
   * The close comes once both hosts set their trap (before it, SIGTERM would end them). */
  make_dirs("trap '' TERM\necho trapped >> \"$L\"\necho ready\nwhile true; do sleep 0.1; done\n");
  setenv("CEREA_HOSTS", "2", 1);
  close_when(log_path, "trapped", 2);
  run_for(0);
  uint64_t took = sbx_now_mono_ms() - close_started_ms;
  ck_assert_int_eq(count_starts(), 2);
  ck_assert_msg(took >= 3000 && took < 8000, "close took %llu ms", (unsigned long long)took);
  ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
  remove_dirs();
}
END_TEST

START_TEST(test_refusals) {
  make_dirs("exit 0\n");
  struct orch_config c;
  struct sbx_error err;
  uv_loop_t loop;
  struct orch *o = NULL;
  const struct {
    const char *key, *value;
    int rc;
    const char *msg;
  } cases[] = {
      {"CEREA_BWRAP", "/nonexistent/bwrap", SBX_EPERM, "without bubblewrap"},
      {"CEREA_HOSTS", "0", SBX_EINVAL, "CEREA_HOSTS must be 1..64"},
      {"CEREA_HOSTS", "65", SBX_EINVAL, "CEREA_HOSTS"},
      {"CEREA_HOST_KERNELS", "x", SBX_EINVAL, "CEREA_HOST_KERNELS"},
      {"CEREA_HOST_MEMORY_MB", "100", SBX_EINVAL, "CEREA_HOST_MEMORY_MB"},
      {"CEREA_KERNEL_MEMORY_MB", "64", SBX_EINVAL, "CEREA_KERNEL_MEMORY_MB 128..16384"},
      {"CEREA_NODE", "/nonexistent/node", SBX_ENOENT, "not found (set CEREA_NODE)"},
      {"CEREA_ROOT", "/nonexistent", SBX_ENOENT, "headless-host.js not found"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    make_dirs("exit 0\n");
    if (strcmp(cases[i].key, "CEREA_BWRAP") == 0)
      unsetenv("CEREA_SERVER_TRUSTED");
    setenv(cases[i].key, cases[i].value, 1);
    config(&c);
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    sbx_error_clear(&err);
    int rc = orch_new(&loop, &c, &o, &err);
    ck_assert_msg(rc == cases[i].rc, "%s=%s: rc %d (%s)", cases[i].key, cases[i].value, rc,
                  err.msg);
    ck_assert_msg(strstr(err.msg, cases[i].msg) != NULL, "%s=%s: %s", cases[i].key, cases[i].value,
                  err.msg);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    ck_assert_int_eq(count_starts(), 0);
    orch_config_free(&c);
    unsetenv(cases[i].key);
  }
  remove_dirs();
}
END_TEST

/* Sandboxed (not trusted), with a stand-in bubblewrap that logs its arguments, the size of what
 * it reads on fd 3, its memory bound, its uid and whether it may read what it is asked to bind:
 * the command line carries every layer, the filter arrives as a BPF program (a whole number of
 * 8-byte instructions), and the memory bound goes first.  As root, bwrap always runs as uid 65534
 * with the socket in a folder of its own in /tmp and the sources and runtime bound read-only at
 * /cerea from a copy it may read: case 0 with a runtime readable by others, case 1 with one
 * readable by root only (a folder 0700, its files 0600: what a checkout in a `mktemp -d` folder or
 * made with umask 077 is).  The folder is gone once the server closed. */
START_TEST(test_sandboxed_command_line) {
  make_dirs("exit 0\n");
  unsetenv("CEREA_SERVER_TRUSTED");
  setenv("CEREA_NODE", "/bin/sh", 1); /* reachable by others; the stand-in bwrap runs no node */
  char wasm[240], out_dir[200], py_dir[200];
  snprintf(py_dir, sizeof(py_dir), "%s/pyodide", static_dir);
  snprintf(wasm, sizeof(wasm), "%s/pyodide.asm.wasm", py_dir);
  FILE *w = fopen(wasm, "w");
  ck_assert_ptr_nonnull(w);
  fputs("wasm", w);
  fclose(w);
  chmod(wasm, _i == 0 ? 0644 : 0600);
  chmod(py_dir, _i == 0 ? 0755 : 0700);
  chmod(data_dir, 0711); /* the stand-in bwrap lives in it */
  chmod(static_dir, 0755);
  snprintf(out_dir, sizeof(out_dir), "%s/out", data_dir);
  ck_assert_int_eq(mkdir(out_dir, 0777), 0);
  chmod(out_dir, 0777); /* where the stand-in writes, whichever uid it runs as */
  char bwrap[200], argv_log[240], cmd[700];
  snprintf(bwrap, sizeof(bwrap), "%s/fake-bwrap.sh", data_dir);
  snprintf(argv_log, sizeof(argv_log), "%s/bwrap.log", out_dir);
  FILE *f = fopen(bwrap, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f,
          "#!/bin/sh\necho \"$*\" > '%s'\nwc -c <&3 >> '%s'\ngrep 'Max data size' "
          "/proc/self/limits >> '%s'\nid -u >> '%s'\n"
          "r=readable\nwhile [ $# -gt 2 ]; do\n  if [ \"$1\" = --ro-bind ]; then\n"
          "    [ -r \"$2\" ] || r=\"unreadable $2\"\n"
          "    [ \"$3\" != /cerea/pyodide ] || [ -r \"$2/pyodide.asm.wasm\" ] || "
          "r=\"unreadable $2/pyodide.asm.wasm\"\n  fi\n  shift\ndone\necho \"$r\" >> '%s'\n"
          "echo ready\nwhile read -r l; do :; done\n",
          argv_log, argv_log, argv_log, argv_log, argv_log);
  fclose(f);
  chmod(bwrap, 0755);
  setenv("CEREA_BWRAP", bwrap, 1);
  setenv("CEREA_KERNEL_MEMORY_MB", "512", 1);
  setenv("CEREA_HOST_MEMORY_MB", "4096", 1);
  close_when(argv_log, "", 5); /* its five lines written: it ran whole */
  run_for(0);
  f = fopen(argv_log, "r");
  ck_assert_msg(f != NULL, "the stand-in bubblewrap never ran");
  char args[4096] = "", size[64] = "", limit[256] = "", uid[32] = "", readable[400] = "";
  ck_assert_ptr_nonnull(fgets(args, sizeof(args), f));
  ck_assert_ptr_nonnull(fgets(size, sizeof(size), f));
  ck_assert_ptr_nonnull(fgets(limit, sizeof(limit), f));
  ck_assert_ptr_nonnull(fgets(uid, sizeof(uid), f));
  ck_assert_ptr_nonnull(fgets(readable, sizeof(readable), f));
  fclose(f);
  ck_assert_msg(strcmp(readable, "readable\n") == 0, "what bwrap binds: %s", readable);
  if (geteuid() == 0) {
    ck_assert_int_eq(atoi(uid), 65534);
    const char *base = strstr(args, "--bind /tmp/cerea-hosts-");
    ck_assert_msg(base != NULL, "socket folder: %s", args);
    char dir[64];
    ck_assert_int_eq(sscanf(base, "--bind %63[^ ]", dir), 1);
    ck_assert_msg(strlen(dir) > 5 && strcmp(dir + strlen(dir) - 5, "/sock") == 0, "%s", dir);
    dir[strlen(dir) - 5] = '\0';
    snprintf(cmd, sizeof(cmd), "--ro-bind %s/runtime/pyodide /cerea/pyodide", dir);
    ck_assert_msg(strstr(args, cmd) != NULL, "missing %s in: %s", cmd, args);
    snprintf(cmd, sizeof(cmd), "--ro-bind %s/runtime/worker /cerea/worker", dir);
    ck_assert_msg(strstr(args, cmd) != NULL, "missing %s in: %s", cmd, args);
    ck_assert_msg(access(dir, F_OK) != 0, "%s is left after the server closed", dir);
  } else {
    fprintf(stderr, "hosts: not root: bwrap runs as our uid %s", uid);
    ck_assert_int_eq(atoi(uid), (int)geteuid());
    char sock_bind[256];
    snprintf(sock_bind, sizeof(sock_bind), "--bind %s/hosts %s/hosts", data_dir, data_dir);
    ck_assert_msg(strstr(args, sock_bind) != NULL, "socket folder: %s", args);
    snprintf(cmd, sizeof(cmd), "--ro-bind %s /cerea/pyodide", py_dir);
    ck_assert_msg(strstr(args, cmd) != NULL, "missing %s in: %s", cmd, args);
  }
  /* --kernels: (4096 - 512) / (512 + 256) - 1 (the spare) */
  const char *want[] = {"--unshare-user --uid 65534 --gid 65534 --disable-userns --cap-drop ALL",
                        "--unshare-net",
                        "--unshare-pid",
                        "--unshare-cgroup-try",
                        "--seccomp 3",
                        "--die-with-parent",
                        "--allow-fs-read=/proc/self/status",
                        "--allow-fs-read=/cerea/worker",
                        "--allow-fs-read=/cerea/pyodide",
                        " /cerea/worker/headless-host.js --orchestrator unix:",
                        "--max-old-space-size=256",
                        "--kernels 3 ",
                        "--disallow-code-generation-from-strings"};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    ck_assert_msg(strstr(args, want[i]) != NULL, "missing %s in: %s", want[i], args);
  long n = atol(size);
  ck_assert_msg(n > 64 && n % 8 == 0, "filter size %ld", n);
  /* (3 kernels + 1) x (512 + 256) + 512 MiB: within the budget */
  snprintf(cmd, sizeof(cmd), "%llu", (4ull * (512 + 256) + 512) * 1048576ull);
  ck_assert_msg(strstr(limit, cmd) != NULL, "RLIMIT_DATA: %s", limit);
  unsetenv("CEREA_BWRAP");
  unsetenv("CEREA_KERNEL_MEMORY_MB");
  unsetenv("CEREA_HOST_MEMORY_MB");
  remove_dirs();
}
END_TEST

/* The kernels a host runs at once: what its memory budget holds at each kernel's cap, the spare
 * among them; 2 at most when kernels load Python instead of restoring the snapshot (a load costs
 * seconds of CPU); CEREA_HOST_KERNELS when set.  Read from the host's command line. */
static int kernels_started_with(const char *budget, const char *cap, const char *snapshot,
                                const char *fixed) {
  char body[400], args_log[200];
  snprintf(args_log, sizeof(args_log), "/tmp/cerea-thosts-args-%d.log", (int)getpid());
  remove(args_log);
  snprintf(body, sizeof(body), "echo \"$*\" > '%s'\necho ready\nwhile read -r l; do :; done\n",
           args_log);
  make_dirs(body);
  setenv("CEREA_HOST_MEMORY_MB", budget, 1);
  setenv("CEREA_KERNEL_MEMORY_MB", cap, 1);
  setenv("CEREA_KERNEL_SNAPSHOT", snapshot, 1);
  if (fixed)
    setenv("CEREA_HOST_KERNELS", fixed, 1);
  close_when(args_log, "", 1); /* closes once the stand-in host wrote its command line */
  run_for(0);
  unsetenv("CEREA_HOST_MEMORY_MB");
  unsetenv("CEREA_KERNEL_MEMORY_MB");
  unsetenv("CEREA_KERNEL_SNAPSHOT");
  unsetenv("CEREA_HOST_KERNELS");
  FILE *f = fopen(args_log, "r");
  ck_assert_msg(f != NULL, "the host never started");
  char args[2048] = "";
  ck_assert_ptr_nonnull(fgets(args, sizeof(args), f));
  fclose(f);
  remove(args_log);
  remove_dirs();
  const char *k = strstr(args, "--kernels ");
  ck_assert_msg(k != NULL, "no --kernels in: %s", args);
  return atoi(k + 10);
}

START_TEST(test_kernels_from_the_memory_budget) {
  ck_assert_int_eq(kernels_started_with("4096", "512", "1", NULL), 3);
  ck_assert_int_eq(kernels_started_with("16384", "256", "1", NULL), 30); /* 15872 / 512 - 1 */
  ck_assert_int_eq(kernels_started_with("1024", "1024", "1", NULL), 1);  /* at least one */
  ck_assert_int_eq(kernels_started_with("16384", "256", "0", NULL), 2);  /* loads: 2 */
  ck_assert_int_eq(kernels_started_with("16384", "256", "1", "5"), 5);   /* set: as set */
}
END_TEST

/* As root, hosts never run as root: a node that uid 65534 may not run (in a folder of root's
 * alone) makes server mode refuse to start with one line that names it, and nothing starts. */
START_TEST(test_refuses_to_run_hosts_as_root) {
  if (geteuid() != 0) {
    fprintf(stderr, "hosts: not root (uid %d): hosts run as this uid, nothing to refuse\n",
            (int)geteuid());
    return;
  }
  make_dirs("exit 0\n");
  unsetenv("CEREA_SERVER_TRUSTED");
  setenv("CEREA_NODE", script, 1); /* DATA/hosts is 0700 */
  setenv("CEREA_BWRAP", "/bin/true", 1);
  struct orch_config c;
  config(&c);
  uv_loop_t loop;
  ck_assert_int_eq(uv_loop_init(&loop), 0);
  struct orch *o = NULL;
  struct sbx_error err;
  sbx_error_clear(&err);
  int rc = orch_new(&loop, &c, &o, &err);
  ck_assert_msg(rc == SBX_EPERM, "rc %d: %s", rc, err.msg);
  char want[300];
  snprintf(want, sizeof(want),
           "server mode refuses to start kernel hosts as root: they run as uid 65534, which may "
           "not reach %s",
           script);
  ck_assert_msg(strstr(err.msg, want) != NULL, "%s", err.msg);
  ck_assert_ptr_null(strchr(err.msg, '\n'));
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
  ck_assert_int_eq(count_starts(), 0);
  orch_config_free(&c);
  unsetenv("CEREA_BWRAP");
  remove_dirs();
}
END_TEST

/* A folder a killed server left in /tmp (its lock free) goes at the next start; one whose server
 * lives (its lock held) stays. */
START_TEST(test_sweeps_what_a_killed_server_left) {
  if (geteuid() != 0) {
    fprintf(stderr, "hosts: not root (uid %d): no copy in /tmp to sweep\n", (int)geteuid());
    return;
  }
  char dead[] = "/tmp/cerea-hosts-XXXXXX", live[] = "/tmp/cerea-hosts-XXXXXX", p[80];
  ck_assert_ptr_nonnull(mkdtemp(dead));
  ck_assert_ptr_nonnull(mkdtemp(live));
  const char *made[] = {dead, live};
  for (int i = 0; i < 2; i++) {
    snprintf(p, sizeof(p), "%s/owner", made[i]);
    close(open(p, O_CREAT | O_WRONLY, 0600));
    snprintf(p, sizeof(p), "%s/runtime", made[i]);
    ck_assert_int_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/runtime/worker", made[i]);
    ck_assert_int_eq(mkdir(p, 0755), 0);
  }
  int lock = open(live, O_RDONLY | O_DIRECTORY);
  ck_assert_int_eq(flock(lock, LOCK_EX), 0);
  make_dirs("echo ready\nwhile read -r l; do :; done\n");
  unsetenv("CEREA_SERVER_TRUSTED");
  setenv("CEREA_NODE", "/bin/sh", 1);
  setenv("CEREA_BWRAP", "/bin/true", 1);
  run_for(300);
  ck_assert_msg(access(dead, F_OK) != 0, "%s is left", dead);
  ck_assert_msg(access(live, F_OK) == 0, "%s was removed while its server lives", live);
  close(lock);
  char cmd_rm[80];
  snprintf(cmd_rm, sizeof(cmd_rm), "rm -rf '%s'", live);
  ck_assert_int_eq(system(cmd_rm), 0);
  unsetenv("CEREA_BWRAP");
  remove_dirs();
}
END_TEST

int main(void) {
  Suite *s = suite_create("hosts");
  TCase *tc = tcase_create("supervisor");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_refusals);
  tcase_add_test(tc, test_restart_with_backoff_and_close);
  tcase_add_test(tc, test_close_kills_running_hosts);
  tcase_add_test(tc, test_kernels_from_the_memory_budget);
  tcase_add_loop_test(tc, test_sandboxed_command_line, 0, 2);
  tcase_add_test(tc, test_refuses_to_run_hosts_as_root);
  tcase_add_test(tc, test_sweeps_what_a_killed_server_left);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
