/* config.c -- the orchestrator's settings: defaults, an optional KEY=VALUE config file, the
 * environment, each value validated with an error that names the setting, the value and what is
 * allowed.
 *
 * Precedence (lowest first): defaults, config file (--config or CEREA_CONFIG), environment, command
 * line (main.c calls orch_config_set with the same names).
 *
 * One row a setting (`settings` below: name, kind, range, default, its admin API name when an
 * operator may change it while the server runs, a docs line), as Redis keeps its config table:
 * defaults, parsing, the environment and the runtime list (orch__rt_table) are all read from it.
 * The runtime settings (struct orch_runtime) start from the configuration.  What it does not do: read or write the stored values (server.c reads them at
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

/* ---- the settings, one row each ----------------------------------------------------------- */

/* What a setting holds and how its text is read. */
enum setting_kind {
  SET_NUM,    /* a whole number in [lo, hi]: an int or a uint64_t of the config (size tells) */
  SET_BOOL,   /* true/false, 1/0, yes/no, on/off: an int */
  SET_TEXT,   /* a string the config owns (check: what it must look like) */
  SET_EXEC,   /* browser, server or off */
  SET_LISTEN, /* one more listen address (repeatable) */
};

/* A text setting's check: 0 to take it, 1 to leave the setting as it is (an empty API key: none),
 * else the error (which names the setting). */
typedef int (*setting_check)(const char *v, struct sbx_error *err);

/* One setting: its name (the environment's and the config file's), what it holds and where, its
 * range and default, whether an operator may change it while the server runs (rt: the admin
 * API's name for it, with its field in struct orch_runtime), and the line docs/configuration.md
 * explains at length (tests/unit/orchestrator/test_config.c checks the table there lists it). */
struct setting {
  const char *key;
  enum setting_kind kind;
  size_t offset, size; /* of its field in struct orch_config */
  long long lo, hi, def; /* SET_NUM: range and default; SET_BOOL: default */
  const char *unit, *lo_note; /* SET_NUM: "expected <unit> from <lo><lo_note> to <hi>" */
  const char *text_def;       /* SET_TEXT: default (NULL: unset) */
  setting_check check;        /* SET_TEXT: NULL takes any non-empty text */
  int empty_env_unset;        /* an empty environment variable leaves it as it is */
  const char *rt;             /* runtime setting: its admin API name (NULL: fixed at start) */
  size_t rt_offset, rt_size;  /* its field in struct orch_runtime */
  const char *doc;
};

static int check_node_url(const char *v, struct sbx_error *err) {
  size_t n = strlen(v);
  if ((strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0) || n > 200 ||
      v[n - 1] == '/')
    return sbx_error_set(err, SBX_EINVAL,
                         "CEREA_NODE_URL=%s: expected http://HOST:PORT (how the other nodes "
                         "reach this one; no trailing slash, at most 200 bytes)",
                         v);
  return 0;
}

static int check_public_url(const char *v, struct sbx_error *err) {
  const char *host = strncmp(v, "http://", 7) == 0    ? v + 7
                     : strncmp(v, "https://", 8) == 0 ? v + 8
                                                      : NULL;
  if (host == NULL || *host == '\0' || *host == '/' || strlen(v) > 200 || strchr(host, '/'))
    return sbx_error_set(err, SBX_EINVAL,
                         "CEREA_PUBLIC_URL=%s: expected http://HOST[:PORT] or "
                         "https://HOST[:PORT] (how clients reach this server; no path, at "
                         "most 200 bytes)",
                         v);
  return 0;
}

static int check_llm_url(const char *v, struct sbx_error *err) {
  if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
    return sbx_error_set(err, SBX_EINVAL, /* not echoed: a URL may carry a password */
                         "CEREA_LLM_URL: expected an http:// or https:// base URL, such as "
                         "http://127.0.0.1:8080/v1");
  return 0;
}

static int check_llm_api_key(const char *v, struct sbx_error *err) {
  (void)err;
  return *v == '\0'; /* set but empty: no key */
}

static int check_api_key(const char *v, struct sbx_error *err) {
  if (strlen(v) < 16)
    return sbx_error_set(err, SBX_EINVAL, "CEREA_API_KEY: at least 16 characters");
  return 0;
}

#define FIELD(f) offsetof(struct orch_config, f), sizeof(((struct orch_config *)0)->f)
#define RT(name, f)                                                                                \
  .rt = name, .rt_offset = offsetof(struct orch_runtime, f),                                      \
  .rt_size = sizeof(((struct orch_runtime *)0)->f)
#define NUM(key_, f, lo_, hi_, def_, unit_, lo_note_)                                              \
  .key = key_, .kind = SET_NUM, .offset = offsetof(struct orch_config, f),                         \
  .size = sizeof(((struct orch_config *)0)->f), .lo = lo_, .hi = hi_, .def = def_, .unit = unit_,  \
  .lo_note = lo_note_
#define TEXT(key_, f, def_, check_)                                                                \
  .key = key_, .kind = SET_TEXT, .offset = offsetof(struct orch_config, f),                        \
  .size = sizeof(((struct orch_config *)0)->f), .text_def = def_, .check = check_
#define DAY_MS (24LL * 3600 * 1000)
static const struct setting settings[] = {
    {.key = "CHAT_CODE_EXECUTION", .kind = SET_EXEC, FIELD(exec_mode), .def = ORCH_EXEC_BROWSER,
     .doc = "where code runs: browser, server or off"},
    {NUM("ARTIFACT_RETENTION_DAYS", retention_days, 1, 36500, 30, "whole days", ""),
     RT("retention_days", retention_days), .doc = "how long files are kept"},
    {NUM("CODE_TIME_LIMIT_S", time_limit_s, 1, ORCH_TIME_LIMIT_MAX_S, 60, "whole seconds", ""),
     RT("time_limit_s", time_limit_s), .doc = "a run's time limit"},
    {NUM("CODE_PAUSED_WAIT_MS", paused_wait_ms, 0, DAY_MS, 120000, "milliseconds", ""),
     RT("paused_wait_ms", paused_wait_ms), .doc = "how long a run waits for a visible page"},
    {NUM("PAGE_GRACE_MS", page_grace_ms, 0, DAY_MS, 10000, "milliseconds", ""),
     RT("page_grace_ms", page_grace_ms), .doc = "how long a dropped page may reconnect"},
    {NUM("CODE_WATCHDOG_GRACE_MS", watchdog_grace_ms, 0, DAY_MS, 15000, "milliseconds", ""),
     .doc = "how long past its limit a run's result is waited for"},
    {NUM("CODE_CANCEL_GRACE_MS", cancel_grace_ms, 0, DAY_MS, 5000, "milliseconds", ""),
     .doc = "how long a page has to answer a cancel"},
    {NUM("CODE_INPUT_WAIT_S", input_wait_s, 1, 86400, 300, "whole seconds", ""),
     .doc = "how long input() waits for an answer"},
    {NUM("PAGE_HEARTBEAT_MS", page_heartbeat_ms, 100, 60000, 2000, "milliseconds", ""),
     .doc = "how often a page holding a run shows a sign of life"},
    {NUM("PAGE_SILENT_MS", page_silent_ms, 0, DAY_MS, 6000, "milliseconds", ""),
     .doc = "a page silent this long is paused (0: never)"},
    {NUM("CHAT_OUTPUT_QUOTA_MB", output_quota_mb, 0, 1024 * 1024, 500, "whole MB", " (no quota)"),
     .doc = "output files a chat may keep"},
    {NUM("CHAT_ATTACHMENT_QUOTA_MB", attachment_quota_mb, 0, 1024 * 1024, 500, "whole MB",
         " (no quota)"),
     .doc = "files a chat's users and tools may add"},
    {NUM("CODE_MAX_ATTEMPTS", max_attempts, 0, 100, 3, "whole attempts (0: no bound)", ""),
     .doc = "attempts lost mid-run before a run ends crashed"},
    {.key = "CHAT_PYODIDE_PYPI_DISABLED", .kind = SET_BOOL, FIELD(pypi_disabled), .def = 0,
     .empty_env_unset = 1, .doc = "no pure-Python installs from PyPI"},
    {.key = "CEREA_MCP_CONFORMANCE_FIXTURES", .kind = SET_BOOL, FIELD(mcp_fixtures), .def = 0,
     .doc = "tests only: the MCP conformance suite's fixtures"},
    {.key = "CEREA_LISTEN", .kind = SET_LISTEN, .doc = "a listening address (repeatable)"},
    {TEXT("CEREA_DATA_DIR", data_dir, "./var", NULL), .doc = "the data directory"},
    {TEXT("CEREA_DATABASE_URL", database_url, NULL, NULL), /* checked by store_open_url */
     .doc = "a PostgreSQL store instead of SQLite"},
    {TEXT("CEREA_NODE_URL", node_url, NULL, check_node_url),
     .doc = "how the other nodes reach this one"},
    {TEXT("CEREA_PUBLIC_URL", public_url, NULL, check_public_url),
     .doc = "how clients reach this server"},
    {NUM("CEREA_LEASE_MS", lease_ms, 1000, 600000, 10000, "milliseconds", ""),
     .doc = "how long a chat's lease lasts unrenewed"},
    {TEXT("CEREA_TLS_CERT", tls_cert, NULL, NULL), .doc = "TLS certificate (PEM)"},
    {TEXT("CEREA_TLS_KEY", tls_key, NULL, NULL), .doc = "TLS key (PEM)"},
    {TEXT("CEREA_API_KEY", api_key, NULL, check_api_key), .doc = "the backend's bearer key"},
    {TEXT("CEREA_STATIC_DIR", static_dir, NULL, NULL), .doc = "the generated static tree"},
    {TEXT("CEREA_LLM_URL", llm_url, NULL, check_llm_url), .doc = "the assistant's model API"},
    {TEXT("CEREA_LLM_MODEL", llm_model, NULL, NULL), .doc = "the model's name"},
    {TEXT("CEREA_LLM_API_KEY", llm_api_key, NULL, check_llm_api_key),
     .doc = "the model API's bearer key"},
    {TEXT("CEREA_LLM_CA_FILE", llm_ca_file, NULL, NULL), .doc = "CA certificates for the model"},
    {NUM("CEREA_LLM_MAX_TOOL_CALLS", llm_max_tool_calls, 0, 100, 8, "whole tool calls", ""),
     .doc = "tool calls in one assistant turn"},
    {NUM("CEREA_LLM_MAX_TOKENS", llm_max_tokens, 1, 1000000, 4096, "whole tokens", ""),
     .doc = "tokens the model may answer with"},
    {NUM("CEREA_LLM_TURN_S", llm_turn_s, 1, 86400, 600, "whole seconds", ""),
     .doc = "how long an assistant turn may take"},
    {NUM("CEREA_LLM_STALL_S", llm_stall_s, 1, 3600, 60, "whole seconds", ""),
     .doc = "how long the model may say nothing"},
    {NUM("CEREA_MCP_HANDOFF_S", mcp_handoff_s, 5, 280, 50, "whole seconds", ""),
     .doc = "when a long MCP run_python answers with the run's id"},
    {NUM("CEREA_SESSION_IDLE_S", session_idle_s, 1, 31536000, 7 * 24 * 3600, "whole seconds", ""),
     .doc = "a sign-in session unused this long ends"},
    {NUM("CEREA_SESSION_MAX_S", session_max_s, 1, 31536000, 30 * 24 * 3600, "whole seconds", ""),
     .doc = "a sign-in session ends this long after it began"},
    /* OWASP's minimum for Argon2id: 19 MiB, 2 passes, 1 lane */
    {NUM("CEREA_ARGON2_MEMORY_KIB", argon2_memory_kib, 8, 1048576, 19456, "whole KiB", ""),
     .doc = "memory of a password hash"},
    {NUM("CEREA_ARGON2_ITERATIONS", argon2_iterations, 1, 16, 2, "whole passes", ""),
     .doc = "passes of a password hash"},
};
#undef DAY_MS
#undef TEXT
#undef NUM
#undef RT
#undef FIELD

static const struct setting *setting_find(const char *key) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(settings); i++)
    if (strcmp(settings[i].key, key) == 0)
      return &settings[i];
  return NULL;
}

static void *field_of(void *base, size_t offset) { return (char *)base + offset; }

/* A whole number into an int or a uint64_t field. */
static void put_number(void *slot, size_t size, long long n) {
  if (size == sizeof(uint64_t))
    *(uint64_t *)slot = (uint64_t)n;
  else
    *(int *)slot = (int)n;
}

size_t orch__config_settings(const char **keys, const char **docs, size_t cap) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(settings) && i < cap; i++) {
    keys[i] = settings[i].key;
    if (docs)
      docs[i] = settings[i].doc;
  }
  return SBX_ARRAY_SIZE(settings);
}

int orch_config_defaults(struct orch_config *c) {
  memset(c, 0, sizeof(*c));
  for (size_t i = 0; i < SBX_ARRAY_SIZE(settings); i++) {
    const struct setting *s = &settings[i];
    void *slot = field_of(c, s->offset);
    if (s->kind == SET_NUM || s->kind == SET_BOOL || s->kind == SET_EXEC)
      put_number(slot, s->kind == SET_NUM ? s->size : sizeof(int), s->def);
    else if (s->kind == SET_TEXT && s->text_def && set_str(slot, s->text_def) != 0)
      return SBX_ENOMEM;
  }
  return 0;
}

void orch_config_free(struct orch_config *c) {
  for (size_t i = 0; i < c->n_listen; i++)
    sbx_free(c->listen[i]);
  for (size_t i = 0; i < SBX_ARRAY_SIZE(settings); i++)
    if (settings[i].kind == SET_TEXT)
      sbx_free(*(char **)field_of(c, settings[i].offset));
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

static int set_exec(struct orch_config *c, const char *v, struct sbx_error *err) {
  static const enum orch_exec_mode modes[] = {ORCH_EXEC_BROWSER, ORCH_EXEC_SERVER, ORCH_EXEC_OFF};
  for (size_t i = 0; i < SBX_ARRAY_SIZE(modes); i++)
    if (strcmp(v, orch_exec_mode_name(modes[i])) == 0)
      return c->exec_mode = modes[i], 0;
  return sbx_error_set(err, SBX_EINVAL, "CHAT_CODE_EXECUTION=%s: expected browser, server or off",
                       v);
}

int orch_config_set(struct orch_config *c, const char *key, const char *v, struct sbx_error *err) {
  if (v == NULL)
    return sbx_error_set(err, SBX_EINVAL, "%s: missing value", key);
  const struct setting *s = setting_find(key);
  if (s == NULL)
    return sbx_error_set(err, SBX_ENOENT, "%s: unknown setting", key);
  void *slot = field_of(c, s->offset);
  long long n;
  int rc;
  switch (s->kind) {
  case SET_EXEC:
    return set_exec(c, v, err);
  case SET_LISTEN:
    return add_listen(c, v, err);
  case SET_BOOL:
    if (parse_bool(v, slot) != 0)
      return sbx_error_set(err, SBX_EINVAL, "%s=%s: expected true or false", key, v);
    return 0;
  case SET_NUM:
    if (parse_int(v, s->lo, s->hi, &n) != 0)
      return sbx_error_set(err, SBX_EINVAL, "%s=%s: expected %s from %lld%s to %lld", key, v,
                           s->unit, s->lo, s->lo_note, s->hi);
    put_number(slot, s->size, n);
    return 0;
  case SET_TEXT:
    if (s->check && (rc = s->check(v, err)) != 0)
      return rc == 1 ? 0 : rc;
    if (*v == '\0')
      return sbx_error_set(err, SBX_EINVAL, "%s: empty value", key);
    return set_str(slot, v) == 0 ? 0 : SBX_ENOMEM;
  }
  return SBX_EINVAL;
}

int orch_config_load_env(struct orch_config *c, struct sbx_error *err) {
  for (size_t i = 0; i < SBX_ARRAY_SIZE(settings); i++) {
    const char *v = getenv(settings[i].key);
    if (v == NULL || (settings[i].empty_env_unset && *v == '\0'))
      continue;
    int rc = orch_config_set(c, settings[i].key, v, err);
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

/* The rows of `settings` with an admin API name, in its order, as the admin API reads them. */
const struct orch_rt_setting *orch__rt_table(void) {
  static struct orch_rt_setting rows[ORCH_RT_N_SETTINGS];
  static int built;
  for (size_t i = 0, n = 0; !built && i < SBX_ARRAY_SIZE(settings); i++) {
    const struct setting *s = &settings[i];
    if (s->rt == NULL)
      continue;
    if (n == ORCH_RT_N_SETTINGS) { /* ORCH_RT_N_SETTINGS counts the rows with an rt */
      sbx_log(SBX_LOG_ERROR, "config", "more runtime settings than ORCH_RT_N_SETTINGS");
      abort();
    }
    rows[n++] = (struct orch_rt_setting){.key = s->key, .field = s->rt, .lo = s->lo, .hi = s->hi,
                                         .offset = s->rt_offset,
                                         .is_int = s->rt_size == sizeof(int)};
  }
  built = 1;
  return rows;
}

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
    const struct orch_rt_setting *s = &orch__rt_table()[i];
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
    const char *key = orch__rt_table()[i].key;
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
