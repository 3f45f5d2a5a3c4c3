/* internal.h -- what the orchestrator's own files share (cross-file names are orch__): the domain
 * objects (run, page, turn, chat) with their state machines and the scheduler's steps, what a page
 * reports (report.c), the event log and its listeners, mount manifests, auth, runtime settings,
 * the JSON shapes.  The handlers' helpers are in api.h.  Not for other modules (they use orch.h).
 *
 * Layers: the domain (run.c, page.c, turn.c, chat.c, report.c, events.c, manifest.c) knows nothing
 * of HTTP: it holds no request and calls no handler; who waits for a run's end registers a callback
 * (orch__run_on_end), who hears a chat's events is a listener (orch__chat_listen).  The handlers
 * (api_*.c, with api.h, which the domain never includes) read requests, call the domain and
 * answer.  They are one of the wings, the folders beside this header, each above the next: cli/,
 * http/, hosts/, nodes/, assistant/, tools/.  A wing calls the core and the wings below it, never
 * the other way; where the core must reach a wing, the wing registers a hook (struct orch_leases,
 * orch.run_orphaned).
 *
 * Ownership: struct orch owns every chat (hash map by id, loaded on first use and kept); a chat
 * owns its live runs (queue in creation order), its pages and its event listeners.  A done run is
 * dropped from memory once whoever waited for it was called back; the store keeps it.
 */
#ifndef ORCH_INTERNAL_H
#define ORCH_INTERNAL_H

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "orch.h"
#include "store.h"

struct tp_server;
struct orch_chat;
struct orch_mcp;

#define ORCH_MIB             (1024u * 1024u)
#define ORCH_UPLOAD_MAX      (50u * ORCH_MIB)    /* 413 beyond */
#define ORCH_MOUNT_FILE_MAX  (20ull * ORCH_MIB)  /* stored, not mounted beyond */
#define ORCH_MOUNT_TOTAL_MAX (100ull * ORCH_MIB) /* a file taking the total past it: left out */
#define ORCH_OUT_CHARS       8000
#define ORCH_FILES_LISTED    200
#define ORCH_FIGURES         20
#define ORCH_PAGE_ID_MAX     64
#define ORCH_WAIT_S_MAX      600
#define ORCH_CRED_MAX        512 /* bytes of a credential: longer ones are refused unread */
#define ORCH_DISPLAYS        20              /* display() bundles per run */
#define ORCH_BUNDLE_BYTES    (256u * 1024u)  /* rich parts of one bundle (beside text/plain) */
#define ORCH_SHOWN_BYTES     (1024u * 1024u) /* rich parts of a run's value and displays */
#define ORCH_INPUT_BYTES     (64u * 1024u)   /* an answer to input() */
#define ORCH_CHAT_UPLOADS    8               /* request bodies arriving at once for one chat */
#define ORCH_SSE_EVENT_BYTES (6u * ORCH_MIB) /* the largest event a stream must carry */

/* ---- runs (run.c) ----------------------------------------------------------------------------
 * The diagram and the table of steps are in run.c. */
enum orch_run_state {
  ORCH_RUN_QUEUED = 0,
  ORCH_RUN_DISPATCHED,
  ORCH_RUN_RUNNING,
  ORCH_RUN_WAITING_INPUT, /* Python waits in input() for a person (or a backend) */
  ORCH_RUN_PAUSED,
  ORCH_RUN_FINISHING, /* a result's output files are being stored */
  ORCH_RUN_DONE,
  ORCH_RUN__COUNT
};
enum orch_run_status {
  ORCH_RUN_STATUS_NONE = 0,
  ORCH_RUN_STATUS_OK,
  ORCH_RUN_STATUS_ERROR,
  ORCH_RUN_STATUS_TIMEOUT,
  ORCH_RUN_STATUS_CRASHED,
  ORCH_RUN_STATUS_CANCELLED,
  ORCH_RUN_STATUS_REJECTED,
  ORCH_RUN_STATUS_ABANDONED,
};
enum orch_run_due {
  ORCH_RUN_DUE_NONE = 0,
  ORCH_RUN_DUE_ABANDONED,
  ORCH_RUN_DUE_WATCHDOG,
  ORCH_RUN_DUE_CANCELLED,
  ORCH_RUN_DUE_INPUT_OVER /* no word from the page past the input wait: running again */
};

/* ---- a run's live output and who watches it (live.c) -----------------------------------------
 * What the page sent while its latest attempt runs: the text of each stream (characters are code
 * points, as the page counts them), its display() bundles, the prompt of an input() it waits in;
 * held in memory with the live run (not persisted one by one: the result is).  Every change is an
 * event of the run: `state`, `output`, `display`, `input_request`, and last `end`, numbered by the
 * run (seq 1, 2, ...) for its watchers (the run stream, the MCP server's progress, ...), and the
 * output, display and input_request events also go to the chat's listeners as live events (no
 * seq: not in the chat's durable log). */
enum orch_stream { ORCH_STDOUT = 0, ORCH_STDERR = 1 };
struct orch_held {     /* one stream of the attempt */
  struct sbx_buf text; /* UTF-8, at most ORCH_OUT_CHARS characters */
  size_t chars;
  int cut; /* text past the cap was dropped */
};
struct orch_live_entry;
struct orch_live {
  int attempt; /* the attempt the held output is of (0: none yet) */
  struct orch_held out[2];
  json_t *displays;   /* its display() bundles in index order, as kept (NULL: none) */
  size_t shown_bytes; /* the rich parts they hold, of ORCH_SHOWN_BYTES */
  json_t *notes;      /* what was left out of them, for the run's notes (NULL: nothing) */
  char *prompt;       /* WAITING_INPUT: the prompt of input() */
  int64_t prompt_seq; /* the event that asked it */
  int64_t seq;        /* the run's latest event (the run stream's ids) */
  char state[16];     /* the last `state` told, and of which attempt */
  int state_attempt;
  /* The run's events since its latest attempt was dispatched, for a watcher that resumes: each
   * refers to the held output, which starts again with the attempt. */
  struct orch_live_entry *log;
  size_t n_log, cap_log;
  int64_t first_seq; /* the oldest event the log holds (seq + 1 when empty) */
  struct sbx_list watches;
  int delivering; /* watchers being called: one that leaves is freed after */
};

struct orch_run {
  char id[STORE_ID_LEN + 1];
  enum orch_run_state state;   /* written by run_set_state() only */
  enum orch_run_status status; /* set when DONE */
  int attempts;                /* dispatches so far; the current attempt is `attempts` */
  int timeout_s;
  char page_id[ORCH_PAGE_ID_MAX + 1]; /* page of the current attempt ("" when none) */
  uint64_t state_since_ms;
  uint64_t wait_deadline_ms;     /* PAUSED: abandoned at */
  uint64_t watchdog_deadline_ms; /* DISPATCHED/RUNNING: timeout/crashed at */
  uint64_t cancel_deadline_ms;   /* cancel requested: cancelled at */
  uint64_t input_deadline_ms;    /* WAITING_INPUT: input() taken as over at */
  uint64_t watch_left_ms;        /* WAITING_INPUT: what the watchdog had left */
  uint64_t dispatched_ms;        /* the current attempt's dispatch (page silence counts from it) */
  char last_page_id[ORCH_PAGE_ID_MAX + 1]; /* page of the latest attempt, kept through a pause */
  enum orch_run_state resume_state; /* FINISHING: the state it finishes from (and returns to) */
  char finishing_hash[65]; /* FINISHING: the result's hash (a resend gets the same answer) */
  int lost;                /* started attempts lost with their page (orch__run_lost) */

  /* Server side (chat.c, api_*.c); unused by the pure state machine. */
  struct orch_chat *chat;
  struct sbx_list chat_link; /* in chat->runs, creation order */
  struct sbx_list settles;   /* struct orch_settle: who waits for its end */
  struct sbx_list uploads;   /* struct orch_upload: output files of the current attempt */
  size_t upload_bytes;
  struct store_run rec; /* what is persisted (state/status mirrored on each put) */
  int files_recorded;   /* run files queued with its result (0: none, so the run object
                                  renders `files: []` without reading the store) */
  char *end_text;       /* DONE: the run object as JSON, rendered once for everyone who
                                  waited for the end (orch__run_end_text) */
  size_t end_len;
  struct orch_live live; /* the latest attempt's output, and the run's watchers (live.c) */
};

const char *orch__run_state_name(enum orch_run_state s);
const char *orch__run_status_name(enum orch_run_status s);
int orch__run_status_parse(const char *s, enum orch_run_status *out);
void orch__run_init(struct orch_run *run, const char *id, int timeout_s);
/* Steps.  Each returns 0, SBX_ESTATE when the run is not in a state the step applies to,
 * SBX_ECONFLICT for a stale attempt. */
int orch__run_dispatch(struct orch_run *run, const char *page_id, uint64_t watchdog_grace_ms);
int orch__run_started(struct orch_run *run, int attempt, uint64_t watchdog_grace_ms);
int orch__run_pause(struct orch_run *run, uint64_t wait_ms);
/* The attempt's page was lost without a word (gone past its grace, or attached again without its
 * place): PAUSED (0) for a new attempt, or DONE crashed (1) when the attempt had started and was
 * the max_lost-th started attempt lost so (max_lost 0: no bound).  SBX_ESTATE when the run is not
 * out on a page. */
int orch__run_lost(struct orch_run *run, int max_lost, uint64_t wait_ms);
/* RUNNING -> WAITING_INPUT for the current attempt (SBX_ECONFLICT for another; 0 when it waits
 * already): the watchdog stops, what it had left kept; input() is taken as over past
 * input_wait_ms + watchdog_grace_ms. */
int orch__run_wait_input(struct orch_run *run, int attempt, uint64_t input_wait_ms,
                         uint64_t watchdog_grace_ms);
/* WAITING_INPUT -> RUNNING: the watchdog runs again with the time it had left. */
int orch__run_input_over(struct orch_run *run);
/* 1 in the states where an attempt is out on a page (dispatched, running, waiting for input). */
int orch__run_on_page(const struct orch_run *run);
/* hosts.c: re-arms the pause wait (PAUSED) or the watchdog (DISPATCHED) of a run that waits for
 * server capacity; SBX_ESTATE otherwise. */
int orch__run_hold(struct orch_run *run, uint64_t wait_ms, uint64_t watchdog_grace_ms);
/* A result for `attempt` (dispatched or running, current attempt; else SBX_ECONFLICT): FINISHING
 * while its output files are stored; hash is the result's (a resend is told apart by it). */
int orch__run_take_result(struct orch_run *run, int attempt, const char *hash);
/* FINISHING -> back to the state it finished from (its output files could not be stored). */
int orch__run_result_failed(struct orch_run *run);
int orch__run_finish(struct orch_run *run, enum orch_run_status status);
/* Queued/paused: finished cancelled (0).  Dispatched/running: cancel deadline set,
 * SBX_EINPROGRESS (the page must be told).  Finishing, done: SBX_ESTATE. */
int orch__run_request_cancel(struct orch_run *run, uint64_t grace_ms);
/* Applies a deadline that has passed (finishing the run) and says which. */
enum orch_run_due orch__run_tick(struct orch_run *run);

/* ---- pages (page.c) -------------------------------------------------------------------------- */
enum orch_page_state {
  ORCH_PAGE_NEW = 0, /* only while being attached */
  ORCH_PAGE_VISIBLE,
  ORCH_PAGE_HIDDEN,
  ORCH_PAGE_SILENT, /* held a run and showed no sign of life for PAGE_SILENT_MS: as hidden */
  ORCH_PAGE_GRACE,  /* event stream dropped; the same page id may come back */
  ORCH_PAGE_GONE,
  ORCH_PAGE__COUNT
};
enum orch_kernel_state {
  ORCH_KERNEL_UNKNOWN = 0,
  ORCH_KERNEL_LOADING,
  ORCH_KERNEL_READY,
  ORCH_KERNEL_BUSY,
  ORCH_KERNEL_DEAD
};

struct orch_listener;
struct orch_page {
  char id[ORCH_PAGE_ID_MAX + 1];
  enum orch_page_state state; /* written by page_set_state() only */
  int visible;                /* last presence reported (kept through GRACE) */
  enum orch_kernel_state kernel;
  uint64_t visible_seq;       /* order of becoming visible: the highest is the active page */
  uint64_t grace_deadline_ms; /* GRACE: gone at */
  uint64_t life_ms;           /* its latest sign of life (any page call, its stream attaching) */
  struct orch_chat *chat;
  struct sbx_list chat_link;
  struct orch_listener *events; /* its event stream (api_events.c) while attached; NULL in GRACE */
};
const char *orch__page_state_name(enum orch_page_state s);
const char *orch__kernel_state_name(enum orch_kernel_state k);
int orch__kernel_state_parse(const char *s, enum orch_kernel_state *out);
void orch__page_init(struct orch_page *p, const char *id);
/* Steps: attach (NEW or GRACE -> VISIBLE/HIDDEN), presence, stream dropped, grace over. */
int orch__page_attach(struct orch_page *p, int visible, uint64_t *visible_counter);
int orch__page_presence(struct orch_page *p, int visible, uint64_t *visible_counter);
int orch__page_drop(struct orch_page *p, uint64_t grace_ms);
/* The page said it is going away (a reload, a closed tab, a chat switch): its grace ends now, so
 * the next tick makes it GONE.  From an attached state or GRACE; SBX_ESTATE otherwise. */
int orch__page_leave(struct orch_page *p);
/* GRACE past its deadline -> GONE (1); otherwise 0. */
int orch__page_tick(struct orch_page *p);
/* A sign of life: remembered; a SILENT page is VISIBLE again (1: it changed state), else 0. */
int orch__page_alive(struct orch_page *p, uint64_t *visible_counter);
/* A VISIBLE page that holds a run dispatched at since_ms and showed no sign of life since the later
 * of since_ms and its latest one, for silent_ms (0: never), becomes SILENT (1); otherwise 0. */
int orch__page_check_silent(struct orch_page *p, uint64_t since_ms, uint64_t silent_ms);
int orch__page_can_run(const struct orch_page *p); /* attached and visible */

/* ---- mount manifests (manifest.c) ------------------------------------------------------------ */
struct orch_mount_entry {
  const struct store_file *file; /* borrowed from the input list */
};
struct orch_left_out {
  const struct store_file *file;
  const char *reason; /* static text */
};
struct orch_manifest {
  struct orch_mount_entry *mounts;
  size_t n_mounts;
  struct orch_left_out *left_out;
  size_t n_left_out;
  uint64_t total_bytes;
};
extern const char ORCH_REASON_FILE_CAP[];
extern const char ORCH_REASON_TOTAL_CAP[];
/* files: the latest version of each name, oldest first (store_file_list(.., 0, ..)); code: the
 * run's code (NULL: no code names anything).  The manifest borrows from files. */
int orch__manifest_compute(const struct store_file *files, size_t n, const char *code,
                           struct orch_manifest *out);
void orch__manifest_free(struct orch_manifest *m);
/* Upload-time decision for a new file (or a new version of `name`): NULL when it would be mounted,
 * else the reason it is left out. */
const char *orch__manifest_admit(const struct store_file *files, size_t n, const char *name,
                                 enum store_source src, const char *kind, uint64_t size);
/* 1 when a file is mounted only when the run's code names it (images a run drew or tools saved). */
int orch__manifest_named_only(const struct store_file *f);

/* ---- auth (auth.c) --------------------------------------------------------------------------- */
enum orch_cred {
  ORCH_CRED_NONE = 0,
  ORCH_CRED_BAD,
  ORCH_CRED_API,
  ORCH_CRED_PAGE,
  ORCH_CRED_HOST,
  ORCH_CRED_CHAT,   /* a chat key: only where orch__auth_chat_key was asked (auth.c) */
  ORCH_CRED_SESSION /* a person's session cookie (people.c): their own chats, their settings */
};
struct orch_auth {
  enum orch_cred kind;
  char chat_id[STORE_ID_LEN + 1]; /* ORCH_CRED_PAGE, ORCH_CRED_CHAT: the chat it names */
  char token_hash[65];            /* ORCH_CRED_SESSION: the session's */
  char person_id[STORE_ID_LEN + 1]; /* ORCH_CRED_SESSION: whose */
  int admin;                        /* ORCH_CRED_SESSION: the person is an administrator */
  int cookie;       /* the credential came from the session cookie (a live session or not) */
  int origin_bad;   /* a state-changing cookie call whose Origin is not this server's */
  int expired;      /* a session cookie of a session that ended or expired */
};
/* The value of cookie `name` in a Cookie header (RFC 6265's cookie-string: "a=1; b=2"): 1 and
 * *val and *len (borrowed from header) when there, 0 when not.  The first one of that name counts. */
int orch__cookie_find(const char *header, const char *name, const char **val, size_t *len);
/* A new page token "<chat_id>.<64 hex>" and its sha256 hex. */
int orch__token_new(const char *chat_id, char *token, size_t cap, char hash_out[65]);
/* Classifies the credential of a request: Authorization: Bearer X, or ?token=X when
 * allow_query.  api_key_hash / host_key_hash: sha256 hex of the API key / of the headless hosts'
 * key (NULL or "" when none). */
void orch__auth_read(const char *authorization, const char *query_token, const char *api_key_hash,
                     const char *host_key_hash, struct orch_auth *out);
/* The last credential a connection presented and its sha256 hex (http/api.c keeps one with each
 * connection): the same bytes again are not hashed again.  Only the hash is remembered, never a
 * verdict: every request is still judged against the keys and tokens as they are now. */
struct orch_cred_memo {
  size_t len; /* 0: none yet */
  char cred[ORCH_CRED_MAX + 1];
  char hash[65];
};
/* orch__auth_read, taking the credential's hash from memo when it holds the same credential (and
 * leaving this one's there); memo NULL: hashed every time. */
void orch__auth_read_memo(const char *authorization, const char *query_token,
                          const char *api_key_hash, const char *host_key_hash,
                          struct orch_cred_memo *memo, struct orch_auth *out);
void orch__cred_memo_free(void *memo); /* wipes the credential, then frees */
/* 1 when auth reaches chat (API key, or a page token whose hash matches the chat's). */
int orch__auth_allows(const struct orch_auth *a, const char *chat_id, const char *chat_token_hash);

/* Reads DATA/api_key or creates it (0600) with a fresh key; *generated tells which. */
int orch__api_key_load(const char *data_dir, char **key, int *generated, struct sbx_error *err);
/* Chat keys "mcp.<chat_id>.<64 hex>" (auth.c's header says what they reach). */
#define ORCH_CHAT_SECRET_LEN 32
#define ORCH_CHAT_KEY_LEN    (4 + STORE_ID_LEN + 1 + 64)
/* HMAC-SHA256(secret, "<what>:<text>") as 64 hex: what each credential and MCP session id derived
 * from the secret is made of (what names which one).  SBX_ENOMEM, SBX_EINVAL. */
int orch__secret_mac(const unsigned char secret[ORCH_CHAT_SECRET_LEN], const char *what,
                     const char *text, size_t len, char hex[65]);
/* Chat id's key under secret: SBX_EINVAL for a malformed id or a cap under ORCH_CHAT_KEY_LEN+1. */
int orch__chat_key_make(const unsigned char secret[ORCH_CHAT_SECRET_LEN], const char *chat_id,
                        char *out, size_t cap);
/* A credential orch__auth_read found BAD (same arguments) becomes ORCH_CRED_CHAT, with its chat
 * id, when it is a chat key made under secret; anything else is left as it was. */
void orch__auth_chat_key(struct orch_auth *a, const char *authorization, const char *query_token,
                         const unsigned char secret[ORCH_CHAT_SECRET_LEN]);
/* The same for a loaded chat, whose page link (orch__page_link_token) reaches it too. */
int orch__auth_allows_chat(const struct orch_auth *a, const struct orch_chat *c);
/* The page token a page link carries for chat_id: SBX_EINVAL for a malformed id. */
int orch__page_link_token(const unsigned char secret[ORCH_CHAT_SECRET_LEN], const char *chat_id,
                          char *out, size_t cap);
/* Reads DATA/chat_key_secret, or makes it (0600; 32 random bytes as hex) when it is missing or
 * `rotate` asks for a new one (every chat key made before stops working).  SBX_EIO, SBX_EPERM,
 * SBX_EINVAL (a file that is not 64 hex digits) with detail. */
int orch__chat_secret_load(const char *data_dir, int rotate,
                           unsigned char out[ORCH_CHAT_SECRET_LEN], struct sbx_error *err);

/* ---- people, sessions, passwords (people.c) ------------------------------------------------- */
#define ORCH_PW_HASH_MAX        160 /* an encoded Argon2id hash, NUL included */
#define ORCH_PW_WORKING_MAX     4   /* hashes at once on the thread pool (19 MiB each) */
#define ORCH_NAME_MAX_BYTES     256
#define ORCH_PASSWORD_MAX_BYTES 1024
#define ORCH_PASSWORD_MIN_CHARS 8
#define ORCH_THROTTLE_SLOTS     4096 /* per table (names, addresses): a fixed 4096 x 40 bytes */
#define ORCH_THROTTLE_WAYS      4
#define ORCH_NAME_FREE          5  /* failures of a name before it is locked out */
#define ORCH_ADDR_FREE          20 /* failures from an address before it is locked out */
#define ORCH_LOCK_MAX_S         300
#define ORCH_THROTTLE_FORGET_MS (15u * 60u * 1000u)
#define ORCH_TOUCH_MS           60000
#define ORCH_SESSION_COOKIE     "cerea_session"
struct orch_throttle_slot {
  unsigned char key[16]; /* the first half of the key's sha256 */
  uint32_t fails, inflight;
  uint64_t until_ms, last_ms; /* locked out until; last attempt (mono ms) */
  int used;
};
struct orch_throttle {
  struct orch_throttle_slot slot[ORCH_THROTTLE_SLOTS];
  uint64_t evicted;
};
struct orch_people {
  struct orch_throttle names, addrs;
  char dummy_hash[ORCH_PW_HASH_MAX]; /* what an unknown name is checked against */
  int working;                       /* hashes on the thread pool */
  int closed;                        /* the server closed: freed once working is 0 */
  uint64_t throttled;                /* attempts refused, since start */
  int first_admin_due;               /* nobody at start: the first administrator to make */
  /* the first administrator was stored: its name and one-time password, to print once */
  void (*first_admin_cb)(struct orch *o, const char *name, const char *password);
};
/* Argon2id of pw into out (encoded; cap >= ORCH_PW_HASH_MAX), under cfg's parameters, on the
 * calling thread.  0, SBX_ENOMEM, SBX_EINVAL, SBX_EIO. */
int orch__pw_hash(const struct orch_config *cfg, const char *pw, size_t len, char *out,
                  size_t cap);
/* 1 when pw matches the encoded hash. */
int orch__pw_verify(const char *encoded, const char *pw, size_t len);
/* The same on libuv's thread pool: cb(ud, rc, encoded) on the loop; verify: rc 1 match, 0 not
 * (encoded NULL: checked against the dummy hash, never a match); hash: rc 0 with the encoded
 * hash, or an error.  pw is copied (and wiped after).  SBX_EBUSY: ORCH_PW_WORKING_MAX already run;
 * cb is then not called.  When the server closed before the work ended, drop(ud) instead of cb:
 * it frees what waited (a held request, the first administrator's record), answering nothing.
 * Every caller gives one (a hash outlives a close: sign-in, a password change, the first
 * administrator). */
typedef void (*orch_pw_cb)(void *ud, int rc, const char *encoded);
int orch__pw_start(struct orch *o, int verify, const char *encoded, const char *pw, size_t len,
                   orch_pw_cb cb, void (*drop)(void *ud), void *ud);
/* Hashes and checks on the thread pool now (tests wait on it). */
int orch__pw_working(const struct orch *o);
/* A fresh password of 20 letters and digits (100 bits). */
int orch__pw_generate(char *out, size_t cap);
/* NULL when acceptable, else the reason (the API's invalid_field message).  A name: 1 to 64
 * characters of UTF-8, no control character, no space at either end.  A password: 1 to 1024 bytes
 * of UTF-8 without control characters, and a new one at least 8 characters. */
const char *orch__person_name_check(const char *s, size_t len);
/* 1 when s[0..len) is UTF-8 (control characters allowed). */
int orch__utf8_valid(const char *s, size_t len);
const char *orch__password_check(const char *s, size_t len, int new_one);
/* Before a sign-in's hashing: 0 when it may go on (counted in flight for its name and address),
 * else the seconds to wait (refused, nothing counted).  _end reports its outcome: ok 1 the
 * password matched, 0 it did not, -1 it was not checked after all. */
uint64_t orch__throttle_begin(struct orch_people *pp, const char *name, size_t name_len,
                              const char *addr, uint64_t now_ms);
void orch__throttle_end(struct orch_people *pp, const char *name, size_t name_len,
                        const char *addr, int ok, uint64_t now_ms);
/* The address a peer ("1.2.3.4:5", "[v6]:5") is throttled as: the IPv4 address, an IPv6 /64. */
void orch__throttle_key_addr(const char *peer, char *out, size_t cap);
/* A new session's cookie value (64 hex) and its sha256 hex. */
int orch__session_token_new(char token[65], char hash[65]);
enum orch_session_life {
  ORCH_SESSION_NONE = 0, /* no such session (or not a session's shape) */
  ORCH_SESSION_LIVE,
  ORCH_SESSION_EXPIRED, /* idle or absolute expiry */
  ORCH_SESSION_ENDED    /* signed out, ended by a password change, or its person disabled */
};
enum orch_session_life orch__session_life(const struct store_session *s, int64_t now_ms,
                                          int64_t idle_ms, int64_t max_ms);
/* A session cookie's value: LIVE fills a (ORCH_CRED_SESSION, person, admin, its hash) and notes
 * its use; anything else leaves a alone. */
enum orch_session_life orch__session_check(struct orch *o, const char *token, size_t len,
                                           struct orch_auth *a);
/* A person's settings (their JSON text): PyPI installs on (unset: on). */
int orch__settings_pypi(const char *settings_json);
/* Whether a run of chat c may install from PyPI: not when the operator switched it off, else its
 * owner's setting (a backend's chat: on). */
int orch__chat_pypi(struct orch *o, const struct orch_chat *c);
/* At start, after the store opened: the state (o->people); whether the first administrator is
 * due (nobody in the store).  _first_admin makes it once due and the server serves (a node: once
 * ready, so a node that fails its checks writes nothing): its password hashed on the thread pool,
 * stored, then printed through first_admin_cb.  _close at the server's close. */
int orch__people_start(struct orch *o, struct sbx_error *err);
void orch__people_first_admin(struct orch *o);
void orch__people_close(struct orch *o);

/* ---- turns (turn.c) -------------------------------------------------------------------------- */
enum orch_turn_state {
  ORCH_TURN_OPEN = 0,
  ORCH_TURN_FINISHING,
  ORCH_TURN_FINISHED,
  ORCH_TURN__COUNT
};
struct orch_turn;
/* A finish is done: rc 0 when the turn and its runs are durable (the runs live, t->run_ids in
 * order), else the first write's failure.  t is freed after the call. */
typedef void (*orch_turn_cb)(void *ud, int rc, const struct orch_turn *t);
struct orch_turn {            /* a turn being finished (in struct orch's `turns` until written) */
  struct store_turn rec;      /* as written: finished, with its answer */
  enum orch_turn_state state; /* written by turn_set_state() only */
  struct orch *o;
  struct orch_run **runs; /* its auto runs, until they go live */
  store_id *run_ids;      /* their ids, in order */
  size_t n_runs, pending; /* pending: writes in flight */
  int failed;
  orch_turn_cb cb;
  void *ud;
};
/* Finishes the stored turn st with its answer: each fenced python block becomes an `auto` run of
 * the turn, in order; cb once every write is back.  SBX_ESTATE: finished, or being finished;
 * SBX_ENOENT: its chat cannot be loaded; SBX_ENOMEM: nothing was written (cb not called). */
int orch__turn_finish(struct orch *o, const struct store_turn *st, const char *answer,
                      orch_turn_cb cb, void *ud);
/* The code of each fenced python block of a markdown answer, in order (*out owned). */
int orch__python_blocks(const char *answer, char ***out, size_t *n);
void orch__python_blocks_free(char **v, size_t n);

/* ---- string-keyed hash map (map.c) -----------------------------------------------------------
 * Open addressing; keys are borrowed (they live in the value, e.g. chat->id). */
struct orch_map {
  const char **keys;
  void **vals;
  size_t cap, len, tombs;
};
void orch__map_init(struct orch_map *m);
void orch__map_free(struct orch_map *m);
void *orch__map_get(const struct orch_map *m, const char *key);
int orch__map_put(struct orch_map *m, const char *key, void *val); /* SBX_ENOMEM */
void orch__map_del(struct orch_map *m, const char *key);
/* Iteration: for (size_t i = 0; orch__map_next(m, &i, &k, &v);) */
int orch__map_next(const struct orch_map *m, size_t *i, const char **key, void **val);

/* ---- metrics (metrics.c) ---------------------------------------------------------------------- */
#define ORCH_DUR_BUCKETS      12
#define ORCH_HISTORY_SAMPLES  181  /* 15 minutes of intervals, a sample at each end */
#define ORCH_HISTORY_EVERY_MS 5000
struct orch_metrics {
  uint64_t runs_created, runs_by_status[8], runs_dispatched, attempts_redispatched;
  uint64_t dur_buckets[ORCH_DUR_BUCKETS + 1]; /* cumulative counts filled at render */
  double dur_sum_s;
  uint64_t dur_count;
  uint64_t events_sent, events_replayed, results_accepted, results_refused;
  uint64_t live_events_sent, output_calls, inputs_given;
  uint64_t pages_silent, paused_by_silence;
  uint64_t uploads_refused_busy, output_files_over_quota, uploads_refused_quota;
  uint64_t uploads, upload_bytes;
  uint64_t pauses, restarts;
  /* The last minutes, for the admin page's charts: one sample every ORCH_HISTORY_EVERY_MS of the
   * counters above (cumulative) and of two gauges, in a ring. */
  struct orch_metrics_sample {
    int64_t at_ms; /* wall clock */
    uint64_t ended, buckets[ORCH_DUR_BUCKETS + 1];
    uint32_t pages, runs_live;
  } hist[ORCH_HISTORY_SAMPLES];
  size_t hist_n, hist_next;
};
void orch__metrics_observe_run(struct orch_metrics *m, enum orch_run_status st,
                               int64_t duration_ms);
/* Takes the next history sample (the cron calls it every ORCH_HISTORY_EVERY_MS). */
void orch__metrics_sample(struct orch *o);
/* The history as the admin page draws it: {interval_s, samples: [{at, runs_per_s, p50_s, p95_s,
 * pages, runs_live}]}, oldest first, one per interval between two samples (p50_s/p95_s null for
 * an interval in which no run ended).  New reference. */
json_t *orch__metrics_history_json(const struct orch *o);

/* ---- runtime settings (config.c) ------------------------------------------------------------
 * The settings the server reads while it runs: from the configuration at start; those an operator
 * may change (the table below) then from the store's settings, and from PUT /v1/admin/settings. */
struct orch_runtime {
  int time_limit_s;
  uint64_t paused_wait_ms, page_grace_ms, watchdog_grace_ms, cancel_grace_ms;
  int retention_days;
  int input_wait_s;                           /* CODE_INPUT_WAIT_S */
  uint64_t page_heartbeat_ms, page_silent_ms; /* PAGE_HEARTBEAT_MS, PAGE_SILENT_MS (0: off) */
  uint64_t output_quota_bytes;                /* CHAT_OUTPUT_QUOTA_MB in bytes (0: none) */
  uint64_t attachment_quota_bytes;            /* CHAT_ATTACHMENT_QUOTA_MB in bytes (0: none) */
  int max_attempts; /* CODE_MAX_ATTEMPTS: started attempts lost with their page (0: no bound) */
};
/* One setting an operator may change: its environment name, its admin API field, its range. */
struct orch_rt_setting {
  const char *key;   /* "CODE_TIME_LIMIT_S" */
  const char *field; /* "time_limit_s" */
  long long lo, hi;
  size_t offset; /* of its field in struct orch_runtime */
  int is_int;    /* an int field (else uint64_t) */
};
#define ORCH_RT_N_SETTINGS 4
/* The settings an operator may change while the server runs: rows of config.c's table. */
const struct orch_rt_setting *orch__rt_table(void);
/* Every setting's name and docs line (config.c's table, in its order): the count, filling at most
 * cap of keys[] (and docs[] unless NULL). */
size_t orch__config_settings(const char **keys, const char **docs, size_t cap);
void orch__rt_init(struct orch_runtime *rt, const struct orch_config *cfg);
/* o->rt from the configuration and the operator's stored values. */
void orch__runtime_load(struct orch *o);
/* Sets one of orch__rt_table by key: SBX_ENOENT unknown, SBX_EINVAL out of its range. */
int orch__rt_set(struct orch_runtime *rt, const char *key, long long v);
/* The current value of setting s (one of orch__rt_table). */
long long orch__rt_get(const struct orch_runtime *rt, const struct orch_rt_setting *s);
/* The Python packages the served tree has and lacks ({python, has: [{name, version}], lacks:
 * [{name, reason}]}, new), or JSON null; *micropip: micropip is served. */
json_t *orch__packages_json(const struct orch *o, int *micropip);

/* ---- the server (server.c), chats and the scheduler (chat.c) --------------------------------- */
struct orch_chat {
  char id[STORE_ID_LEN + 1];
  char token_hash[65];
  char owner[STORE_ID_LEN + 1]; /* the person it belongs to; "" a backend's */
  int deleted; /* being deleted, or deleted: not found any more (orch__chat_delete) */
  struct orch *o;
  struct sbx_list runs;      /* live runs (not done), creation order */
  struct sbx_list pages;     /* struct orch_page */
  struct sbx_list listeners; /* struct orch_listener: who receives the chat's events */
  int64_t event_seq;         /* last event seq assigned */
  uint64_t visible_counter;
  uint64_t used_ms;       /* last looked up (mono): idle chats are dropped from memory */
  int events_inflight;    /* appends not yet durable: the chat must stay (its seq counter) */
  int uploads;            /* request bodies arriving for it (ORCH_CHAT_UPLOADS at most) */
  struct orch_asst *asst; /* its conversation turn in progress (assistant.c), or NULL */
  /* The chat's latest files as last read for a dispatch manifest, valid while the store's files
   * generation is still files_gen (owned; freed by orch__chat_free). */
  struct store_file *files;
  size_t n_files;
  uint64_t files_gen;
  int files_kept;
};

struct orch_upload { /* an output file uploaded for the current attempt */
  struct sbx_list link;
  char *name; /* normalized */
  char sha256[65];
  struct store_blob_stage *stage; /* the content (a store stage) until stored; then NULL */
  size_t size;
  int attempt;
  char file_id[STORE_ID_LEN + 1]; /* set once stored */
  int over_quota;                 /* its result would have passed the chat's output quota */
};

struct orch {
  uv_loop_t *loop;
  const struct orch_config *cfg;
  struct store *st;
  struct tp_server *tp;
  char *api_key;
  char api_key_hash[65];
  char host_key[65]; /* the headless hosts' credential (hosts.c sends it; page calls only) */
  char host_key_hash[65];
  unsigned char chat_secret[ORCH_CHAT_SECRET_LEN]; /* chat keys' (auth.c) */
  struct orch_mcp *mcp;                            /* MCP sessions (mcp.h) */
  struct orch_people *people; /* passwords, throttling (people.c) */
  struct orch_llm *llm;  /* the assistant's model connector (assistant.h); NULL: no model */
  struct orch_map asst;  /* turn id -> a conversation turn in progress (assistant.c) */
  char *static_dir;      /* build/www or --static */
  struct orch_map chats; /* id -> struct orch_chat */
  struct orch_map runs;  /* id -> live struct orch_run */
  struct orch_map turns; /* turn id -> a turn being finished (turn.c) */
  uv_timer_t cron;
  struct orch_runtime rt; /* runtime settings (config.c) */
  int64_t run_seq;
  uint64_t pending_upload_bytes;
  struct orch_metrics m;
  struct orch_hosts *hosts; /* server execution mode (hosts.c); NULL otherwise */
  struct orch_nodes *nodes; /* CEREA_NODE_URL: several nodes on one store (nodes.c); or NULL */
  const struct orch_leases *leases; /* the chats' leases, nodes.c's hook (chat.c); or NULL */
  /* assistant/'s hook (chat.c, as a run is reloaded): why a reloaded run must not run again (a
   * tool run of a conversation turn that ended with its server: nobody waits for it), as the
   * message of its `Abandoned` error; NULL when it may run.  NULL: every reloaded run runs. */
  const char *(*run_orphaned)(struct orch *o, const struct store_run *rec);
  int closing;
  orch_closed_cb close_cb;
  void *close_ud;
};

/* chat.c */
/* The server's chats (and their pages), live runs and turns being finished: empty, and all freed
 * (nothing may call back into them any more: the store is closed, the transport gone). */
void orch__chats_init(struct orch *o);
void orch__chats_free(struct orch *o);
/* The chat, loaded from the store on first use.  SBX_ENOENT when there is none, SBX_EREMOTE when
 * another node serves it (o->leases), SBX_EBUSY when its lease cannot be had just now. */
int orch__chat_get(struct orch *o, const char *chat_id, struct orch_chat **out);
/* The chats' leases: a hook the nodes wing (nodes/nodes.c) registers in o->leases when the
 * server is one node of several (CEREA_NODE_URL).  NULL when it is the only one: every chat is
 * its own.  So the core loads and drops chats without calling nodes by name.
 *   take     before a chat is loaded: 0 held (taken now, or already), SBX_EREMOTE another node
 *            holds it, SBX_EBUSY this node does not serve yet, or the store's error;
 *   loaded   a chat just loaded (one taken over brings its unfinished runs);
 *   release  a chat left memory (or could not be loaded after all): its lease goes. */
struct orch_leases {
  int (*take)(struct orch *o, const char *chat_id);
  void (*loaded)(struct orch *o, struct orch_chat *c);
  void (*release)(struct orch *o, const char *chat_id);
};
/* Deletes chat c from the store with everything of it (store_chat_delete); from now on it is
 * not found, and it leaves memory once its pages let go (eviction).  SBX_ESTATE: it has live
 * runs, a conversation turn in progress or an upload arriving (nothing changed).  cb as the
 * store's. */
int orch__chat_delete(struct orch *o, struct orch_chat *c, store_done_cb cb, void *ud);
/* Frees a chat that nothing references any more (with its kept file list). */
void orch__chat_free(struct orch_chat *c);
struct orch_chat *orch__chat_add(struct orch *o, const char *id, const char *token_hash,
                                 int64_t last_seq);
struct orch_page *orch__chat_page(struct orch_chat *c, const char *page_id);
struct orch_page *orch__chat_active_page(struct orch_chat *c);
/* A page's visibility or attachment changed: pause what it ran when it cannot run any more. */
void orch__chat_page_changed(struct orch_chat *c, struct orch_page *p);
/* The page holding run (out on a page) was lost without a word: the run is paused for a new
 * attempt, or, the CODE_MAX_ATTEMPTS-th started attempt lost so, ended crashed and settled.
 * Returns 1 when it ended (run may be freed by then: do not touch it), else 0. */
int orch__chat_run_lost(struct orch_chat *c, struct orch_run *run);
/* A live run: persist its record (fire and forget, logged on failure). */
void orch__run_persist(struct orch *o, struct orch_run *run);
/* Whoever waits for a run's end (api_runs.c's wait_s waiters; the answer to a cancel or a result):
 * cb(ud, o, run, rc, err) runs once, when the run's final state is durable (rc 0) or could not be
 * made so (rc, err).  The run is readable during the call and freed once every cb returned.  (A
 * result's own answer, orch__run_submit_result, is also called when its output files could not be
 * stored: the run goes on, run->state is not DONE.) */
typedef void (*orch_end_cb)(void *ud, struct orch *o, struct orch_run *run, int rc,
                            const struct sbx_error *err);
struct orch_settle;
/* Registers cb; NULL when out of memory.  orch__settle_cancel takes a registration back before
 * its cb ran (a waiter that stops waiting) and frees it. */
struct orch_settle *orch__run_on_end(struct orch_run *run, orch_end_cb cb, void *ud);
void orch__settle_cancel(struct orch_settle *s);
/* Ends a live run (already DONE in the state machine): persists it, and once that is durable calls
 * back whoever waits (orch__run_on_end) and frees the run; pumps its chat. */
void orch__run_settle(struct orch *o, struct orch_run *run);
/* Cancels a run.  Queued or paused: it ends at once (0; cb, when given, hears of it once durable).
 * Dispatched or running: its page is sent `cancel` and the run ends on its answer or after
 * CODE_CANCEL_GRACE_MS (SBX_EINPROGRESS; cb not registered).  SBX_ESTATE when it is finishing or done;
 * SBX_ENOMEM (nothing changed). */
int orch__run_cancel(struct orch *o, struct orch_run *run, orch_end_cb cb, void *ud);
/* A new run of chat c, neither stored nor live: queued, or already done `rejected` when code
 * execution is off.  NULL when out of memory. */
struct orch_run *orch__run_new(struct orch *o, struct orch_chat *c, const char *code,
                               const char *origin, const char *turn_id, int timeout_s,
                               const char *idempotency_key);
/* Makes a new run (orch__run_new; stolen) durable and live.  cb runs once its first put is done:
 * cb(ud, 0, NULL, run) with the live run in its chat's queue, or with the final (rejected) run,
 * freed after cb returns, or with NULL when it already ended and left memory (read it from the
 * store); cb(ud, rc, err, NULL) when it was not stored (SBX_EEXIST: its idempotency key is
 * taken).  Returns an error without calling cb when nothing could be queued (the run freed). */
typedef void (*orch_created_cb)(void *ud, int rc, const struct sbx_error *err,
                                struct orch_run *run);
int orch__run_create(struct orch *o, struct orch_chat *c, struct orch_run *run, orch_created_cb cb,
                     void *ud);
/* A new run already durable goes live: into its chat's queue (pumped).  Returns it, or NULL when
 * it was final (rejected: counted and freed) or could not go live (logged; freed). */
struct orch_run *orch__run_accept(struct orch *o, struct orch_chat *c, struct orch_run *run);
/* A stored unfinished run goes live again at start (queued; its next dispatch a new attempt);
 * takes rec's strings.  0 also for a run whose chat cannot be loaded (it stays in the store). */
int orch__run_reload(struct orch *o, struct store_run *rec);
void orch__run_free(struct orch_run *run);
/* Housekeeping tick: run deadlines, page grace, page silence. */
void orch__chat_tick(struct orch_chat *c);
/* Page p of chat c said it is leaving (its stream already detached from it): it is gone now, and
 * what it ran is paused (re-dispatched at once to another visible page).  Frees p. */
void orch__chat_page_leave(struct orch_chat *c, struct orch_page *p);
/* A sign of life of page p of chat c (NULL: none): a silent page is visible again and its run
 * goes out as a new attempt. */
void orch__page_sign_of_life(struct orch_chat *c, struct orch_page *p);
/* A page call about `attempt` of the run: a sign of life of the page the run's latest attempt went
 * to, when that is the attempt (the page's calls about a run do not name the page). */
void orch__run_sign_of_life(struct orch_run *run, int attempt);
/* The answer to the input() the run waits in: its page is sent `input` {run_id, attempt, page_id,
 * text} (durable) and the run runs again.  SBX_ESTATE when it does not wait; SBX_ENOMEM. */
int orch__run_give_input(struct orch *o, struct orch_run *run, const char *text);
/* A request body starts arriving for chat c (an upload of its files or of a run's output file):
 * SBX_EBUSY when ORCH_CHAT_UPLOADS already arrive; _end when it is in (or the request is gone). */
int orch__chat_upload_begin(struct orch_chat *c);
void orch__chat_upload_end(struct orch_chat *c);
/* Drops chats idle for idle_ms with nothing live (no run, page, stream, event in flight) from
 * memory; they are loaded again from the store on their next use.  Returns how many. */
size_t orch__chats_evict(struct orch *o, uint64_t idle_ms);

/* files.c: a file's Content-Type by the name's extension; *active: it could run script (HTML,
 * SVG: served with a sandbox CSP). */
const char *orch__file_type(const char *name, int *active);
/* files.c: adds a file to chat c (in->name normalized; in->chat_id, mounted and left_out_reason
 * are set here from the mount rules and `size`): the content of stage (stolen, even on failure),
 * or in->data when stage is NULL.  cb as store_file_add's, after the chat's `files` event was
 * queued for a new file.  Returns nonzero (cb not called) when nothing could be queued. */
int orch__file_add(struct orch *o, struct orch_chat *c, struct store_file_in *in,
                   struct store_blob_stage *stage, uint64_t size, store_file_cb cb, void *ud);

/* report.c: what a page reports about its attempt. */
/* `started` for attempt: as orch__run_started; the first report records started_at. */
int orch__run_report_started(struct orch *o, struct orch_run *run, int attempt);
/* One output call of the current attempt (checked by api_page.c; everything borrowed): chunks of
 * its streams, display() bundles by index (each valid: orch__bundle_valid), and whether Python
 * called input() (prompt; NULL: not in this call, which, while the run waits, means input() is
 * over).  A call before `started` counts as one.  SBX_ECONFLICT for a stale attempt; SBX_ENOMEM. */
struct orch_output {
  int attempt;
  const struct orch_chunk *chunks;
  size_t n_chunks;
  const size_t *display_index;
  const json_t *const *displays;
  size_t n_displays;
  const char *prompt;
};
int orch__run_report_output(struct orch *o, struct orch_run *run, const struct orch_output *out);
/* The output file of that name uploaded for the run's current attempt, or NULL. */
struct orch_upload *orch__run_upload(struct orch_run *run, const char *name);
/* Keeps an output file uploaded for `attempt` (its content in *stage, sha256 hex): a new one, or
 * the new content of one uploaded before under that name (normalized; taken, freed on failure).
 * Takes *stage (sets it NULL) on success.  SBX_EFULL: the run has ORCH_FILES_LISTED files;
 * SBX_EBUSY: too many bytes wait for results (200 MiB for the run, 1 GiB in all); SBX_ENOMEM. */
int orch__run_add_upload(struct orch *o, struct orch_run *run, char *name,
                         struct store_blob_stage **stage, const char sha256[65], int attempt,
                         struct orch_upload **out);
/* A page's result, read and checked by api_page.c; everything borrowed for the call. */
struct orch_result {
  int attempt;
  const char *hash;            /* of the canonical body: a resend is told apart from another */
  enum orch_run_status status; /* ok, error, timeout, crashed, cancelled */
  const char *out, *err;       /* NULL: "" (kept to ORCH_OUT_CHARS characters) */
  int out_cut, err_cut, restarted, files_unlisted, figures_dropped;
  const json_t *error, *notes, *remounted; /* NULL or JSON null: none */
  const json_t *value;                     /* NULL: none; a bundle (orch__bundle_valid) */
  const json_t *displays;                  /* NULL: the held ones; an array of valid bundles */
  int out_given, err_given; /* stdout/stderr were in the body (else the held output counts) */
  struct orch_upload *const *files; /* listed, uploaded for this attempt, in order */
  const char *const *kinds;         /* each one's kind: "file" | "figure" */
  size_t n_files;
};
/* Takes the result of the run's current attempt (FINISHING), stores its output files and ends the
 * run with it; cb as orch__run_on_end, or alone with rc != 0 and the run not DONE when an output
 * file was not stored (SBX_ENAME: the store refused its name; everyone else keeps waiting).
 * SBX_ECONFLICT for a stale attempt or a run not running, SBX_ENOMEM: nothing changed and cb is
 * not called. */
int orch__run_submit_result(struct orch *o, struct orch_run *run, const struct orch_result *res,
                            orch_end_cb cb, void *ud);

/* live.c: a run's live output (struct orch_live, with the run) and the run-event API. */
void orch__live_init(struct orch_live *l);
void orch__live_free(struct orch_live *l); /* watches left are freed without a call */
/* The run's latest attempt was dispatched: its held output starts empty. */
void orch__live_begin(struct orch_run *run);
/* run->rec.state (the API's name of its state) or its attempt changed since the last `state`
 * event: one more (chat.c's record mirror calls it); a run no longer waiting for input drops its
 * prompt. */
void orch__live_state(struct orch_run *run);
/* Output chunks of the latest attempt, taken and published (live.c says how). */
struct orch_chunk {
  enum orch_stream stream;
  size_t offset; /* characters of the stream before text */
  const char *text;
  size_t len; /* bytes of UTF-8 */
};
void orch__live_chunks(struct orch_run *run, const struct orch_chunk *c, size_t n);
/* display() bundle `index` (checked by orch__bundle_valid), kept (orch__bundle_keep) and
 * published when it is the next one (0 otherwise: a repeat, a gap, past ORCH_DISPLAYS).
 * SBX_ENOMEM. */
int orch__live_display(struct orch_run *run, size_t index, const json_t *bundle);
size_t orch__live_displays(const struct orch_run *run);
/* input(prompt): held (cut at ORCH_OUT_CHARS characters) and published; _over drops it. */
int orch__live_ask(struct orch_run *run, const char *prompt);
void orch__live_asked_over(struct orch_run *run);
/* What is held: characters of each stream, displays. */
void orch__live_held(const struct orch_run *run, size_t *out, size_t *err, size_t *displays);
/* An ending the orchestrator decided: the run's record keeps the held output (stdout, stderr and
 * their cut flags), displays and notes of its latest attempt. */
void orch__live_keep(struct orch_run *run);
/* The result of `attempt` is taken: what its stdout and stderr (NUL-terminated, as kept) add to
 * the held text of each stream is published as `output` before the end, so a run's `output`
 * events joined are its stdout and stderr (the tail the page's last batch did not carry). */
void orch__live_result(struct orch_run *run, int attempt, const char *out, const char *err);
/* The run's end is settled (rc 0: durable): `end` to every watcher, whose watch is then over. */
void orch__live_end(struct orch *o, struct orch_run *run, int rc);

/* The run-event API, for whoever follows a live run in the process (the run stream, the MCP
 * server's progress notifications).  Events come in seq order, each with its data already as
 * JSON text (what the run stream sends as the SSE data):
 *   STATE          {run_id, attempt, state}               state: the API's name
 *   OUTPUT         {run_id, attempt, stream, text, offset} stream, offset, text/text_len
 *   DISPLAY        {run_id, attempt, index, data}         index, bundle
 *   INPUT_REQUEST  {run_id, attempt, prompt}              text/text_len: the prompt
 *   END            the run object                          run (done), rc (0: durable)
 * Everything is borrowed for the call. */
enum orch_run_ev {
  ORCH_RUN_EV_STATE = 0,
  ORCH_RUN_EV_OUTPUT,
  ORCH_RUN_EV_DISPLAY,
  ORCH_RUN_EV_INPUT_REQUEST,
  ORCH_RUN_EV_END
};
struct orch_run_event {
  enum orch_run_ev kind;
  const char *type; /* "state", "output", "display", "input_request", "end" */
  int64_t seq;      /* the run's event number (a catch-up's snapshot repeats the latest) */
  const char *run_id;
  int attempt;
  const char *state;    /* STATE */
  const char *stream;   /* OUTPUT: "stdout" | "stderr" */
  size_t offset;        /* OUTPUT: characters of the stream before text */
  const char *text;     /* OUTPUT: the chunk; INPUT_REQUEST: the prompt (UTF-8, not terminated) */
  size_t text_len;      /* bytes */
  int index;            /* DISPLAY */
  const json_t *bundle; /* DISPLAY: the MIME bundle as kept */
  struct orch_run *run; /* the run (END: done, freed after the call) */
  int rc;               /* END: 0 when the end is durable */
  const char *data;     /* the event's data, JSON text */
  size_t len;
};
typedef void (*orch_watch_cb)(void *ud, const struct orch_run_event *ev);
struct orch_watch;
/* Follows a live run: cb(ud, ev) for each of its events until `end`, after which the watch is
 * over (freed: do not unwatch it).  Before it returns, cb is called with the catch-up: the events
 * after after_seq when the run's log still holds them all (it holds its latest attempt's), else
 * (after_seq < 0 or past the log) the run as it is now: `state`, its held output as one `output`
 * per stream from offset 0, its displays, a pending input_request, each with the latest seq.
 * NULL when out of memory.  A finished run is no longer live: read it from the store. */
struct orch_watch *orch__run_watch(struct orch_run *run, int64_t after_seq, orch_watch_cb cb,
                                   void *ud);
/* Stops following (safe from any watcher's callback, its own included); not after `end`. */
void orch__run_unwatch(struct orch_watch *w);
/* The held output as events to cb (OUTPUT per stream from offset 0, DISPLAY, INPUT_REQUEST; and
 * first STATE when with_state), each with the latest seq: what a page that attaches is sent. */
void orch__live_snapshot(struct orch_run *run, int with_state, orch_watch_cb cb, void *ud);

/* bundle.c: the MIME bundles of a value or display() (the rules and bounds are in bundle.c). */
/* 0 when b is a bundle; SBX_EINVAL with the reason in why otherwise. */
int orch__bundle_valid(const json_t *b, char *why, size_t cap);
/* The bundle b (valid) as kept: text/plain cut at ORCH_OUT_CHARS; its rich parts only when they
 * fit ORCH_BUNDLE_BYTES and *budget (which they then take from).  What was left out is said in
 * notes (an array; NULL: not said), naming the bundle `what`.  New reference; NULL when out of
 * memory. */
json_t *orch__bundle_keep(const json_t *b, size_t *budget, const char *what, json_t *notes);

/* events.c */
/* One event of a chat's log, as its listeners receive it (borrowed for the call); seq 0: a live
 * event, not in the log (orch__event_publish). */
struct orch_event {
  int64_t seq;
  const char *type;
  const char *data; /* JSON text */
  size_t len;
};
/* Who receives a chat's events (api_events.c: a page's event stream): cb runs for each event once
 * it is durable, in seq order. */
struct orch_listener;
typedef void (*orch_listener_cb)(struct orch_listener *l, const struct orch_event *ev);
struct orch_listener {
  struct sbx_list link; /* in chat->listeners */
  orch_listener_cb cb;
};
void orch__chat_listen(struct orch_chat *c, struct orch_listener *l, orch_listener_cb cb);
void orch__chat_unlisten(struct orch_listener *l); /* safe when not listening */
/* Appends an event to the chat's log (durable) then hands it to every listener of the chat.
 * payload is stolen. */
int orch__event_emit(struct orch_chat *c, const char *type, json_t *payload);
/* Hands a live event (data: JSON text, borrowed) to every listener of the chat at once, with seq
 * 0; nothing is logged. */
void orch__event_publish(struct orch_chat *c, const char *type, const char *data, size_t len);

/* json.c */
/* The run object; its files read from the store when o is given and the run has ended ([]
 * otherwise). */
json_t *orch__run_json(struct orch *o, const struct store_run *rec);
/* The same with its files given (the run's output artifacts, in order: store_run_files). */
json_t *orch__run_json_files(const struct store_run *rec, const struct store_file *files, size_t n);
/* A run that ended: its run object as JSON text, rendered on the first call and kept with the run
 * for the others (every answer waiting for the end gets the same bytes); NULL when out of memory. */
const char *orch__run_end_text(struct orch *o, struct orch_run *run, size_t *len);
/* The `run` event's payload (new reference), its manifest from m (NULL: mounts and left_out []). */
json_t *orch__dispatch_json(const char *run_id, const char *chat_id, const char *page_id,
                            const char *code, const char *origin, int timeout_s, int attempt,
                            const struct orch_manifest *m, int pypi, const struct orch_runtime *rt);
/* The limits a page applies to every run, set in lim: {out_chars, files_listed, figures,
 * file_load_bytes, displays} (the `run` event's and GET /v1/config's). */
void orch__run_limits_set(json_t *lim);
json_t *orch__file_json(const struct store_file *f, int exec_on);
/* The line an assistant reads about a mounted file: "The file is available to code at PATH (its
 * latest version, if it has been edited)." */
void orch__code_note(const char *path, char *buf, size_t cap);
/* The length in bytes (1 to 4) of the character at s, of the len bytes left (> 0) of a UTF-8
 * string jansson made or checked (json_string_value), and its code point in *cp (may be NULL).
 * The one walker of the orchestrator's UTF-8 text. */
size_t orch__utf8_next(const char *s, size_t len, uint32_t *cp);
/* json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) as sbx-allocated text; NULL when j is NULL, holds
 * a string that is not UTF-8, or out of memory. */
char *orch__json_dump(const json_t *j, size_t *len);
/* 1 when s is an id as the store makes them (STORE_ID_LEN lower-case hex digits). */
int orch__valid_id(const char *s);

/* The orchestrator's metrics as Prometheus text, appended to out (SBX_ENOMEM past its limit). */
int orch__metrics_render(struct orch *o, struct sbx_buf *out);

#endif
