/* config.c -- the orchestrator's settings: defaults, an optional KEY=VALUE config file, the
 * environment, each value validated with an error that names the setting, the value and what is
 * allowed.
 *
 * Precedence (lowest first): defaults, config file (--config or CEREA_CONFIG), environment, command
 * line (main.c calls orch_config_set with the same names).
 *
 * The runtime settings (struct orch_runtime) start from the configuration; the ones an operator
 * may change while the server runs are listed once, in orch__rt_settings, with their admin API
 * names and ranges.  What it does not do: read or write the stored values (server.c reads them at
 * start, api_admin.c writes them).
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *orch_exec_mode_name(enum orch_exec_mode m) {
  switch (m) {
  case ORCH_EXEC_BROWSER:
    return "browser";
  case ORCH_EXEC_SERVER:
    return "server";
  case ORCH_EXEC_OFF:
    return "off";
  }
  return "?";
}

static int set_str(char **slot, const char *v) {
  char *d = sbx_strdup(v);
  if (d == NULL)
    return SBX_ENOMEM;
  sbx_free(*slot);
  *slot = d;
  return 0;
}

int orch_config_defaults(struct orch_config *c) {
  memset(c, 0, sizeof(*c));
  c->exec_mode = ORCH_EXEC_BROWSER;
  c->time_limit_s = 60;
  c->paused_wait_ms = 120000;
  c->page_grace_ms = 10000;
  c->watchdog_grace_ms = 15000;
  c->cancel_grace_ms = 5000;
  c->lease_ms = 10000;
  c->pypi_disabled = 0;
  c->retention_days = 30;
  c->input_wait_s = 300;
  c->page_heartbeat_ms = 2000;
  c->page_silent_ms = 6000;
  c->output_quota_mb = 500;
  c->attachment_quota_mb = 500;
  c->max_attempts = 3;
  c->llm_max_tool_calls = 8;
  c->llm_max_tokens = 4096;
  c->llm_turn_s = 600;
  c->llm_stall_s = 60;
  c->mcp_handoff_s = 50;
  c->session_idle_s = 7 * 24 * 3600;
  c->session_max_s = 30 * 24 * 3600;
  c->argon2_memory_kib = 19456; /* OWASP's minimum for Argon2id: 19 MiB, 2 passes, 1 lane */
  c->argon2_iterations = 2;
  if (set_str(&c->data_dir, "./var") != 0)
    return SBX_ENOMEM;
  return 0;
}

void orch_config_free(struct orch_config *c) {
  for (size_t i = 0; i < c->n_listen; i++)
    sbx_free(c->listen[i]);
  sbx_free(c->data_dir);
  sbx_free(c->database_url);
  sbx_free(c->node_url);
  sbx_free(c->public_url);
  sbx_free(c->tls_cert);
  sbx_free(c->tls_key);
  sbx_free(c->api_key);
  sbx_free(c->static_dir);
  sbx_free(c->llm_url);
  sbx_free(c->llm_model);
  sbx_free(c->llm_api_key);
  sbx_free(c->llm_ca_file);
  memset(c, 0, sizeof(*c));
}

/* Strict integer: digits only (optional leading '-'), no trailing garbage, within [lo, hi]. */
static int parse_int(const char *v, long long lo, long long hi, long long *out) {
  if (v == NULL || *v == '\0')
    return SBX_EINVAL;
  const char *p = v;
  if (*p == '-')
    p++;
  if (*p == '\0')
    return SBX_EINVAL;
  for (; *p; p++)
    if (!isdigit((unsigned char)*p))
      return SBX_EINVAL;
  errno = 0;
  long long x = strtoll(v, NULL, 10);
  if (errno != 0 || x < lo || x > hi)
    return SBX_EINVAL;
  *out = x;
  return 0;
}

static int parse_bool(const char *v, int *out) {
  static const char *yes[] = {"1", "true", "yes", "on"}, *no[] = {"0", "false", "no", "off", ""};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(yes); i++)
    if (strcasecmp(v, yes[i]) == 0)
      return *out = 1, 0;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(no); i++)
    if (strcasecmp(v, no[i]) == 0)
      return *out = 0, 0;
  return SBX_EINVAL;
}

/* The numeric settings: whole numbers in a range, into an int or a uint64_t of the config, with
 * what the error says they are ("expected <unit> from <lo><lo_note> to <hi>"). */
#define NUM(key, field, lo, hi, unit, lo_note)                                                     \
  {                                                                                                \
    key, offsetof(struct orch_config, field), sizeof(((struct orch_config *)0)->field), lo, hi,    \
        unit, lo_note                                                                              \
  }
static const struct {
  const char *key;
  size_t offset, size; /* size: sizeof(int) or sizeof(uint64_t) */
  long long lo, hi;
  const char *unit, *lo_note;
} nums[] = {
    NUM("CODE_TIME_LIMIT_S", time_limit_s, 1, ORCH_TIME_LIMIT_MAX_S, "whole seconds", ""),
    NUM("CODE_INPUT_WAIT_S", input_wait_s, 1, 86400, "whole seconds", ""),
    NUM("PAGE_HEARTBEAT_MS", page_heartbeat_ms, 100, 60000, "milliseconds", ""),
    NUM("CHAT_OUTPUT_QUOTA_MB", output_quota_mb, 0, 1024 * 1024, "whole MB", " (no quota)"),
    NUM("CHAT_ATTACHMENT_QUOTA_MB", attachment_quota_mb, 0, 1024 * 1024, "whole MB", " (no quota)"),
    NUM("CEREA_LLM_MAX_TOOL_CALLS", llm_max_tool_calls, 0, 100, "whole tool calls", ""),
    NUM("CEREA_LLM_MAX_TOKENS", llm_max_tokens, 1, 1000000, "whole tokens", ""),
    NUM("CEREA_LLM_TURN_S", llm_turn_s, 1, 86400, "whole seconds", ""),
    NUM("CEREA_LLM_STALL_S", llm_stall_s, 1, 3600, "whole seconds", ""),
    NUM("CODE_MAX_ATTEMPTS", max_attempts, 0, 100, "whole attempts (0: no bound)", ""),
    NUM("CEREA_MCP_HANDOFF_S", mcp_handoff_s, 5, 280, "whole seconds", ""),
    NUM("CODE_PAUSED_WAIT_MS", paused_wait_ms, 0, 24LL * 3600 * 1000, "milliseconds", ""),
    NUM("PAGE_GRACE_MS", page_grace_ms, 0, 24LL * 3600 * 1000, "milliseconds", ""),
    NUM("CODE_WATCHDOG_GRACE_MS", watchdog_grace_ms, 0, 24LL * 3600 * 1000, "milliseconds", ""),
    NUM("CODE_CANCEL_GRACE_MS", cancel_grace_ms, 0, 24LL * 3600 * 1000, "milliseconds", ""),
    NUM("PAGE_SILENT_MS", page_silent_ms, 0, 24LL * 3600 * 1000, "milliseconds", ""),
    NUM("CEREA_LEASE_MS", lease_ms, 1000, 600000, "milliseconds", ""),
    NUM("ARTIFACT_RETENTION_DAYS", retention_days, 1, 36500, "whole days", ""),
    NUM("CEREA_SESSION_IDLE_S", session_idle_s, 1, 31536000, "whole seconds", ""),
    NUM("CEREA_SESSION_MAX_S", session_max_s, 1, 31536000, "whole seconds", ""),
    NUM("CEREA_ARGON2_MEMORY_KIB", argon2_memory_kib, 8, 1048576, "whole KiB", ""),
    NUM("CEREA_ARGON2_ITERATIONS", argon2_iterations, 1, 16, "whole passes", ""),
};
#undef NUM

/* A numeric setting's value: 0, SBX_EINVAL, or SBX_ENOENT when key is not one of nums. */
static int set_number(struct orch_config *c, const char *key, const char *v,
                      struct sbx_error *err) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(nums); i++) {
    if (strcmp(key, nums[i].key) != 0)
      continue;
    long long n;
    if (parse_int(v, nums[i].lo, nums[i].hi, &n) != 0)
      return sbx_error_set(err, SBX_EINVAL, "%s=%s: expected %s from %lld%s to %lld", key, v,
                           nums[i].unit, nums[i].lo, nums[i].lo_note, nums[i].hi);
    char *slot = (char *)c + nums[i].offset;
    if (nums[i].size == sizeof(uint64_t))
      *(uint64_t *)(void *)slot = (uint64_t)n;
    else
      *(int *)(void *)slot = (int)n;
    return 0;
  }
  return SBX_ENOENT;
}

/* A URL setting: CEREA_NODE_URL (how the other nodes reach this one) or CEREA_PUBLIC_URL (how
 * clients do); SBX_ENOENT for another key. */
static int set_url(struct orch_config *c, const char *key, const char *v, struct sbx_error *err) {
  size_t n_url = strlen(v);
  if (strcmp(key, "CEREA_NODE_URL") == 0) {
    if ((strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) || n_url > 200 ||
        v[n_url - 1] == '/')
      return sbx_error_set(err, SBX_EINVAL,
                           "CEREA_NODE_URL=%s: expected http://HOST:PORT (how the other nodes "
                           "reach this one; no trailing slash, at most 200 bytes)",
                           v);
    return set_str(&c->node_url, v) == 0 ? 0 : SBX_ENOMEM;
  }
  if (strcmp(key, "CEREA_PUBLIC_URL") == 0) {
    const char *host = strncmp(v, "http://", 7) == 0    ? v + 7
                       : strncmp(v, "https://", 8) == 0 ? v + 8
                                                        : NULL;
    if (host == NULL || *host == '\0' || *host == '/' || n_url > 200 || strchr(host, '/'))
      return sbx_error_set(err, SBX_EINVAL,
                           "CEREA_PUBLIC_URL=%s: expected http://HOST[:PORT] or "
                           "https://HOST[:PORT] (how clients reach this server; no path, at "
                           "most 200 bytes)",
                           v);
    return set_str(&c->public_url, v) == 0 ? 0 : SBX_ENOMEM;
  }
  return SBX_ENOENT;
}

/* One more CEREA_LISTEN address. */
static int add_listen(struct orch_config *c, const char *v, struct sbx_error *err) {
  if (*v == '\0')
    return sbx_error_set(err, SBX_EINVAL, "CEREA_LISTEN: empty address");
  if (strncmp(v, "unix:", 5) != 0 && strrchr(v, ':') == NULL)
    return sbx_error_set(err, SBX_EINVAL, "CEREA_LISTEN=%s: expected ADDR:PORT or unix:PATH", v);
  if (c->n_listen == ORCH_MAX_LISTEN)
    return sbx_error_set(err, SBX_EINVAL, "CEREA_LISTEN: at most %d listeners", ORCH_MAX_LISTEN);
  c->listen[c->n_listen] = sbx_strdup(v);
  if (c->listen[c->n_listen] == NULL)
    return SBX_ENOMEM;
  c->n_listen++;
  return 0;
}

/* A text setting (a path, a name, a key): not empty, and what some of them must look like. */
static int set_text(struct orch_config *c, const char *key, const char *v, struct sbx_error *err) {
  char **slot = NULL;
  if (strcmp(key, "CEREA_DATA_DIR") == 0)
    slot = &c->data_dir;
  else if (strcmp(key, "CEREA_DATABASE_URL") == 0) /* checked by store_open_url */
    slot = &c->database_url;
  else if (strcmp(key, "CEREA_TLS_CERT") == 0)
    slot = &c->tls_cert;
  else if (strcmp(key, "CEREA_TLS_KEY") == 0)
    slot = &c->tls_key;
  else if (strcmp(key, "CEREA_STATIC_DIR") == 0)
    slot = &c->static_dir;
  else if (strcmp(key, "CEREA_LLM_MODEL") == 0)
    slot = &c->llm_model;
  else if (strcmp(key, "CEREA_LLM_CA_FILE") == 0)
    slot = &c->llm_ca_file;
  else if (strcmp(key, "CEREA_LLM_API_KEY") == 0) {
    if (*v == '\0')
      return 0; /* set but empty: no key */
    slot = &c->llm_api_key;
  } else if (strcmp(key, "CEREA_LLM_URL") == 0) {
    if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
      return sbx_error_set(err, SBX_EINVAL, /* not echoed: a URL may carry a password */
                           "CEREA_LLM_URL: expected an http:// or https:// base URL, such as "
                           "http://127.0.0.1:8080/v1");
    slot = &c->llm_url;
  } else if (strcmp(key, "CEREA_API_KEY") == 0) {
    if (strlen(v) < 16)
      return sbx_error_set(err, SBX_EINVAL, "CEREA_API_KEY: at least 16 characters");
    slot = &c->api_key;
  }
  if (slot == NULL)
    return sbx_error_set(err, SBX_ENOENT, "%s: unknown setting", key);
  if (*v == '\0')
    return sbx_error_set(err, SBX_EINVAL, "%s: empty value", key);
  return set_str(slot, v) == 0 ? 0 : SBX_ENOMEM;
}

int orch_config_set(struct orch_config *c, const char *key, const char *v, struct sbx_error *err) {
  if (v == NULL)
    return sbx_error_set(err, SBX_EINVAL, "%s: missing value", key);
  if (strcmp(key, "CHAT_CODE_EXECUTION") == 0) {
    if (strcmp(v, "browser") == 0)
      c->exec_mode = ORCH_EXEC_BROWSER;
    else if (strcmp(v, "server") == 0)
      c->exec_mode = ORCH_EXEC_SERVER;
    else if (strcmp(v, "off") == 0)
      c->exec_mode = ORCH_EXEC_OFF;
    else
      return sbx_error_set(err, SBX_EINVAL,
                           "CHAT_CODE_EXECUTION=%s: expected browser, server or off", v);
    return 0;
  }
  if (strcmp(key, "CEREA_MCP_CONFORMANCE_FIXTURES") == 0) {
    if (parse_bool(v, &c->mcp_fixtures) != 0)
      return sbx_error_set(err, SBX_EINVAL,
                           "CEREA_MCP_CONFORMANCE_FIXTURES=%s: expected true or false", v);
    return 0;
  }
  if (strcmp(key, "CHAT_PYODIDE_PYPI_DISABLED") == 0) {
    if (parse_bool(v, &c->pypi_disabled) != 0)
      return sbx_error_set(err, SBX_EINVAL, "CHAT_PYODIDE_PYPI_DISABLED=%s: expected true or false",
                           v);
    return 0;
  }
  if (strcmp(key, "CEREA_LISTEN") == 0)
    return add_listen(c, v, err);
  int rc = set_number(c, key, v, err);
  if (rc == SBX_ENOENT)
    rc = set_url(c, key, v, err);
  return rc == SBX_ENOENT ? set_text(c, key, v, err) : rc;
}

static const char *known_keys[] = {
    "CHAT_CODE_EXECUTION",
    "CODE_TIME_LIMIT_S",
    "CODE_PAUSED_WAIT_MS",
    "PAGE_GRACE_MS",
    "CODE_WATCHDOG_GRACE_MS",
    "CODE_CANCEL_GRACE_MS",
    "CODE_INPUT_WAIT_S",
    "PAGE_HEARTBEAT_MS",
    "PAGE_SILENT_MS",
    "CHAT_OUTPUT_QUOTA_MB",
    "CHAT_ATTACHMENT_QUOTA_MB",
    "CODE_MAX_ATTEMPTS",
    "CHAT_PYODIDE_PYPI_DISABLED",
    "CEREA_MCP_CONFORMANCE_FIXTURES",
    "ARTIFACT_RETENTION_DAYS",
    "CEREA_LISTEN",
    "CEREA_DATA_DIR",
    "CEREA_DATABASE_URL",
    "CEREA_NODE_URL",
    "CEREA_PUBLIC_URL",
    "CEREA_LEASE_MS",
    "CEREA_TLS_CERT",
    "CEREA_TLS_KEY",
    "CEREA_API_KEY",
    "CEREA_STATIC_DIR",
    "CEREA_LLM_URL",
    "CEREA_LLM_MODEL",
    "CEREA_LLM_API_KEY",
    "CEREA_LLM_CA_FILE",
    "CEREA_LLM_MAX_TOOL_CALLS",
    "CEREA_LLM_MAX_TOKENS",
    "CEREA_LLM_TURN_S",
    "CEREA_LLM_STALL_S",
    "CEREA_MCP_HANDOFF_S",
    "CEREA_SESSION_IDLE_S",
    "CEREA_SESSION_MAX_S",
    "CEREA_ARGON2_MEMORY_KIB",
    "CEREA_ARGON2_ITERATIONS",
};

int orch_config_load_env(struct orch_config *c, struct sbx_error *err) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(known_keys); i++) {
    const char *v = getenv(known_keys[i]);
    if (v == NULL)
      continue;
    if (strcmp(known_keys[i], "CHAT_PYODIDE_PYPI_DISABLED") == 0 && *v == '\0')
      continue;
    int rc = orch_config_set(c, known_keys[i], v, err);
    if (rc != 0)
      return rc;
  }
  return 0;
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s))
    s++;
  char *e = s + strlen(s);
  while (e > s && isspace((unsigned char)e[-1]))
    *--e = '\0';
  return s;
}

int orch_config_load_file(struct orch_config *c, const char *path, struct sbx_error *err) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return sbx_error_set(err, errno == ENOENT ? SBX_ENOENT : SBX_EIO, "config file %s: %s", path,
                         strerror(errno));
  char line[4096];
  int lineno = 0, rc = 0;
  while (fgets(line, sizeof(line), f) != NULL) {
    lineno++;
    char *s = trim(line);
    if (*s == '\0' || *s == '#')
      continue;
    char *eq = strchr(s, '=');
    if (eq == NULL) {
      rc = sbx_error_set(err, SBX_EINVAL, "%s:%d: expected KEY=VALUE", path, lineno);
      break;
    }
    *eq = '\0';
    char *key = trim(s), *val = trim(eq + 1);
    size_t vl = strlen(val);
    if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0]) {
      val[vl - 1] = '\0';
      val++;
    }
    struct sbx_error e;
    sbx_error_clear(&e);
    rc = orch_config_set(c, key, val, &e);
    if (rc != 0) {
      sbx_error_set(err, rc, "%s:%d: %s", path, lineno, e.msg);
      break;
    }
  }
  fclose(f);
  return rc;
}

int orch_config_validate(const struct orch_config *c, struct sbx_error *err) {
  if ((c->tls_cert == NULL) != (c->tls_key == NULL))
    return sbx_error_set(err, SBX_EINVAL,
                         "TLS needs both a certificate and a key (--tls-cert and --tls-key)");
  if (c->time_limit_s < 1 || c->time_limit_s > ORCH_TIME_LIMIT_MAX_S)
    return sbx_error_set(err, SBX_EINVAL, "CODE_TIME_LIMIT_S must be 1..%d", ORCH_TIME_LIMIT_MAX_S);
  if (c->data_dir == NULL || *c->data_dir == '\0')
    return sbx_error_set(err, SBX_EINVAL, "no data directory");
  if ((c->llm_url == NULL) != (c->llm_model == NULL))
    return sbx_error_set(err, SBX_EINVAL,
                         "the assistant needs both CEREA_LLM_URL and CEREA_LLM_MODEL (or neither)");
  if (c->page_silent_ms != 0 && c->page_silent_ms <= c->page_heartbeat_ms)
    return sbx_error_set(
        err, SBX_EINVAL, "PAGE_SILENT_MS (%llu) must be longer than PAGE_HEARTBEAT_MS (%llu), or 0",
        (unsigned long long)c->page_silent_ms, (unsigned long long)c->page_heartbeat_ms);
  if (c->node_url && (c->database_url == NULL || *c->database_url == '\0'))
    return sbx_error_set(
        err, SBX_EINVAL,
        "CEREA_NODE_URL: nodes share one PostgreSQL store; set CEREA_DATABASE_URL");
  if (c->node_url && (c->api_key == NULL || *c->api_key == '\0'))
    return sbx_error_set(err, SBX_EINVAL,
                         "CEREA_NODE_URL: every node needs the same CEREA_API_KEY (a generated "
                         "key is one node's own: the others would refuse it)");
  if (c->mcp_fixtures) { /* a test server's only: never one that others reach */
    int local = c->tls_cert == NULL && c->public_url == NULL && c->node_url == NULL;
    for (size_t i = 0; local && i < c->n_listen; i++)
      local = strncmp(c->listen[i], "127.", 4) == 0 || strncmp(c->listen[i], "[::1]:", 6) == 0 ||
              strncmp(c->listen[i], "localhost:", 10) == 0 || strncmp(c->listen[i], "unix:", 5) == 0;
    if (!local)
      return sbx_error_set(err, SBX_EINVAL,
                           "CEREA_MCP_CONFORMANCE_FIXTURES is for a test server: it is refused "
                           "with TLS, CEREA_PUBLIC_URL, CEREA_NODE_URL or a listen address other "
                           "than loopback");
  }
  return 0;
}

/* ---- runtime settings ------------------------------------------------------------------------ */

#define AT(field_) offsetof(struct orch_runtime, field_)
const struct orch_rt_setting orch__rt_settings[ORCH_RT_N_SETTINGS] = {
    {"ARTIFACT_RETENTION_DAYS", "retention_days", 1, 36500, AT(retention_days), 1},
    {"CODE_TIME_LIMIT_S", "time_limit_s", 1, ORCH_TIME_LIMIT_MAX_S, AT(time_limit_s), 1},
    {"CODE_PAUSED_WAIT_MS", "paused_wait_ms", 0, 86400000, AT(paused_wait_ms), 0},
    {"PAGE_GRACE_MS", "page_grace_ms", 0, 86400000, AT(page_grace_ms), 0},
};
#undef AT

void orch__rt_init(struct orch_runtime *rt, const struct orch_config *c) {
  rt->time_limit_s = c->time_limit_s;
  rt->paused_wait_ms = c->paused_wait_ms;
  rt->page_grace_ms = c->page_grace_ms;
  rt->watchdog_grace_ms = c->watchdog_grace_ms;
  rt->cancel_grace_ms = c->cancel_grace_ms;
  rt->retention_days = c->retention_days;
  rt->input_wait_s = c->input_wait_s;
  rt->page_heartbeat_ms = c->page_heartbeat_ms;
  rt->page_silent_ms = c->page_silent_ms;
  rt->output_quota_bytes = c->output_quota_mb * ORCH_MIB;
  rt->attachment_quota_bytes = c->attachment_quota_mb * ORCH_MIB;
  rt->max_attempts = c->max_attempts;
}

int orch__rt_set(struct orch_runtime *rt, const char *key, long long v) {
  for (size_t i = 0; i < ORCH_RT_N_SETTINGS; i++) {
    const struct orch_rt_setting *s = &orch__rt_settings[i];
    if (strcmp(s->key, key) != 0)
      continue;
    if (v < s->lo || v > s->hi)
      return SBX_EINVAL;
    char *slot = (char *)rt + s->offset;
    if (s->is_int)
      *(int *)slot = (int)v;
    else
      *(uint64_t *)slot = (uint64_t)v;
    return 0;
  }
  return SBX_ENOENT;
}

long long orch__rt_get(const struct orch_runtime *rt, const struct orch_rt_setting *s) {
  const char *slot = (const char *)rt + s->offset;
  return s->is_int ? *(const int *)slot : (long long)*(const uint64_t *)slot;
}

/* The runtime settings: the configuration's, then the values an operator stored (admin API).
 * Again when another node said an operator changed them (nodes.c). */
void orch__runtime_load(struct orch *o) {
  orch__rt_init(&o->rt, o->cfg);
  for (size_t i = 0; i < ORCH_RT_N_SETTINGS; i++) {
    const char *key = orch__rt_settings[i].key;
    char *v = NULL;
    if (store_setting_get(o->st, key, &v) == 0 && v != NULL) {
      if (orch__rt_set(&o->rt, key, atoll(v)) != 0)
        sbx_log(SBX_LOG_WARN, "orch", "stored setting %s=%s ignored (out of range)", key, v);
      sbx_free(v);
    }
  }
}

/* ---- the deployment's Python packages ------------------------------------------------------ */

/* The guide's packages this deployment serves ({name, version}) and lacks ({name, reason}), from
 * the served tree's pyodide/deployment.json (written by scripts/sync_pyodide_wheels.mjs; read on
 * each call, it is a few KB, so a re-sync shows without a restart), or null when it is missing.
 * *micropip tells whether micropip is served (PyPI installs need it). */
json_t *orch__packages_json(const struct orch *o, int *micropip) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/pyodide/deployment.json", o->static_dir);
  *micropip = 0;
  json_t *d = json_load_file(path, 0, NULL);
  if (!json_is_object(d)) {
    json_decref(d);
    return json_null();
  }
  json_t *has = json_array(), *lacks = json_array(), *v;
  size_t i;
  json_array_foreach(json_object_get(d, "has"), i, v) {
    const char *name = json_string_value(json_object_get(v, "name"));
    if (name == NULL)
      continue;
    *micropip |= strcmp(name, "micropip") == 0;
    json_array_append_new(has, json_pack("{s:s, s:O}", "name", name, "version",
                                         json_object_get(v, "version") ?: json_null()));
  }
  json_array_foreach(json_object_get(d, "lacks"), i, v) {
    const char *name = json_string_value(json_object_get(v, "name"));
    if (name != NULL)
      json_array_append_new(lacks, json_pack("{s:s, s:O}", "name", name, "reason",
                                             json_object_get(v, "reason") ?: json_null()));
  }
  json_t *j = json_pack("{s:O, s:o, s:o}", "python",
                        json_object_get(json_object_get(d, "pyodide"), "python") ?: json_null(),
                        "has", has, "lacks", lacks);
  json_decref(d);
  return j;
}
