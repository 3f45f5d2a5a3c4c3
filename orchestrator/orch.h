/* orch.h -- the one public header of the orchestrator module: its settings and the server object
 * main.c starts and stops.
 *
 * What it is for: main.c (and integration harnesses) build a struct orch_config from defaults, a
 * config file, the environment and the command line, then run one struct orch on a libuv loop.
 * What it is not: the domain model (chats, pages, runs) is internal (internal.h); nothing here
 * knows of HTTP details.
 *
 * Errors: 0 or a negative SBX_* code with detail in struct sbx_error.
 */
#ifndef ORCH_H
#define ORCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "common.h"

/* ---- settings (config.c) --------------------------------------------------------------------- */
enum orch_exec_mode { ORCH_EXEC_BROWSER = 0, ORCH_EXEC_SERVER, ORCH_EXEC_OFF };
const char *orch_exec_mode_name(enum orch_exec_mode m);

#define ORCH_MAX_LISTEN       8
#define ORCH_TIME_LIMIT_MAX_S 300

struct orch_config {
  enum orch_exec_mode exec_mode; /* CHAT_CODE_EXECUTION: browser (default) | server | off */
  int time_limit_s;              /* CODE_TIME_LIMIT_S: 1..300, default 60 */
  uint64_t paused_wait_ms;       /* CODE_PAUSED_WAIT_MS: default 120000 */
  uint64_t page_grace_ms;        /* PAGE_GRACE_MS: default 10000 */
  uint64_t watchdog_grace_ms;    /* CODE_WATCHDOG_GRACE_MS: beyond the time limit, default 15000 */
  uint64_t cancel_grace_ms;      /* CODE_CANCEL_GRACE_MS: a cancelled running run, default 5000 */
  int pypi_disabled;             /* CHAT_PYODIDE_PYPI_DISABLED: true|false, default false */
  int retention_days;            /* ARTIFACT_RETENTION_DAYS: 1..36500, default 30 */
  int input_wait_s;              /* CODE_INPUT_WAIT_S: input() waits, 1..86400, default 300 */
  uint64_t page_heartbeat_ms;    /* PAGE_HEARTBEAT_MS: a page's sign of life, default 2000 */
  uint64_t page_silent_ms;       /* PAGE_SILENT_MS: silent this long: as hidden, default 6000
                                    (0: never) */
  uint64_t output_quota_mb;      /* CHAT_OUTPUT_QUOTA_MB: stored output per chat, default 500
                                    (0: none) */
  uint64_t attachment_quota_mb;  /* CHAT_ATTACHMENT_QUOTA_MB: files users add per chat, default
                                    500 (0: none) */
  int max_attempts;              /* CODE_MAX_ATTEMPTS: started attempts lost with their page or
                                    host before the run ends crashed, 0..100, default 3 (0: none) */
  char *listen[ORCH_MAX_LISTEN]; /* CEREA_LISTEN / --listen (repeatable); default 127.0.0.1:8080 */
  size_t n_listen;
  char *data_dir;           /* CEREA_DATA_DIR / --data; default ./var */
  char *database_url;       /* CEREA_DATABASE_URL: postgresql://...; NULL: SQLite in data_dir */
  char *node_url;           /* CEREA_NODE_URL: this node's URL for the others; NULL: no nodes */
  char *public_url;         /* CEREA_PUBLIC_URL: http(s)://HOST[:PORT] clients use; NULL: none */
  uint64_t lease_ms;        /* CEREA_LEASE_MS: a chat's lease, 1000..600000, default 10000 */
  char *tls_cert, *tls_key; /* CEREA_TLS_CERT / CEREA_TLS_KEY / --tls-cert / --tls-key */
  char *api_key;            /* CEREA_API_KEY; NULL: read or generated in the data dir */
  char *static_dir;         /* CEREA_STATIC_DIR / --static; NULL: build/www found upward */
  /* The assistant's model (an OpenAI-compatible Chat Completions API); off without url and model. */
  char *llm_url;          /* CEREA_LLM_URL: base URL, http:// or https:// ("<url>/chat/completions") */
  char *llm_model;        /* CEREA_LLM_MODEL */
  char *llm_api_key;      /* CEREA_LLM_API_KEY: sent as a bearer token; never logged or shown */
  char *llm_ca_file;      /* CEREA_LLM_CA_FILE: CA bundle for the model's TLS; NULL: the system's */
  int llm_max_tool_calls; /* CEREA_LLM_MAX_TOOL_CALLS: per turn, 0..100, default 8 */
  int llm_max_tokens;     /* CEREA_LLM_MAX_TOKENS: max_tokens of each request, default 4096 */
  int llm_turn_s;         /* CEREA_LLM_TURN_S: a turn's wall time, default 600 */
  int llm_stall_s;        /* CEREA_LLM_STALL_S: no byte from the model this long ends it, 60 */
  int mcp_handoff_s;      /* CEREA_MCP_HANDOFF_S: an MCP call without progress answers with the
                             run's id past this, 5..280, default 50 */
  int mcp_fixtures;       /* CEREA_MCP_CONFORMANCE_FIXTURES: the MCP conformance suite's fixture
                             tools, resources and prompts beside ours (tests only; refused with
                             production settings) */
  /* People's sessions and passwords (people.c). */
  int session_idle_s;     /* CEREA_SESSION_IDLE_S: unused this long, a session ends; 604800 */
  int session_max_s;      /* CEREA_SESSION_MAX_S: a session ends this long after sign-in,
                             whatever its use; 2592000 */
  int argon2_memory_kib;  /* CEREA_ARGON2_MEMORY_KIB: Argon2id's memory, default 19456 */
  int argon2_iterations;  /* CEREA_ARGON2_ITERATIONS: Argon2id's passes, default 2 */
};

/* Defaults for every field (no allocation besides the default strings). */
int orch_config_defaults(struct orch_config *c);
void orch_config_free(struct orch_config *c);
/* Sets one setting by its environment name ("CODE_TIME_LIMIT_S") after validating it.
 * SBX_EINVAL with a message naming the setting, the value and what is allowed;
 * SBX_ENOENT for an unknown name. */
int orch_config_set(struct orch_config *c, const char *key, const char *value,
                    struct sbx_error *err);
/* Reads KEY=VALUE lines ('#' comments, blank lines, optional quotes).  Errors name the line. */
int orch_config_load_file(struct orch_config *c, const char *path, struct sbx_error *err);
/* Applies every known setting present in the environment. */
int orch_config_load_env(struct orch_config *c, struct sbx_error *err);
/* Cross-field checks (TLS cert and key both or neither). */
int orch_config_validate(const struct orch_config *c, struct sbx_error *err);

/* ---- the server ------------------------------------------------------------------------------ */
struct orch;

/* Opens the store in cfg->data_dir, loads or generates the API key (printing a generated one
 * once on stderr), reloads unfinished runs, creates the HTTP server with every route and static
 * mount, and listens on every cfg->listen address.  cfg is borrowed for the life of the orch.
 * Errors: SBX_EPERM/SBX_EIO (data dir), SBX_EADDRINUSE (port in use), SBX_ENOENT (static tree
 * missing), SBX_ETLS, SBX_EDB, with a one-line message in err. */
int orch_new(uv_loop_t *loop, const struct orch_config *cfg, struct orch **out,
             struct sbx_error *err);
/* The first TCP listener's port (tests listen on port 0). */
int orch_port(const struct orch *o);
/* Stops listening, drains, closes the store; cb runs when every handle is closed and o is freed. */
typedef void (*orch_closed_cb)(void *ud);
void orch_close(struct orch *o, orch_closed_cb cb, void *ud);

/* ---- API clients (cli.c) --------------------------------------------------------------------- */
int orch_cli_status(int argc, char **argv); /* exit code */
int orch_cli_run(int argc, char **argv);
int orch_cli_user(int argc, char **argv); /* `user add NAME [--admin]`: exit code */
int orch_cli_backup(int argc, char **argv);  /* cli_backup.c; exit code */
int orch_cli_restore(int argc, char **argv); /* cli_backup.c; exit code */
void orch_cli_usage(FILE *f); /* both commands' usage, every flag */

#endif
