/* tools.h -- the tools an assistant calls (tools.c), whoever carries the call (MCP, the plain
 * HTTP POST /v1/tools/call, the assistant): their definitions, their arguments, the result text
 * written for a model, and carrying a call out in the domain.  MCP (mcp.h) and the assistant build
 * on it; it knows neither.
 *
 * Internal to the orchestrator, like internal.h (which it includes).
 *
 * Ownership: a tool call (struct orch_tool_call) belongs to tools.c from its start until its
 * result is handed over (ops->done) or its caller abandons it.  It never calls back from inside
 * the function that started it.
 */
#ifndef ORCH_TOOLS_H
#define ORCH_TOOLS_H

#include "../internal.h"

enum orch_tool {
  ORCH_TOOL_RUN_PYTHON = 0,
  ORCH_TOOL_LIST_FILES,
  ORCH_TOOL_ADD_FILE,
  ORCH_TOOL_WAIT_FOR_RUN, /* a run an earlier call handed back still going */
  ORCH_TOOL_CANCEL_RUN,
  ORCH_TOOL__COUNT
};

#define ORCH_TOOL_FILE_MAX   (8u * ORCH_MIB) /* add_file content, decoded */
#define ORCH_TOOL_CODE_MAX   (1u * ORCH_MIB) /* run_python code */
#define ORCH_TOOL_IMAGE_MAX  (4u * ORCH_MIB) /* an image shown in a result; larger: a link */
#define ORCH_TOOL_IMAGES_MAX (8u * ORCH_MIB) /* all images of one result */

/* Who calls: every chat (the API key) or one chat (a chat key). */
struct orch_tool_scope {
  char chat_id[STORE_ID_LEN + 1]; /* "" : every chat */
};

/* What the tool descriptions tell the model, read from the deployment for each listing. */
struct orch_tool_env {
  enum orch_exec_mode exec_mode;
  int time_limit_s;
  uint64_t paused_wait_ms;
  int input_wait_s;       /* how long input() waits for an answer (0: not said) */
  int pypi;               /* pure-Python installs from PyPI are available */
  const char *python;     /* "3.14.2", or NULL when unknown */
  int handoff_s;          /* CEREA_MCP_HANDOFF_S: a call past it hands back the run's id */
  unsigned offered;       /* the tools the caller is offered (ORCH_TOOL_BIT), so the words name
                             no other; 0: every tool (MCP, /v1/tools) */
  const json_t *packages; /* borrowed: [{name, version}] served packages that load by themselves
                             on import, or NULL when the deployment does not say */
};
/* The deployment's facts (tools.c reads o->rt, o->cfg and the served package list); *keep holds
 * what env borrows: json_decref it after use. */
void orch__tool_env(struct orch *o, struct orch_tool_env *env, json_t **keep);

#define ORCH_TOOL_BIT(t) (1u << (t))

enum orch_tool_style { ORCH_TOOLS_MCP, ORCH_TOOLS_OPENAI };
/* Every tool offered (env->offered; new reference): MCP tool objects {name, title, description, inputSchema,
 * annotations}, or OpenAI function definitions {type: "function", function: {name, description,
 * parameters}}, with the same words and schemas.  A chat key's scope leaves chat_id out. */
json_t *orch__tools_json(const struct orch_tool_env *env, const struct orch_tool_scope *scope,
                         enum orch_tool_style style);
/* The tool of that name, or -1. */
int orch__tool_find(const char *name);
const char *orch__tool_name(enum orch_tool t);

/* A call's arguments as checked (strings borrowed from the arguments object). */
struct orch_tool_args {
  const char *chat_id; /* the argument, or the scope's chat */
  const char *code;
  int timeout_s; /* 0: the time limit */
  const char *name, *text, *base64;
  const char *run_id; /* wait_for_run, cancel_run */
  int wait_s;         /* wait_for_run: -1 when not given (the most, handoff_s) */
  /* wait_for_run, cancel_run: the run's chat, found by orch__tool_start (chat_id then points
   * here; the chat another node serves when it answers SBX_EREMOTE) */
  char run_chat[STORE_ID_LEN + 1];
  const char *turn_id; /* run_python: the turn its run belongs to (NULL: none; not an argument) */
  /* How the caller waits (not arguments; 0: not at all): with a progress callback, the state
   * again after keepalive_ms without a report (a keepalive); and past handoff_ms the call
   * answers that the run is still going (its id, the tools that wait for it) and lets it run. */
  uint64_t keepalive_ms, handoff_ms;
  /* With a progress callback: the call answers "still going" as soon as the run waits in input()
   * (a multi-round client asks its user and calls again with the answer). */
  int handoff_on_input;
};
/* Checks a tool's arguments against its schema and the caller's scope: 0, or SBX_EINVAL with the
 * reason in why (worded for the model: "code: required, a string of Python source").  args NULL
 * counts as {}. */
int orch__tool_check(enum orch_tool t, const json_t *args, const struct orch_tool_scope *scope,
                     int time_limit_s, struct orch_tool_args *out, char *why, size_t cap);

/* The input() a live run of this node waits in: 1 with its prompt (cut to cap, maybe inside a
 * character) and a key naming this one question ("input-<attempt>-<event>", so an answer to an
 * earlier one is told apart); 0 when it waits in none here. */
#define ORCH_TOOL_INPUT_KEY 48
int orch__tool_input_asked(struct orch *o, const char *run_id, char *prompt, size_t cap,
                           char key[ORCH_TOOL_INPUT_KEY]);

/* A result the model reads: {content: [{type: "text", text}], isError} (new reference). */
json_t *orch__tool_error_result(const char *text);

/* One output file of a run, as its result shows it. */
struct orch_tool_file {
  const json_t *file;          /* the run object's files[i] (borrowed) */
  int mounted;                 /* later runs get it at /mnt/data/<name> */
  int named_only;              /* ... only when their code names it (an image a run drew) */
  const char *left_out_reason; /* not mounted: why */
  const char *image_type;      /* shown as an image: "image/png", ...; NULL: a link */
  const unsigned char *image;  /* its bytes (borrowed) */
  size_t image_len;
  const char *not_shown; /* an image not shown (why), or NULL */
};
/* A run's result for a model (new reference): {content: [text, images, resource links],
 * structuredContent: the run object, isError: status != ok}.  base_url ("http://host:port")
 * makes the links' URIs (<base_url>/v1/files/<artifact_id>). */
json_t *orch__tool_run_result(const json_t *run, const struct orch_tool_file *files, size_t n,
                              const char *base_url);
/* The text part alone (sbx-owned). */
char *orch__tool_run_text(const json_t *run, const struct orch_tool_file *files, size_t n);

/* What a call in progress reports (borrowed for the callback): the run's state when it changes,
 * and its live output as it arrives (live.c's run events, the same the run stream sends). */
enum orch_tool_progress_kind {
  ORCH_TOOL_PROGRESS_STATE = 0, /* state and message */
  ORCH_TOOL_PROGRESS_OUTPUT,    /* a chunk of stdout or stderr: stream, offset, text */
  ORCH_TOOL_PROGRESS_DISPLAY,   /* a display() bundle: index, text (its text/plain) */
  ORCH_TOOL_PROGRESS_INPUT      /* input() asks: text (the prompt) */
};
struct orch_tool_progress {
  const char *run_id;
  /* queued, waiting_for_page, paused (the page is in the background or silent), starting,
   * running, waiting_input; for live output the state it arrived in */
  const char *state;
  int attempt;
  const char *message; /* what happened, in words (for output: the text itself, stderr marked) */
  /* (the four above are what a state change reports; what follows came with live output) */
  enum orch_tool_progress_kind kind; /* STATE (0) unless set */
  const char *stream;                /* OUTPUT: "stdout" | "stderr" */
  size_t offset;                     /* OUTPUT: characters of the stream before text */
  const char *text; /* OUTPUT, DISPLAY, INPUT (UTF-8, text_len bytes, not terminated) */
  size_t text_len;
  int index;           /* DISPLAY: 0-based */
  int keepalive;       /* STATE: sent because nothing was reported for the keepalive interval */
  uint64_t elapsed_ms; /* STATE, keepalive: since the call began */
};
struct orch_tool_call;
struct orch_tool_ops {
  /* May be NULL.  Each change of the run's state, and each piece of its live output (from the
   * run's events: nothing is polled; the first one comes as the run goes live, with its state
   * then).  It must not abandon the call from inside (a client found gone is reported later, as
   * the transport's close callback). */
  void (*progress)(void *ud, const struct orch_tool_progress *p);
  /* The result (a CallToolResult, stolen); the call is freed after it returns. */
  void (*done)(void *ud, json_t *result);
};
/* Carries out a checked call (args from orch__tool_check, borrowed from args_json, which the call
 * keeps a reference to).  0 and *now set: the result at once (stolen; *out NULL).  0 and *out
 * set: it goes on and ops->done follows (never from inside this call), unless the caller calls
 * orch__tool_abandon first.  SBX_EINVAL: a bad argument found only now (no such chat), the
 * reason in why.  SBX_EREMOTE: another node serves the chat (nodes.c), nothing started: the call
 * is that node's to carry out.  SBX_ENOMEM. */
int orch__tool_start(struct orch *o, enum orch_tool t, struct orch_tool_args *args,
                     json_t *args_json, const char *base_url, const struct orch_tool_ops *ops,
                     void *ud, struct orch_tool_call **out, json_t **now, char *why, size_t cap);
/* The caller stops waiting: a run the call started is cancelled (unless the server is closing,
 * when it stays for the next start); no callback follows. */
void orch__tool_abandon(struct orch_tool_call *tc);

#endif
