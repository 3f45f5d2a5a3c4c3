/* assistant.c -- a chat as a conversation: the turn loop between the user's message, the model
 * (llm.c) and the sandbox (the run_python tool of tools.c: the same definition and result text as
 * the MCP tool), the conversation's messages and their events.
 *
 * A turn: the user's message, the assistant's message (state `streaming`) and an open turn are
 * written; then the model is asked with the system prompt, the chat's earlier conversation (each
 * earlier tool call with its result text) and the new message (its attachments with their
 * "available to code at" line).  Its text streams into the assistant's message (live `message`
 * deltas on the chat stream, batched every ORCH_DELTA_MS or ORCH_DELTA_BYTES), and is kept in the
 * message's row at most every ORCH_KEEP_MS (and once more when the server closes), so an answer
 * cut by a crash keeps what had streamed up to a second before it (marked `interrupted` at the
 * next start).  Its tool calls
 * become tool runs of the turn, one after the other (a run waits while the page is hidden, is
 * restarted and remounted on a timeout: runs do that), each result's text goes back as the `tool`
 * message, and the model is asked again.  Its final answer finishes the turn (turn.c: the
 * answer's python blocks become auto runs, in order) and the message ends `done` with every run
 * it owns.  Bounds: CEREA_LLM_MAX_TOOL_CALLS per turn (past it the calls are answered "not run"
 * and the last request goes without tools, so the model answers; the message says
 * tool_call_limit), CEREA_LLM_MAX_TOKENS per request (llm.c), CEREA_LLM_TURN_S of wall time
 * (turn_time_limit), ORCH_ANSWER_BYTES of text.  A stop ends the request and the turn's live runs
 * and keeps the text so far (`stopped`); a model error, an unreachable or stalled model end it as
 * `error` with the connector's words.  Either way the turn is written finished, so the chat takes
 * the next message.
 *
 *   ask ──▶ STARTING ──written──▶ ASKING ──tool calls──▶ TOOLING ──results in──▶ ASKING ...
 *                                   │                      │
 *                                   ├──final answer──▶ FINISHING ──turn durable──▶ ENDING
 *                                   └──error, stop, time limit (also from TOOLING)──▶ ENDING
 *   ENDING ──its writes back──▶ ENDED (freed);  STARTING ──a write failed──▶ ENDED
 *
 *   from              to         step
 *   (ask)             STARTING   orch__asst_ask, its three writes queued
 *   STARTING          ASKING     on_started, all durable: ask (a stop asked meanwhile: ENDING)
 *   STARTING          ENDED      on_started, a write failed (the ask's answer says so)
 *   ASKING            TOOLING    on_model_end, the answer asks for tools
 *   TOOLING           ASKING     next_call, every call of the round answered
 *   ASKING            FINISHING  on_model_end, the final answer (orch__turn_finish)
 *   FINISHING         ENDING     on_turn_finished
 *   ASKING, TOOLING   ENDING     end_turn: an error, orch__asst_stop, the turn's time limit
 *   ENDING            ENDED      on_end_written, the last write back
 *
 * What it does not do: speak HTTP (api_messages.c answers, llm.c asks the model), or decide
 * anything about runs (a tool run is an ordinary run of the chat; chat.c schedules it).
 */
#include "assistant.h"
#include "mcp.h"

#include <string.h>

#include "fsm.h"

enum asst_state {
  ASST_STARTING = 0,
  ASST_ASKING,
  ASST_TOOLING,
  ASST_FINISHING,
  ASST_ENDING,
  ASST_ENDED,
  ASST__COUNT
};
static const char *const asst_state_names[ASST__COUNT] = {"starting",  "asking", "tooling",
                                                          "finishing", "ending", "ended"};
static const uint32_t from[ASST__COUNT] = {
    [ASST_ASKING] = SBX_FSM_BIT(ASST_STARTING) | SBX_FSM_BIT(ASST_TOOLING),
    [ASST_TOOLING] = SBX_FSM_BIT(ASST_ASKING),
    [ASST_FINISHING] = SBX_FSM_BIT(ASST_ASKING),
    [ASST_ENDING] = SBX_FSM_BIT(ASST_STARTING) | SBX_FSM_BIT(ASST_ASKING) |
                    SBX_FSM_BIT(ASST_TOOLING) | SBX_FSM_BIT(ASST_FINISHING),
    [ASST_ENDED] = SBX_FSM_BIT(ASST_STARTING) | SBX_FSM_BIT(ASST_ENDING),
};

enum ending { END_DONE, END_STOPPED, END_ERROR };

struct orch_asst {
  struct orch *o;
  struct orch_chat *c;   /* kept in memory while c->asst or the turn is ending (chat.c's evict) */
  enum asst_state state; /* written by asst_set_state() only */
  char turn_id[STORE_ID_LEN + 1], user_id[STORE_ID_LEN + 1], msg_id[STORE_ID_LEN + 1];
  int64_t created_at;
  struct sbx_buf text; /* the answer so far (every round's text), at most ORCH_ANSWER_BYTES */
  size_t chars;        /* its characters */
  size_t sent_bytes, sent_chars; /* of it, published as live deltas */
  size_t kept_bytes;             /* of it, written to the message's row */
  int text_cut, round_has_text;
  uv_timer_t *flush, *deadline, *keep; /* freed in their close callbacks */
  json_t *convo;                /* the request's messages */
  json_t *tools;                /* [run_python as an OpenAI function] */
  json_t *rounds; /* each response: {content, calls: [{id, name, arguments, result}]} */
  json_t *run_ids;
  json_t *marks;  /* where its tool runs joined: [{at: characters of text before it, run_id}] */
  int tool_calls; /* run so far */
  int no_tools;   /* the next request goes without tools */
  struct orch_llm_req *req;
  size_t call_i;               /* TOOLING: the call of the last round being answered */
  struct orch_tool_call *tool; /* its run, while it runs */
  json_t *tool_args;           /* what the running call's arguments borrow from */
  json_t *user_text;           /* STARTING: the user's text, for its message event */
  enum ending ending;
  char err_code[32], err_msg[ORCH_LLM_ERROR_CHARS * 4 + 200];
  int stop_asked;
  orch_ask_cb ask_cb;
  void *ask_ud;
  orch_stop_cb stop_cb;
  void *stop_ud;
  int turn_written;    /* turn.c wrote it finished, with its auto runs */
  int pending, failed; /* STARTING, ENDING: writes in flight */
  struct sbx_error fail_err;
};

static const struct sbx_fsm asst_fsm =
    SBX_FSM("orch", "conversation turn", asst_state_names, from, NULL);

#define asst_set_state(t, to) asst_set_state_((t), (to), __FILE__, __LINE__)

/* The one writer of t->state. */
static int asst_set_state_(struct orch_asst *t, enum asst_state to, const char *file, int line) {
  int rc = sbx_fsm_step(&asst_fsm, t->state, to, t->turn_id, file, line);
  if (rc == 0)
    t->state = to;
  return rc;
}

static void on_closed_free(uv_handle_t *h) { sbx_free(h); }

static void asst_free(struct orch_asst *t) {
  if (t->flush)
    uv_close((uv_handle_t *)t->flush, on_closed_free);
  if (t->deadline)
    uv_close((uv_handle_t *)t->deadline, on_closed_free);
  if (t->keep)
    uv_close((uv_handle_t *)t->keep, on_closed_free);
  if (t->c && t->c->asst == t)
    t->c->asst = NULL;
  orch__map_del(&t->o->asst, t->turn_id);
  sbx_buf_free(&t->text);
  json_decref(t->convo);
  json_decref(t->tools);
  json_decref(t->rounds);
  json_decref(t->run_ids);
  json_decref(t->marks);
  json_decref(t->tool_args);
  json_decref(t->user_text);
  sbx_free(t);
}

/* ---- the message as the API shows it --------------------------------------------------------- */

static const char *state_word(enum ending e) {
  return e == END_DONE ? "done" : e == END_STOPPED ? "stopped" : "error";
}

static json_t *error_json(const char *code, const char *msg) {
  return code && code[0] ? json_pack("{s:s, s:s}", "code", code, "message", msg) : json_null();
}

/* The message's parts: its text cut where each tool run joined it ([{type: "text", text},
 * {type: "run", run_id}, ...] in order; empty text left out).  marks: [{at, run_id}] (at: the
 * characters of text before the run), or NULL: the text alone. */
static json_t *parts_json(const char *text, size_t len, const json_t *marks) {
  json_t *parts = json_array();
  size_t pos = 0, chars = 0, i;
  json_t *mk;
  json_array_foreach(marks, i, mk) {
    const char *run_id = json_string_value(json_object_get(mk, "run_id"));
    json_int_t at = json_integer_value(json_object_get(mk, "at"));
    if (run_id == NULL)
      continue;
    size_t start = pos;
    while (pos < len && (json_int_t)chars < at)
      pos += orch__utf8_next(text + pos, len - pos, NULL), chars++;
    if (pos > start)
      json_array_append_new(
          parts, json_pack("{s:s, s:s%}", "type", "text", "text", text + start, pos - start));
    json_array_append_new(parts, json_pack("{s:s, s:s}", "type", "run", "run_id", run_id));
  }
  if (pos < len)
    json_array_append_new(parts,
                          json_pack("{s:s, s:s%}", "type", "text", "text", text + pos, len - pos));
  return parts;
}

/* The assistant's message of t as it is now (state: "streaming" or its ending's). */
static json_t *live_json(struct orch_asst *t, const char *state) {
  json_t *j = json_object();
  json_object_set_new(j, "message_id", json_string(t->msg_id));
  json_object_set_new(j, "chat_id", json_string(t->c->id));
  json_object_set_new(j, "turn_id", json_string(t->turn_id));
  json_object_set_new(j, "role", json_string("assistant"));
  json_object_set_new(j, "text", json_stringn(t->text.data ? t->text.data : "", t->text.len));
  json_object_set_new(j, "state", json_string(state));
  json_object_set_new(j, "error",
                      strcmp(state, "streaming") == 0 ? json_null()
                                                      : error_json(t->err_code, t->err_msg));
  json_object_set_new(j, "run_ids", json_deep_copy(t->run_ids));
  json_object_set_new(j, "parts",
                      parts_json(t->text.data ? t->text.data : "", t->text.len, t->marks));
  json_object_set_new(j, "created_at", json_integer(t->created_at));
  json_object_set_new(j, "updated_at", json_integer(sbx_now_wall_ms()));
  return j;
}

json_t *orch__message_json(struct orch *o, const struct store_message *m) {
  struct orch_asst *t = orch__map_get(&o->asst, m->turn_id);
  if (t && strcmp(m->id, t->msg_id) == 0) /* in progress, or its end being written */
    return live_json(t, t->state < ASST_ENDING ? "streaming" : state_word(t->ending));
  int stale = strcmp(m->state, "streaming") == 0; /* no turn answers it: its server stopped */
  const char *ej = stale ? ORCH_INTERRUPTED_JSON : m->error_json;
  json_t *err = ej ? json_loads(ej, 0, NULL) : NULL;
  json_t *ids = json_loads(m->run_ids_json ? m->run_ids_json : "[]", 0, NULL);
  json_t *marks = m->parts_json ? json_loads(m->parts_json, 0, NULL) : NULL;
  const char *text = m->text ? m->text : "";
  json_t *parts = parts_json(text, strlen(text), marks);
  json_decref(marks);
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:I, s:I}", "message_id", m->id,
                   "chat_id", m->chat_id, "turn_id", m->turn_id, "role", m->role, "text", text,
                   "state", stale ? "error" : m->state, "error", err ? err : json_null(), "run_ids",
                   ids ? ids : json_array(), "parts", parts, "created_at",
                   (json_int_t)m->created_at, "updated_at", (json_int_t)m->updated_at);
}

char *orch__asst_held(struct orch_chat *c, size_t *len) {
  struct orch_asst *t = c->asst;
  if (t == NULL || t->state >= ASST_ENDING)
    return NULL;
  json_t *j = live_json(t, "streaming");
  char *text = orch__json_dump(j, len);
  json_decref(j);
  return text;
}

/* ---- events ---------------------------------------------------------------------------------- */

/* The text not yet published goes out as one live delta. */
static void flush_delta(struct orch_asst *t) {
  if (t->flush)
    uv_timer_stop(t->flush);
  if (t->sent_bytes == t->text.len)
    return;
  json_t *j =
      json_pack("{s:s, s:s, s:s, s:{s:I, s:s%}}", "message_id", t->msg_id, "turn_id", t->turn_id,
                "state", "streaming", "delta", "offset", (json_int_t)t->sent_chars, "text",
                t->text.data + t->sent_bytes, t->text.len - t->sent_bytes);
  size_t len = 0;
  char *data = j ? orch__json_dump(j, &len) : NULL;
  json_decref(j);
  if (data)
    orch__event_publish(t->c, "message", data, len);
  sbx_free(data);
  t->sent_bytes = t->text.len;
  t->sent_chars = t->chars;
}

static void on_flush(uv_timer_t *h) { flush_delta(h->data); }

/* The message as it is now, durable in the chat's log (after the deltas it follows). */
static void emit_message(struct orch_asst *t, json_t *msg) {
  flush_delta(t);
  if (orch__event_emit(t->c, "message", msg) != 0)
    sbx_log(SBX_LOG_WARN, "orch", "turn %s: message event not logged", t->turn_id);
}

/* The message's row as it is now (fire and forget unless cb).  with_calls: its tool calls too
 * (every call's arguments and result, up to megabytes), written once, with the end; a put while
 * it streams (a run joining, the text kept every ORCH_KEEP_MS) leaves them as stored, so a
 * turn's writes do not grow with the square of its calls.  A turn the server stopped mid-way is
 * replayed as its text. */
static int put_message(struct orch_asst *t, const char *state, int with_calls, store_done_cb cb) {
  char *ids = orch__json_dump(t->run_ids, NULL);
  char *calls = with_calls ? orch__json_dump(t->rounds, NULL) : NULL;
  char *marks = orch__json_dump(t->marks, NULL);
  json_t *ej = error_json(t->err_code, t->err_msg);
  char *err = json_is_null(ej) ? NULL : orch__json_dump(ej, NULL);
  json_decref(ej);
  struct store_message m = {.role = "assistant",
                            .text = t->text.data ? t->text.data : "",
                            .error_json = strcmp(state, "streaming") == 0 ? NULL : err,
                            .run_ids_json = ids,
                            .calls_json = calls,
                            .parts_json = marks,
                            .created_at = t->created_at,
                            .updated_at = sbx_now_wall_ms()};
  snprintf(m.id, sizeof m.id, "%s", t->msg_id);
  snprintf(m.chat_id, sizeof m.chat_id, "%s", t->c->id);
  snprintf(m.turn_id, sizeof m.turn_id, "%s", t->turn_id);
  snprintf(m.state, sizeof m.state, "%s", state);
  int rc = ids && (calls || !with_calls) && marks ? store_message_put(t->o->st, &m, cb, t) : SBX_ENOMEM;
  sbx_free(ids);
  sbx_free(calls);
  sbx_free(marks);
  sbx_free(err);
  return rc;
}

static void on_put_logged(int rc, const struct sbx_error *err, void *ud) {
  struct orch_asst *t = ud;
  if (rc != 0)
    sbx_log(SBX_LOG_ERROR, "orch", "turn %s: message not stored: %s", t->turn_id,
            err ? err->msg : sbx_strerror(rc));
}

/* The text streamed so far into the message's row (still `streaming`), when it grew. */
static void keep_text(struct orch_asst *t) {
  if (t->keep)
    uv_timer_stop(t->keep);
  if (t->state >= ASST_ENDING || t->kept_bytes == t->text.len)
    return;
  if (put_message(t, "streaming", 0, on_put_logged) == 0)
    t->kept_bytes = t->text.len;
}

static void on_keep(uv_timer_t *h) { keep_text(h->data); }

/* A run joins the message (its tool runs as they start, its auto runs at the end). */
static void join_run(struct orch_asst *t, const char *run_id) {
  size_t i;
  json_t *v;
  json_array_foreach(t->run_ids, i, v) {
    if (strcmp(json_string_value(v), run_id) == 0)
      return;
  }
  json_array_append_new(t->run_ids, json_string(run_id));
  json_array_append_new(t->marks,
                        json_pack("{s:I, s:s}", "at", (json_int_t)t->chars, "run_id", run_id));
  if (t->state < ASST_ENDING) {
    if (put_message(t, "streaming", 0, on_put_logged) == 0)
      t->kept_bytes = t->text.len;
    emit_message(t, live_json(t, "streaming"));
  }
}

/* ---- the end --------------------------------------------------------------------------------- */

static void on_end_written(int rc, const struct sbx_error *err, void *ud) {
  struct orch_asst *t = ud;
  if (rc != 0 && !t->failed) {
    t->failed = rc;
    sbx_log(SBX_LOG_ERROR, "orch", "turn %s: its end not stored: %s", t->turn_id,
            err ? err->msg : sbx_strerror(rc));
  }
  if (--t->pending > 0)
    return;
  asst_set_state(t, ASST_ENDED);
  if (t->stop_cb)
    t->stop_cb(t->stop_ud, t->failed, t->msg_id);
  asst_free(t);
}

/* Cancels the turn's live runs (its tool runs; auto runs exist only once it finished). */
static void cancel_runs(struct orch_asst *t) {
  struct sbx_list *it, *tmp;
  SBX_LIST_FOREACH_SAFE(it, tmp, &t->c->runs) {
    struct orch_run *run = SBX_CONTAINER_OF(it, struct orch_run, chat_link);
    if (strcmp(run->rec.turn_id, t->turn_id) == 0)
      orch__run_cancel(t->o, run, NULL, NULL);
  }
}

/* The turn ends (ending, and for an error its code and words): what runs stops, the message and
 * (unless it finished through turn.c) the turn are written, the chat takes the next message. */
static void end_turn(struct orch_asst *t, enum ending e, const char *code, const char *msg) {
  if (t->req) {
    orch__llm_cancel(t->req);
    t->req = NULL;
  }
  if (t->tool) {
    orch__tool_abandon(t->tool); /* cancels its run */
    t->tool = NULL;
  }
  if (e != END_DONE)
    cancel_runs(t);
  if (t->deadline)
    uv_timer_stop(t->deadline);
  if (t->keep)
    uv_timer_stop(t->keep); /* the end writes the whole text */
  t->ending = e;
  if (code && code != t->err_code) {
    snprintf(t->err_code, sizeof t->err_code, "%s", code);
    snprintf(t->err_msg, sizeof t->err_msg, "%s", msg);
  }
  int finished = t->turn_written;
  asst_set_state(t, ASST_ENDING);
  if (t->c->asst == t)
    t->c->asst = NULL; /* the next message may come: its writes queue behind these */
  t->pending = 1;
  if (put_message(t, state_word(e), 1, on_end_written) != 0)
    t->pending--;
  if (!finished) {
    struct store_turn st = {.state = STORE_TURN_FINISHED,
                            .answer = t->text.data ? t->text.data : "",
                            .created_at = t->created_at,
                            .finished_at = sbx_now_wall_ms()};
    snprintf(st.id, sizeof st.id, "%s", t->turn_id);
    snprintf(st.chat_id, sizeof st.chat_id, "%s", t->c->id);
    if (store_turn_put(t->o->st, &st, on_end_written, t) == 0)
      t->pending++;
  }
  emit_message(t, live_json(t, state_word(e)));
  if (t->pending == 0) {
    t->pending = 1;
    on_end_written(SBX_ENOMEM, NULL, t);
  }
}

static void on_deadline(uv_timer_t *h) {
  struct orch_asst *t = h->data;
  if (t->state != ASST_ASKING && t->state != ASST_TOOLING)
    return; /* finishing: the answer is complete */
  char msg[160];
  snprintf(msg, sizeof msg, "The turn took longer than %d s (CEREA_LLM_TURN_S) and was ended.",
           t->o->cfg->llm_turn_s);
  end_turn(t, END_ERROR, "turn_time_limit", msg);
}

/* ---- the model ------------------------------------------------------------------------------- */

static void ask_model(struct orch_asst *t);

static void on_model_text(void *ud, const char *p, size_t len) {
  struct orch_asst *t = ud;
  if (t->text_cut)
    return;
  if (!t->round_has_text && t->text.len > 0) /* a new round after tool calls: a paragraph */
    t->text_cut = sbx_buf_append(&t->text, "\n\n", 2) != 0;
  t->round_has_text = 1;
  size_t before = t->text.len;
  if (!t->text_cut && sbx_buf_append(&t->text, p, len) != 0)
    t->text_cut = 1; /* past ORCH_ANSWER_BYTES: the rest is dropped */
  for (size_t i = before; i < t->text.len;)
    i += orch__utf8_next(t->text.data + i, t->text.len - i, NULL), t->chars++;
  if (t->text.len - t->sent_bytes >= ORCH_DELTA_BYTES)
    flush_delta(t);
  else if (!uv_is_active((uv_handle_t *)t->flush))
    uv_timer_start(t->flush, on_flush, ORCH_DELTA_MS, 0);
  if (!uv_is_active((uv_handle_t *)t->keep)) /* one row write a second at most, not per token */
    uv_timer_start(t->keep, on_keep, ORCH_KEEP_MS, 0);
}

static void on_turn_finished(void *ud, int rc, const struct orch_turn *ft) {
  struct orch_asst *t = ud;
  if (rc != 0) {
    end_turn(t, END_ERROR, "storage", "The answer's runs could not be stored.");
    return;
  }
  t->turn_written = 1;
  for (size_t i = 0; i < ft->n_runs; i++)
    json_array_append_new(t->run_ids, json_string(ft->run_ids[i]));
  end_turn(t, END_DONE, NULL, NULL); /* with the tool_call_limit note, when there is one */
}

static void next_call(struct orch_asst *t);

/* A round's assistant message with its tool calls, as the Chat Completions API wants it back
 * (content: a JSON string; calls: [{id, name, arguments}]; both borrowed). */
static json_t *assistant_calls(json_t *content, const json_t *calls) {
  json_t *tcs = json_array();
  size_t i;
  json_t *c;
  json_array_foreach(calls, i, c) {
    json_array_append_new(tcs, json_pack("{s:O, s:s, s:{s:O, s:O}}", "id", json_object_get(c, "id"),
                                         "type", "function", "function", "name",
                                         json_object_get(c, "name"), "arguments",
                                         json_object_get(c, "arguments")));
  }
  return json_pack("{s:s, s:O, s:o}", "role", "assistant", "content",
                   json_string_length(content) ? content : json_null(), "tool_calls", tcs);
}

/* The model's final answer (content, this response's text): the turn finishes with it. */
static void finish(struct orch_asst *t, const char *content) {
  asst_set_state(t, ASST_FINISHING);
  uv_timer_stop(t->deadline);
  struct store_turn st = {.state = STORE_TURN_OPEN, .created_at = t->created_at};
  snprintf(st.id, sizeof st.id, "%s", t->turn_id);
  snprintf(st.chat_id, sizeof st.chat_id, "%s", t->c->id);
  int rc = orch__turn_finish(t->o, &st, content, on_turn_finished, t);
  if (rc != 0)
    end_turn(t, END_ERROR, "storage", "The answer could not be stored.");
}

static void on_model_end(void *ud, enum orch_llm_end e, const struct orch_llm_answer *a,
                         const char *why) {
  struct orch_asst *t = ud;
  t->req = NULL;
  if (e != ORCH_LLM_OK) { /* the connector's words as a sentence */
    char msg[sizeof t->err_msg];
    snprintf(msg, sizeof msg, "%s.", why);
    if (msg[0] >= 'a' && msg[0] <= 'z')
      msg[0] = (char)(msg[0] - 'a' + 'A');
    end_turn(t, END_ERROR, orch__llm_end_code(e), msg);
    return;
  }
  json_t *content = json_stringn(a->content.data ? a->content.data : "", a->content.len);
  json_t *calls = json_array();
  for (size_t i = 0; !t->no_tools && i < a->n_calls; i++) {
    const struct orch_llm_call *c = &a->calls[i];
    json_t *args = json_stringn(c->args.data ? c->args.data : "", c->args.len);
    char id[160];
    if (c->id[0])
      snprintf(id, sizeof id, "%s", c->id);
    else /* some servers give no id: one of ours, so the result still names its call */
      snprintf(id, sizeof id, "call_%s_%zu", t->turn_id, json_array_size(t->rounds) * 100 + i);
    json_array_append_new(calls, json_pack("{s:s, s:s, s:o}", "id", id, "name", c->name,
                                           "arguments", args ? args : json_string("")));
  }
  json_array_append_new(t->rounds, json_pack("{s:O, s:o}", "content", content, "calls", calls));
  t->round_has_text = 0;
  if (json_array_size(calls) == 0) {
    finish(t, json_string_value(content));
    json_decref(content);
    return;
  }
  json_array_append_new(t->convo, assistant_calls(content, calls));
  json_decref(content);
  asst_set_state(t, ASST_TOOLING);
  t->call_i = 0;
  next_call(t);
}

static const struct orch_llm_cbs model_cbs = {on_model_text, on_model_end};

static void ask_model(struct orch_asst *t) {
  t->req = orch__llm_start(t->o->llm, t->convo, t->no_tools ? NULL : t->tools, &model_cbs, t);
  if (t->req == NULL)
    end_turn(t, END_ERROR, "model_error", "The model could not be asked (out of memory).");
}

/* ---- tool calls ------------------------------------------------------------------------------ */

/* The current call's result text goes back to the model; then the next call. */
static void answer_call(struct orch_asst *t, const char *text) {
  json_t *round = json_array_get(t->rounds, json_array_size(t->rounds) - 1);
  json_t *call = json_array_get(json_object_get(round, "calls"), t->call_i);
  size_t n = strlen(text);
  if (n > ORCH_RESULT_TEXT_BYTES) /* cut at a character */
    for (n = ORCH_RESULT_TEXT_BYTES; n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80; n--)
      ;
  json_object_set_new(call, "result", json_stringn(text, n));
  json_array_append_new(t->convo, json_pack("{s:s, s:O, s:s%}", "role", "tool", "tool_call_id",
                                            json_object_get(call, "id"), "content", text, n));
  json_decref(t->tool_args);
  t->tool_args = NULL;
  t->call_i++;
  next_call(t);
}

/* The text items of a tool result (what a model reads), joined. */
static void answer_with_result(struct orch_asst *t, const json_t *result) {
  struct sbx_buf b;
  sbx_buf_init(&b, ORCH_RESULT_TEXT_BYTES + 1);
  size_t i;
  json_t *item;
  json_array_foreach(json_object_get(result, "content"), i, item) {
    const char *s = json_string_value(json_object_get(item, "text"));
    if (s && strcmp(json_string_value(json_object_get(item, "type")) ?: "", "text") == 0)
      sbx_buf_appendf(&b, "%s%s", b.len ? "\n" : "", s);
  }
  const char *run_id =
      json_string_value(json_object_get(json_object_get(result, "structuredContent"), "run_id"));
  if (run_id)
    join_run(t, run_id);
  char *text = sbx_buf_steal(&b, NULL);
  answer_call(t, text && text[0] ? text : "The run ended without output.");
  sbx_free(text);
}

static void on_tool_progress(void *ud, const struct orch_tool_progress *p) {
  struct orch_asst *t = ud;
  if (p->run_id && p->run_id[0])
    join_run(t, p->run_id);
}

static void on_tool_done(void *ud, json_t *result) {
  struct orch_asst *t = ud;
  t->tool = NULL;
  answer_with_result(t, result);
  json_decref(result);
}

static const struct orch_tool_ops tool_ops = {on_tool_progress, on_tool_done};

static void next_call(struct orch_asst *t) {
  json_t *round = json_array_get(t->rounds, json_array_size(t->rounds) - 1);
  json_t *call = json_array_get(json_object_get(round, "calls"), t->call_i);
  if (call == NULL) { /* every call answered: the model again */
    asst_set_state(t, ASST_ASKING);
    ask_model(t);
    return;
  }
  const char *name = json_string_value(json_object_get(call, "name"));
  char why[600];
  if (t->tool_calls >= t->o->cfg->llm_max_tool_calls) {
    t->no_tools = 1;
    snprintf(t->err_code, sizeof t->err_code, "tool_call_limit");
    snprintf(t->err_msg, sizeof t->err_msg,
             "The model asked to run code more than %d times in one turn "
             "(CEREA_LLM_MAX_TOOL_CALLS); it was asked to answer without running more.",
             t->o->cfg->llm_max_tool_calls);
    snprintf(why, sizeof why,
             "Not run: this turn already ran code %d times, the most one turn may. Answer now "
             "with what you have.",
             t->tool_calls);
    answer_call(t, why);
    return;
  }
  if (name == NULL || strcmp(name, orch__tool_name(ORCH_TOOL_RUN_PYTHON)) != 0) {
    snprintf(why, sizeof why, "Unknown tool \"%s\": the one tool here is run_python.",
             name ? name : "");
    answer_call(t, why);
    return;
  }
  json_error_t jerr;
  const char *argtext = json_string_value(json_object_get(call, "arguments"));
  json_t *args = json_loads(argtext && argtext[0] ? argtext : "{}", 0, &jerr);
  struct orch_tool_scope scope;
  snprintf(scope.chat_id, sizeof scope.chat_id, "%s", t->c->id);
  struct orch_tool_args targs;
  if (args == NULL) {
    snprintf(why, sizeof why, "Not run: the arguments are not JSON (%s).", jerr.text);
    answer_call(t, why);
    return;
  }
  if (orch__tool_check(ORCH_TOOL_RUN_PYTHON, args, &scope, t->o->rt.time_limit_s, &targs, why,
                       sizeof why) != 0) {
    json_decref(args);
    char msg[700];
    snprintf(msg, sizeof msg, "Not run: %s", why);
    answer_call(t, msg);
    return;
  }
  targs.turn_id = t->turn_id;
  t->tool_calls++;
  t->tool_args = args;
  json_t *now = NULL;
  int rc = orch__tool_start(t->o, ORCH_TOOL_RUN_PYTHON, &targs, args, "", &tool_ops, t, &t->tool,
                            &now, why, sizeof why);
  if (rc == SBX_EINVAL || rc == SBX_EREMOTE) { /* EREMOTE: the chat moved to another node */
    char msg[700];
    snprintf(msg, sizeof msg, "Not run: %s", why);
    answer_call(t, msg);
  } else if (rc != 0) {
    end_turn(t, END_ERROR, "internal", "The code could not be run (out of memory).");
  } else if (now) {
    answer_with_result(t, now);
    json_decref(now);
  }
}

/* ---- the start ------------------------------------------------------------------------------- */

static void on_started(int rc, const struct sbx_error *err, void *ud) {
  struct orch_asst *t = ud;
  if (rc != 0 && !t->failed) {
    t->failed = rc;
    if (err)
      t->fail_err = *err;
  }
  if (--t->pending > 0)
    return;
  if (t->failed) {
    t->ask_cb(t->ask_ud, t->failed, &t->fail_err, NULL, NULL, NULL);
    asst_set_state(t, ASST_ENDED);
    asst_free(t);
    return;
  }
  t->ask_cb(t->ask_ud, 0, NULL, t->user_id, t->msg_id, t->turn_id);
  json_t *user = json_pack("{s:s, s:s, s:s, s:s, s:O, s:s, s:n, s:[], s:[{s:s, s:O}], s:I, s:I}",
                           "message_id", t->user_id, "chat_id", t->c->id, "turn_id", t->turn_id,
                           "role", "user", "text", t->user_text, "state", "done", "error",
                           "run_ids", "parts", "type", "text", "text", t->user_text, "created_at",
                           (json_int_t)t->created_at, "updated_at", (json_int_t)t->created_at);
  json_decref(t->user_text);
  t->user_text = NULL;
  emit_message(t, user);
  emit_message(t, live_json(t, "streaming"));
  if (t->stop_asked) {
    end_turn(t, END_STOPPED, NULL, "");
    return;
  }
  uv_timer_start(t->deadline, on_deadline, (uint64_t)t->o->cfg->llm_turn_s * 1000, 0);
  asst_set_state(t, ASST_ASKING);
  ask_model(t);
}

/* Who the assistant is and what it may do, and the chat's files as code sees them. */
static void system_prompt(struct orch *o, struct orch_chat *c, struct sbx_buf *b) {
  sbx_buf_appendf(b, "You are the assistant of a chat. You can run Python with the run_python "
                     "tool: it runs in a sandbox in the user's own browser, and you get back what "
                     "it printed, its error and the files it saved. Use it to compute, analyse "
                     "files and make charts or files for the user, then answer from its results. "
                     "Every ```python block of your final answer also runs, in order, below it, "
                     "so put there only code meant to run, and show other code with another "
                     "language tag.");
  struct store_file *files = NULL;
  size_t n = 0;
  if (store_file_list(o->st, c->id, 0, &files, &n) != 0 || n == 0) {
    store_file_list_free(files, n);
    return;
  }
  sbx_buf_appendf(b, "\n\nThe chat's files:");
  for (size_t i = 0; i < n; i++) {
    char path[STORE_NAME_MAX + 32], note[STORE_NAME_MAX + 160];
    if (files[i].mounted && o->cfg->exec_mode != ORCH_EXEC_OFF) {
      snprintf(path, sizeof path, "/mnt/data/%s", files[i].name);
      orch__code_note(path, note, sizeof note);
      sbx_buf_appendf(b, "\n- %s: %s", files[i].name, note);
    } else {
      sbx_buf_appendf(b, "\n- %s: not available to code (%s)", files[i].name,
                      files[i].left_out_reason ? files[i].left_out_reason : "not mounted");
    }
  }
  store_file_list_free(files, n);
}

/* ---- the earlier conversation, within its budget --------------------------------------------
 * What is replayed to the model of the chat's earlier turns (docs/api.md "The assistant"): each
 * tool call's argument strings and each tool result over ORCH_REPLAY_ITEM_CHARS characters keep
 * their first and last ORCH_REPLAY_KEEP_CHARS with a line saying how many were left out between
 * (the arguments stay JSON: the strings inside are shortened); and the earlier messages are
 * taken newest first while their total stays within ORCH_REPLAY_BYTES and ORCH_CONVERSATION_MAX
 * messages (the oldest go first, whole; the replay starts at a user message).  The turn in
 * progress is sent whole: its calls and results are what the model works from. */

static size_t chars_in(const char *s, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; n++)
    i += orch__utf8_next(s + i, len - i, NULL);
  return n;
}

/* Byte offset of the character at index chars of s (len bytes). */
static size_t char_offset(const char *s, size_t len, size_t chars) {
  size_t i = 0;
  while (i < len && chars-- > 0)
    i += orch__utf8_next(s + i, len - i, NULL);
  return i;
}

/* s (len bytes) as replayed: whole, or its two ends around the "left out" line (new string). */
static json_t *replay_text(const char *s, size_t len) {
  size_t n = chars_in(s, len);
  if (n <= ORCH_REPLAY_ITEM_CHARS)
    return json_stringn(s, len);
  size_t head = char_offset(s, len, ORCH_REPLAY_KEEP_CHARS);
  size_t tail = char_offset(s, len, n - ORCH_REPLAY_KEEP_CHARS);
  struct sbx_buf b;
  sbx_buf_init(&b, 16u * ORCH_REPLAY_KEEP_CHARS + 256);
  sbx_buf_appendf(&b, "%.*s\n[… %zu characters left out …]\n%.*s", (int)head, s,
                  n - 2 * ORCH_REPLAY_KEEP_CHARS, (int)(len - tail), s + tail);
  json_t *j = json_stringn(b.data ? b.data : "", b.len);
  sbx_buf_free(&b);
  return j;
}

/* Every string inside j (an object or an array) shortened as replay_text does. */
static void shorten_strings(json_t *j) {
  if (json_is_object(j)) {
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v) {
      if (json_is_string(v))
        json_object_set_new(j, k, replay_text(json_string_value(v), json_string_length(v)));
      else
        shorten_strings(v);
    }
  } else if (json_is_array(j)) {
    size_t i;
    json_t *v;
    json_array_foreach(j, i, v) {
      if (json_is_string(v))
        json_array_set_new(j, i, replay_text(json_string_value(v), json_string_length(v)));
      else
        shorten_strings(v);
    }
  }
}

/* A tool call's arguments (JSON text in a string) as replayed: still JSON, its long strings
 * shortened; arguments that are not JSON, or stay long, shortened as text. */
static json_t *replay_args(const json_t *args) {
  const char *s = json_string_value(args);
  size_t len = json_string_length(args);
  if (s == NULL)
    return json_string("");
  if (len <= ORCH_REPLAY_ITEM_CHARS) /* bytes >= characters */
    return json_stringn(s, len);
  json_t *j = json_loadb(s, len, 0, NULL);
  size_t tl = 0;
  char *text = NULL;
  if (j) {
    shorten_strings(j);
    text = orch__json_dump(j, &tl);
    json_decref(j);
  }
  json_t *out =
      text && tl <= 4u * ORCH_REPLAY_ITEM_CHARS ? json_stringn(text, tl) : replay_text(s, len);
  sbx_free(text);
  return out;
}

/* One earlier message as the model reads it, appended to items: a user message; an answer as
 * its rounds (text, tool calls, their results), shortened. */
static void replay_message(const struct store_message *m, json_t *items) {
  if (strcmp(m->role, "user") == 0) {
    json_array_append_new(items, json_pack("{s:s, s:s}", "role", "user", "content", m->text));
    return;
  }
  json_t *rounds = m->calls_json ? json_loads(m->calls_json, 0, NULL) : NULL;
  size_t r;
  json_t *round;
  json_array_foreach(rounds, r, round) {
    json_t *calls = json_object_get(round, "calls"), *content = json_object_get(round, "content");
    if (json_array_size(calls) == 0) {
      if (json_string_length(content))
        json_array_append_new(items,
                              json_pack("{s:s, s:O}", "role", "assistant", "content", content));
      continue;
    }
    json_t *short_calls = json_array();
    size_t k;
    json_t *call;
    json_array_foreach(calls, k, call) {
      json_array_append_new(short_calls,
                            json_pack("{s:O, s:O, s:o}", "id", json_object_get(call, "id"), "name",
                                      json_object_get(call, "name"), "arguments",
                                      replay_args(json_object_get(call, "arguments"))));
    }
    json_array_append_new(items, assistant_calls(content, short_calls));
    json_decref(short_calls);
    json_array_foreach(calls, k, call) {
      json_t *res = json_object_get(call, "result");
      json_array_append_new(
          items, json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id",
                           json_object_get(call, "id"), "content",
                           json_is_string(res)
                               ? replay_text(json_string_value(res), json_string_length(res))
                               : json_string("Not run: the turn ended before it ran.")));
    }
  }
  if (rounds == NULL && m->text[0]) /* an answer without rounds: its text */
    json_array_append_new(items, json_pack("{s:s, s:s}", "role", "assistant", "content", m->text));
  json_decref(rounds);
}

/* The chat's earlier conversation, as the model reads it, appended to convo (the rule above).
 * Read a page at a time, newest first, so no more of the chat is read than is replayed. */
static int earlier(struct orch *o, struct orch_chat *c, json_t *convo) {
  json_t *kept = json_array(); /* newest first: [{user, items}] */
  store_id before = "";
  size_t bytes = 0, count = 0;
  int full = 0, more = 0, rc = 0;
  do {
    struct store_message *v = NULL;
    size_t n = 0;
    rc = store_message_page(o->st, c->id, before[0] ? before : NULL, NULL, ORCH_REPLAY_PAGE, 1, &v,
                            &n, &more);
    if (rc != 0)
      break;
    for (size_t i = n; i-- > 0 && !full;) {
      json_t *items = json_array();
      replay_message(&v[i], items);
      size_t len = 0;
      char *text = orch__json_dump(items, &len);
      sbx_free(text);
      if (count == ORCH_CONVERSATION_MAX || bytes + len > ORCH_REPLAY_BYTES) {
        json_decref(items);
        full = 1;
        break;
      }
      bytes += len;
      count++;
      json_array_append_new(
          kept, json_pack("{s:b, s:o}", "user", strcmp(v[i].role, "user") == 0, "items", items));
    }
    if (n)
      snprintf(before, sizeof before, "%s", v[0].id);
    store_message_list_free(v, n);
  } while (more && !full);
  /* the oldest kept is a user message: an answer whose question was left out goes too */
  while (json_array_size(kept) &&
         !json_is_true(json_object_get(json_array_get(kept, json_array_size(kept) - 1), "user")))
    json_array_remove(kept, json_array_size(kept) - 1);
  for (size_t i = json_array_size(kept); rc == 0 && i-- > 0;)
    json_array_extend(convo, json_object_get(json_array_get(kept, i), "items"));
  json_decref(kept);
  return rc;
}

/* The user's message as the model reads it: its text, then each attachment and where code
 * finds it. */
static json_t *user_content(struct orch *o, const struct orch_ask *ask) {
  struct sbx_buf b;
  sbx_buf_init(&b, 4u * ORCH_MIB);
  sbx_buf_appendf(&b, "%s", ask->text);
  for (size_t i = 0; i < ask->n_files; i++) {
    const struct store_file *f = &ask->files[i];
    char path[STORE_NAME_MAX + 32], note[STORE_NAME_MAX + 160];
    if (f->mounted && o->cfg->exec_mode != ORCH_EXEC_OFF) {
      snprintf(path, sizeof path, "/mnt/data/%s", f->name);
      orch__code_note(path, note, sizeof note);
      sbx_buf_appendf(&b, "\n\nAttached: %s. %s", f->name, note);
    } else {
      sbx_buf_appendf(&b, "\n\nAttached: %s (not available to code: %s).", f->name,
                      f->left_out_reason ? f->left_out_reason : "not mounted");
    }
  }
  json_t *j = json_stringn(b.data ? b.data : "", b.len);
  sbx_buf_free(&b);
  return j;
}

/* The run_python tool as an OpenAI function, exactly as GET /v1/tools lists it for this chat. */
static json_t *run_python_tool(struct orch *o, struct orch_chat *c) {
  struct orch_tool_env env;
  json_t *keep = NULL;
  orch__tool_env(o, &env, &keep);
  env.offered = ORCH_TOOL_BIT(ORCH_TOOL_RUN_PYTHON); /* its words name no tool it lacks */
  struct orch_tool_scope scope;
  snprintf(scope.chat_id, sizeof scope.chat_id, "%s", c->id);
  json_t *all = orch__tools_json(&env, &scope, ORCH_TOOLS_OPENAI), *out = json_array();
  json_decref(keep);
  size_t i;
  json_t *fn;
  json_array_foreach(all, i, fn) {
    const char *name = json_string_value(json_object_get(json_object_get(fn, "function"), "name"));
    if (name && strcmp(name, orch__tool_name(ORCH_TOOL_RUN_PYTHON)) == 0)
      json_array_append(out, fn);
  }
  json_decref(all);
  return out;
}

static int put_start(struct orch_asst *t, const struct orch_ask *ask) {
  struct store_turn st = {.state = STORE_TURN_OPEN, .created_at = t->created_at};
  snprintf(st.id, sizeof st.id, "%s", t->turn_id);
  snprintf(st.chat_id, sizeof st.chat_id, "%s", t->c->id);
  struct store_message u = {.role = "user",
                            .state = "done",
                            .text = (char *)ask->text,
                            .created_at = t->created_at,
                            .updated_at = t->created_at};
  snprintf(u.id, sizeof u.id, "%s", t->user_id);
  snprintf(u.chat_id, sizeof u.chat_id, "%s", t->c->id);
  snprintf(u.turn_id, sizeof u.turn_id, "%s", t->turn_id);
  if (store_turn_put(t->o->st, &st, on_started, t) != 0)
    return SBX_ENOMEM;
  t->pending++;
  if (store_message_put(t->o->st, &u, on_started, t) == 0)
    t->pending++;
  else
    t->failed = SBX_ENOMEM;
  if (put_message(t, "streaming", 0, on_started) == 0)
    t->pending++;
  else
    t->failed = SBX_ENOMEM;
  return 0;
}

int orch__asst_ask(struct orch *o, struct orch_chat *c, const struct orch_ask *ask, orch_ask_cb cb,
                   void *ud) {
  if (o->llm == NULL)
    return SBX_ENOENT;
  if (c->asst != NULL)
    return SBX_EBUSY;
  struct orch_asst *t = sbx_calloc(1, sizeof *t);
  if (t == NULL)
    return SBX_ENOMEM;
  t->o = o;
  t->c = c;
  t->state = ASST_STARTING;
  t->ask_cb = cb;
  t->ask_ud = ud;
  t->created_at = sbx_now_wall_ms();
  sbx_buf_init(&t->text, ORCH_ANSWER_BYTES);
  store_new_id(t->turn_id);
  store_new_id(t->user_id);
  store_new_id(t->msg_id);
  t->rounds = json_array();
  t->run_ids = json_array();
  t->marks = json_array();
  t->convo = json_array();
  t->tools = run_python_tool(o, c);
  t->user_text = json_string(ask->text);
  t->flush = sbx_malloc(sizeof *t->flush);
  t->deadline = sbx_malloc(sizeof *t->deadline);
  t->keep = sbx_malloc(sizeof *t->keep);
  struct sbx_buf sys;
  sbx_buf_init(&sys, 4u * ORCH_MIB);
  system_prompt(o, c, &sys);
  json_t *user = user_content(o, ask);
  int rc = SBX_ENOMEM;
  if (t->rounds && t->run_ids && t->convo && t->tools && t->user_text && t->flush && t->deadline &&
      t->keep && user &&
      json_array_append_new(t->convo, json_pack("{s:s, s:s%}", "role", "system", "content",
                                                sys.data ? sys.data : "", sys.len)) == 0 &&
      (rc = earlier(o, c, t->convo)) == 0 &&
      json_array_append_new(t->convo, json_pack("{s:s, s:O}", "role", "user", "content", user)) ==
          0 &&
      orch__map_put(&o->asst, t->turn_id, t) == 0) {
    uv_timer_init(o->loop, t->flush);
    uv_timer_init(o->loop, t->deadline);
    uv_timer_init(o->loop, t->keep);
    t->flush->data = t->deadline->data = t->keep->data = t;
    rc = put_start(t, ask);
  } else {
    sbx_free(t->flush);
    sbx_free(t->deadline);
    sbx_free(t->keep);
    t->flush = t->deadline = t->keep = NULL;
    if (rc == 0)
      rc = SBX_ENOMEM;
  }
  sbx_buf_free(&sys);
  json_decref(user);
  if (rc != 0 && t->pending == 0) {
    orch__map_del(&o->asst, t->turn_id);
    asst_set_state(t, ASST_ENDED);
    asst_free(t);
    return rc;
  }
  c->asst = t;
  return 0;
}

int orch__asst_stop(struct orch *o, const char *turn_id, orch_stop_cb cb, void *ud) {
  struct orch_asst *t = orch__map_get(&o->asst, turn_id);
  if (t == NULL || t->state >= ASST_ENDING)
    return SBX_ENOENT;
  if (t->state == ASST_FINISHING)
    return SBX_ESTATE;
  t->stop_cb = cb;
  t->stop_ud = ud;
  if (t->state == ASST_STARTING)
    t->stop_asked = 1; /* ended once its start is durable */
  else
    end_turn(t, END_STOPPED, NULL, "");
  return 0;
}

void orch__asst_close_all(struct orch *o) {
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&o->asst, &i, &k, &v)) {
    struct orch_asst *t = v;
    if (t->req)
      orch__llm_cancel(t->req);
    if (t->tool)
      orch__tool_abandon(t->tool);
    t->req = NULL;
    t->tool = NULL;
    if (t->deadline)
      uv_timer_stop(t->deadline);
    if (t->flush)
      uv_timer_stop(t->flush);
    keep_text(t); /* what streamed until now, for the next start to show as cut */
  }
}

void orch__asst_free_all(struct orch *o) {
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&o->asst, &i, &k, &v)) {
    struct orch_asst *t = v;
    orch__map_del(&o->asst, t->turn_id); /* a tombstone: the iteration goes on */
    if (t->state != ASST_ENDED)
      asst_set_state(t, t->state == ASST_STARTING ? ASST_ENDED : ASST_ENDING);
    asst_free(t);
  }
}

const char *orch__asst_run_orphaned(struct orch *o, const struct store_run *rec) {
  if (rec->origin == NULL || strcmp(rec->origin, "tool") != 0 || !rec->turn_id[0] ||
      orch__map_get(&o->asst, rec->turn_id) != NULL)
    return NULL;
  return store_message_turn_answered(o->st, rec->chat_id, rec->turn_id) == 1
             ? ORCH_ORPHANED_RUN_MSG
             : NULL;
}

/* Answers that were streaming when the server stopped: error `interrupted`, their turns finished
 * (the chat takes the next message). */
void orch__on_interrupted(int rc, const struct sbx_error *err, void *ud) {
  (void)ud;
  if (rc != 0)
    sbx_log(SBX_LOG_ERROR, "orch", "answers left streaming not marked: %s",
            err ? err->msg : sbx_strerror(rc));
}
