/* test_config.c -- settings (config.c): defaults, each setting's valid and invalid values with
 * the message naming it, the config file (comments, quotes, errors with line numbers), the
 * environment, cross-field checks; the runtime settings: from the configuration, each one an
 * operator may change set within its range and refused outside it. */
#include "internal.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

START_TEST(test_defaults) {
  struct orch_config c;
  ck_assert_int_eq(orch_config_defaults(&c), 0);
  ck_assert_int_eq(c.exec_mode, ORCH_EXEC_BROWSER);
  ck_assert_int_eq(c.time_limit_s, 60);
  ck_assert_uint_eq(c.paused_wait_ms, 120000);
  ck_assert_uint_eq(c.page_grace_ms, 10000);
  ck_assert_uint_eq(c.watchdog_grace_ms, 15000);
  ck_assert_uint_eq(c.cancel_grace_ms, 5000);
  ck_assert_int_eq(c.pypi_disabled, 0);
  ck_assert_int_eq(c.retention_days, 30);
  ck_assert_int_eq(c.max_attempts, 3);
  ck_assert_uint_eq(c.attachment_quota_mb, 500);
  ck_assert_str_eq(c.data_dir, "./var");
  ck_assert_ptr_null(c.api_key);
  ck_assert_int_eq(orch_config_validate(&c, NULL), 0);
  orch_config_free(&c);
}
END_TEST

struct vcase {
  const char *key, *value;
  int ok;
  const char *msg_has;
};
static const struct vcase vcases[] = {
    {"CHAT_CODE_EXECUTION", "browser", 1, NULL},
    {"CHAT_CODE_EXECUTION", "server", 1, NULL},
    {"CHAT_CODE_EXECUTION", "off", 1, NULL},
    {"CHAT_CODE_EXECUTION", "Browser", 0, "expected browser, server or off"},
    {"CHAT_CODE_EXECUTION", "", 0, "CHAT_CODE_EXECUTION"},
    {"CODE_TIME_LIMIT_S", "300", 1, NULL},
    {"CODE_TIME_LIMIT_S", "1", 1, NULL},
    {"CODE_TIME_LIMIT_S", "301", 0, "from 1 to 300"},
    {"CODE_TIME_LIMIT_S", "0", 0, "CODE_TIME_LIMIT_S=0"},
    {"CODE_TIME_LIMIT_S", "60s", 0, "whole seconds"},
    {"CODE_TIME_LIMIT_S", "-5", 0, "CODE_TIME_LIMIT_S"},
    {"CODE_PAUSED_WAIT_MS", "120000", 1, NULL},
    {"CODE_PAUSED_WAIT_MS", "abc", 0, "milliseconds"},
    {"PAGE_GRACE_MS", "0", 1, NULL},
    {"CODE_WATCHDOG_GRACE_MS", "500", 1, NULL},
    {"CODE_CANCEL_GRACE_MS", "x", 0, "CODE_CANCEL_GRACE_MS=x"},
    {"PAGE_GRACE_MS", "99999999999", 0, "PAGE_GRACE_MS"},
    {"CHAT_PYODIDE_PYPI_DISABLED", "true", 1, NULL},
    {"CHAT_PYODIDE_PYPI_DISABLED", "FALSE", 1, NULL},
    {"CHAT_PYODIDE_PYPI_DISABLED", "maybe", 0, "true or false"},
    {"ARTIFACT_RETENTION_DAYS", "30", 1, NULL},
    {"ARTIFACT_RETENTION_DAYS", "0", 0, "from 1 to 36500"},
    {"CEREA_LISTEN", "127.0.0.1:0", 1, NULL},
    {"CEREA_LISTEN", "unix:/tmp/x.sock", 1, NULL},
    {"CEREA_LISTEN", "localhost", 0, "ADDR:PORT"},
    {"CEREA_API_KEY", "0123456789abcdef", 1, NULL},
    {"CEREA_API_KEY", "short", 0, "16 characters"},
    {"CEREA_DATA_DIR", "", 0, "empty"},
    {"NOT_A_SETTING", "1", 0, "unknown setting"},
    {"CEREA_LLM_URL", "http://127.0.0.1:8080/v1", 1, NULL},
    {"CEREA_LLM_URL", "https://api.example.com/v1", 1, NULL},
    {"CEREA_LLM_URL", "ftp://x", 0, "http:// or https://"},
    {"CEREA_LLM_URL", "127.0.0.1:8080", 0, "CEREA_LLM_URL"},
    {"CEREA_LLM_MODEL", "", 0, "empty"},
    {"CEREA_LLM_API_KEY", "", 1, NULL},
    {"CEREA_LLM_MAX_TOOL_CALLS", "0", 1, NULL},
    {"CEREA_LLM_MAX_TOOL_CALLS", "101", 0, "from 0 to 100"},
    {"CEREA_LLM_MAX_TOKENS", "0", 0, "CEREA_LLM_MAX_TOKENS=0"},
    {"CEREA_LLM_TURN_S", "1", 1, NULL},
    {"CEREA_LLM_TURN_S", "10m", 0, "whole seconds"},
    {"CEREA_LLM_STALL_S", "3601", 0, "from 1 to 3600"},
    {"CODE_MAX_ATTEMPTS", "0", 1, NULL},
    {"CODE_MAX_ATTEMPTS", "100", 1, NULL},
    {"CODE_MAX_ATTEMPTS", "101", 0, "from 0 to 100"},
    {"CODE_MAX_ATTEMPTS", "3x", 0, "CODE_MAX_ATTEMPTS=3x"},
    {"CHAT_ATTACHMENT_QUOTA_MB", "0", 1, NULL},
    {"CHAT_ATTACHMENT_QUOTA_MB", "-1", 0, "CHAT_ATTACHMENT_QUOTA_MB=-1"},
    {"CEREA_PUBLIC_URL", "https://sandbox.example.com", 1, NULL},
    {"CEREA_PUBLIC_URL", "http://[::1]:8080", 1, NULL},
    {"CEREA_PUBLIC_URL", "sandbox.example.com", 0, "http://HOST[:PORT]"},
    {"CEREA_PUBLIC_URL", "https://sandbox.example.com/mcp", 0, "no path"},
    {"CEREA_PUBLIC_URL", "https://", 0, "CEREA_PUBLIC_URL"},
    {"CEREA_MCP_HANDOFF_S", "5", 1, NULL},
    {"CEREA_MCP_HANDOFF_S", "4", 0, "from 5 to 280"},
    {"CEREA_MCP_HANDOFF_S", "281", 0, "from 5 to 280"},
    {"CHAT_OUTPUT_QUOTA_MB", "1048577", 0, "expected whole MB from 0 (no quota) to 1048576"},
    {"PAGE_HEARTBEAT_MS", "99", 0, "expected milliseconds from 100 to 60000"},
    {"CEREA_LEASE_MS", "999", 0, "expected milliseconds from 1000 to 600000"},
    {"CODE_MAX_ATTEMPTS", "x", 0, "expected whole attempts (0: no bound) from 0 to 100"},
};

/* Each numeric setting lands in its own field, whole: an int's top value, and a uint64_t's past
 * what an int holds. */
START_TEST(test_numbers_land) {
  struct orch_config c;
  orch_config_defaults(&c);
  ck_assert_int_eq(orch_config_set(&c, "PAGE_SILENT_MS", "86400000", NULL), 0);
  ck_assert_uint_eq(c.page_silent_ms, 86400000u);
  ck_assert_uint_eq(c.page_grace_ms, 10000); /* its neighbours untouched */
  ck_assert_int_eq(orch_config_set(&c, "CHAT_OUTPUT_QUOTA_MB", "1048576", NULL), 0);
  ck_assert_uint_eq(c.output_quota_mb, 1048576u);
  ck_assert_uint_eq(c.attachment_quota_mb, 500);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_LEASE_MS", "600000", NULL), 0);
  ck_assert_uint_eq(c.lease_ms, 600000u);
  ck_assert_int_eq(orch_config_set(&c, "ARTIFACT_RETENTION_DAYS", "36500", NULL), 0);
  ck_assert_int_eq(c.retention_days, 36500);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_MCP_HANDOFF_S", "280", NULL), 0);
  ck_assert_int_eq(c.mcp_handoff_s, 280);
  ck_assert_int_eq(c.llm_stall_s, 60);
  ck_assert_int_eq(orch_config_set(&c, "CODE_INPUT_WAIT_S", "86400", NULL), 0);
  ck_assert_int_eq(c.input_wait_s, 86400);
  ck_assert_int_eq(c.time_limit_s, 60);
  orch_config_free(&c);
}
END_TEST

START_TEST(test_values) {
  const struct vcase *v = &vcases[_i];
  struct orch_config c;
  orch_config_defaults(&c);
  struct sbx_error e;
  sbx_error_clear(&e);
  int rc = orch_config_set(&c, v->key, v->value, &e);
  ck_assert_msg((rc == 0) == v->ok, "%s=%s rc %d", v->key, v->value, rc);
  if (!v->ok)
    ck_assert_msg(strstr(e.msg, v->msg_has) != NULL, "message [%s] lacks [%s]", e.msg, v->msg_has);
  orch_config_free(&c);
}
END_TEST

START_TEST(test_effects) {
  struct orch_config c;
  orch_config_defaults(&c);
  ck_assert_int_eq(orch_config_set(&c, "CHAT_CODE_EXECUTION", "off", NULL), 0);
  ck_assert_int_eq(c.exec_mode, ORCH_EXEC_OFF);
  ck_assert_int_eq(orch_config_set(&c, "CODE_TIME_LIMIT_S", "300", NULL), 0);
  ck_assert_int_eq(c.time_limit_s, 300);
  ck_assert_int_eq(orch_config_set(&c, "CODE_TIME_LIMIT_S", "301", NULL), SBX_EINVAL);
  ck_assert_int_eq(c.time_limit_s, 300); /* unchanged on error */
  ck_assert_int_eq(orch_config_set(&c, "CEREA_LISTEN", "127.0.0.1:1", NULL), 0);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_LISTEN", "127.0.0.1:2", NULL), 0);
  ck_assert_uint_eq(c.n_listen, 2);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_TLS_CERT", "/x.pem", NULL), 0);
  struct sbx_error e;
  ck_assert_int_eq(orch_config_validate(&c, &e), SBX_EINVAL);
  ck_assert_ptr_nonnull(strstr(e.msg, "--tls-key"));
  ck_assert_int_eq(orch_config_set(&c, "CEREA_TLS_KEY", "/k.pem", NULL), 0);
  ck_assert_int_eq(orch_config_validate(&c, NULL), 0);
  /* the assistant: defaults, its settings, url and model both or neither */
  ck_assert_int_eq(c.llm_max_tool_calls, 8);
  ck_assert_int_eq(c.llm_max_tokens, 4096);
  ck_assert_int_eq(c.llm_turn_s, 600);
  ck_assert_int_eq(c.llm_stall_s, 60);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_LLM_STALL_S", "5", NULL), 0);
  ck_assert_int_eq(c.llm_stall_s, 5);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_LLM_URL", "http://127.0.0.1:1/v1", NULL), 0);
  ck_assert_int_eq(orch_config_validate(&c, &e), SBX_EINVAL);
  ck_assert_ptr_nonnull(strstr(e.msg, "both CEREA_LLM_URL and CEREA_LLM_MODEL"));
  ck_assert_int_eq(orch_config_set(&c, "CEREA_LLM_MODEL", "m", NULL), 0);
  ck_assert_int_eq(orch_config_validate(&c, NULL), 0);
  ck_assert_int_eq(orch_config_set(&c, "CEREA_LLM_API_KEY", "sk-secret-value", NULL), 0);
  ck_assert_str_eq(c.llm_api_key, "sk-secret-value");
  orch_config_free(&c);
}
END_TEST

static char *write_tmp(const char *text) {
  static char path[64];
  snprintf(path, sizeof(path), "/tmp/orch-config-XXXXXX");
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, text, strlen(text)), (int)strlen(text));
  close(fd);
  return path;
}

START_TEST(test_file) {
  struct orch_config c;
  orch_config_defaults(&c);
  char *p = write_tmp("# settings\n\nCODE_TIME_LIMIT_S = 120\nCHAT_CODE_EXECUTION=\"off\"\n"
                      "  ARTIFACT_RETENTION_DAYS='7'  \n");
  ck_assert_int_eq(orch_config_load_file(&c, p, NULL), 0);
  unlink(p);
  ck_assert_int_eq(c.time_limit_s, 120);
  ck_assert_int_eq(c.exec_mode, ORCH_EXEC_OFF);
  ck_assert_int_eq(c.retention_days, 7);
  struct sbx_error e;
  p = write_tmp("CODE_TIME_LIMIT_S=60\nCODE_TIME_LIMIT_S=900\n");
  ck_assert_int_eq(orch_config_load_file(&c, p, &e), SBX_EINVAL);
  ck_assert_ptr_nonnull(strstr(e.msg, ":2: CODE_TIME_LIMIT_S=900"));
  unlink(p);
  p = write_tmp("just words\n");
  ck_assert_int_eq(orch_config_load_file(&c, p, &e), SBX_EINVAL);
  ck_assert_ptr_nonnull(strstr(e.msg, ":1: expected KEY=VALUE"));
  unlink(p);
  ck_assert_int_eq(orch_config_load_file(&c, "/nonexistent/cfg", &e), SBX_ENOENT);
  orch_config_free(&c);
}
END_TEST

START_TEST(test_env) {
  struct orch_config c;
  orch_config_defaults(&c);
  setenv("CODE_PAUSED_WAIT_MS", "5000", 1);
  setenv("CHAT_PYODIDE_PYPI_DISABLED", "true", 1);
  ck_assert_int_eq(orch_config_load_env(&c, NULL), 0);
  ck_assert_uint_eq(c.paused_wait_ms, 5000);
  ck_assert_int_eq(c.pypi_disabled, 1);
  setenv("CODE_TIME_LIMIT_S", "nope", 1);
  struct sbx_error e;
  ck_assert_int_eq(orch_config_load_env(&c, &e), SBX_EINVAL);
  ck_assert_ptr_nonnull(strstr(e.msg, "CODE_TIME_LIMIT_S=nope"));
  unsetenv("CODE_TIME_LIMIT_S");
  unsetenv("CODE_PAUSED_WAIT_MS");
  unsetenv("CHAT_PYODIDE_PYPI_DISABLED");
  orch_config_free(&c);
}
END_TEST

START_TEST(test_runtime) {
  struct orch_config c;
  orch_config_defaults(&c);
  c.time_limit_s = 90;
  c.cancel_grace_ms = 777;
  struct orch_runtime rt;
  orch__rt_init(&rt, &c);
  ck_assert_int_eq(rt.time_limit_s, 90);
  ck_assert_uint_eq(rt.cancel_grace_ms, 777);
  ck_assert_uint_eq(rt.paused_wait_ms, 120000);
  for (size_t i = 0; i < ORCH_RT_N_SETTINGS; i++) {
    const struct orch_rt_setting *s = &orch__rt_table()[i];
    ck_assert_ptr_nonnull(s->key);
    ck_assert_int_eq(orch__rt_set(&rt, s->key, s->hi), 0);
    ck_assert_int_eq(orch__rt_get(&rt, s), s->hi);
    ck_assert_int_eq(orch__rt_set(&rt, s->key, s->lo), 0);
    ck_assert_int_eq(orch__rt_get(&rt, s), s->lo);
    ck_assert_int_eq(orch__rt_set(&rt, s->key, s->hi + 1), SBX_EINVAL);
    ck_assert_int_eq(orch__rt_set(&rt, s->key, s->lo - 1), SBX_EINVAL);
    ck_assert_int_eq(orch__rt_get(&rt, s), s->lo); /* unchanged by a refusal */
  }
  ck_assert_int_eq(orch__rt_set(&rt, "CODE_TIME_LIMIT_S", 120), 0);
  ck_assert_int_eq(rt.time_limit_s, 120);
  ck_assert_int_eq(orch__rt_set(&rt, "PAGE_GRACE_MS", 4321), 0);
  ck_assert_uint_eq(rt.page_grace_ms, 4321);
  ck_assert_int_eq(orch__rt_set(&rt, "CODE_CANCEL_GRACE_MS", 1), SBX_ENOENT); /* not changeable */
  ck_assert_int_eq(orch__rt_set(&rt, "NOPE", 1), SBX_ENOENT);
  orch_config_free(&c);
}
END_TEST

/* The table is the one list of settings: each of its rows has a docs line and a row of its own in
 * docs/configuration.md's table; the environment reads every one of them (an unknown name is
 * refused by orch_config_set, so the table and the environment cannot disagree). */
START_TEST(test_table_documented) {
  const char *keys[64], *docs[64];
  size_t n = orch__config_settings(keys, docs, 64);
  ck_assert_uint_gt(n, 30);
  ck_assert_uint_le(n, 64);
  FILE *f = fopen(SBX_SOURCE_DIR "/docs/configuration.md", "r");
  ck_assert_ptr_nonnull(f);
  static char md[256 * 1024];
  size_t len = fread(md, 1, sizeof(md) - 1, f);
  md[len] = '\0';
  fclose(f);
  size_t rt = 0;
  for (size_t i = 0; i < n; i++) {
    ck_assert_msg(docs[i] != NULL && *docs[i], "%s has a docs line", keys[i]);
    char cell[96];
    snprintf(cell, sizeof(cell), "`%s`", keys[i]);
    int found = 0;
    for (const char *p = strstr(md, cell); p && !found; p = strstr(p + 1, cell)) {
      const char *line = p;
      while (line > md && line[-1] != '\n')
        line--;
      found = line[0] == '|' && (size_t)(p - line) < 80; /* in a row's first cell */
    }
    ck_assert_msg(found, "docs/configuration.md has a row for %s", keys[i]);
    for (size_t j = 0; j < ORCH_RT_N_SETTINGS; j++)
      rt += strcmp(orch__rt_table()[j].key, keys[i]) == 0;
    struct orch_config c;
    struct sbx_error err = {0};
    orch_config_defaults(&c);
    ck_assert_int_ne(orch_config_set(&c, keys[i], "?bad?", &err), SBX_ENOENT); /* known */
    orch_config_free(&c);
  }
  ck_assert_uint_eq(rt, ORCH_RT_N_SETTINGS); /* each runtime setting is a row of the table */
}
END_TEST

int main(void) {
  Suite *s = suite_create("config");
  TCase *tc = tcase_create("settings");
  tcase_add_test(tc, test_defaults);
  tcase_add_loop_test(tc, test_values, 0, (int)SBX_ARRAY_SIZE(vcases));
  tcase_add_test(tc, test_effects);
  tcase_add_test(tc, test_numbers_land);
  tcase_add_test(tc, test_file);
  tcase_add_test(tc, test_env);
  tcase_add_test(tc, test_runtime);
  tcase_add_test(tc, test_table_documented);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
