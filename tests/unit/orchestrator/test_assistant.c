/* test_assistant.c -- the conversation turn (assistant.c) with a real store in a temporary
 * directory, the real model connector (llm.c on transport/http_client) talking HTTP to a TEST
 * DOUBLE of the model (a scripted OpenAI-compatible server in a thread on 127.0.0.1: no model
 * runs here), and no HTTP API: a plain answer, a tool call (code execution off, so its run ends
 * rejected at once) whose result text reaches the model, the tool-call limit (the last request
 * goes without tools), a model error, a stop mid-stream, one turn at a time, no model.  What the
 * pages would hear is recorded by a listener of the chat; what is durable is read back. */
#include "assistant.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the model double ------------------------------------------------------------------------ */

#define MAX_STEPS 4
static struct {
  int lfd, port, n_steps, served;
  const char *steps[MAX_STEPS]; /* the whole HTTP response of each request; "HOLD": stall */
  char bodies[MAX_STEPS][16384];
  pthread_t th;
} md;

#define SSE_HEAD     "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
#define CHUNK(delta) "data: {\"choices\":[{\"delta\":" delta "}]}\n\n"
#define FINISH(why)                                                                                \
  "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"" why "\"}]}\n\ndata: [DONE]\n\n"
#define TOOL_CALL(id)                                                                              \
  SSE_HEAD CHUNK("{\"tool_calls\":[{\"index\":0,\"id\":\"" id "\",\"type\":\"function\","          \
                 "\"function\":{\"name\":\"run_python\",\"arguments\":\"{\\\"code\\\": \"}}]}")    \
      CHUNK("{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"print(1)\\\"}\"}}]}") \
          FINISH("tool_calls")
#define TEXT(t) SSE_HEAD CHUNK("{\"content\":\"" t "\"}") FINISH("stop")

static void *md_main(void *arg) {
  (void)arg;
  for (int i = 0; i < md.n_steps; i++) {
    int fd = accept(md.lfd, NULL, NULL);
    if (fd < 0)
      return NULL;
    char buf[16384];
    size_t len = 0, want = 0;
    for (;;) {
      ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
      if (n <= 0)
        break;
      len += (size_t)n;
      buf[len] = 0;
      char *end = strstr(buf, "\r\n\r\n");
      if (end && !want) {
        char *cl = strcasestr(buf, "content-length:");
        want = (size_t)(end + 4 - buf) + (cl ? (size_t)atoi(cl + 15) : 0);
      }
      if (want && len >= want)
        break;
    }
    char *body = strstr(buf, "\r\n\r\n");
    snprintf(md.bodies[i], sizeof md.bodies[i], "%s", body ? body + 4 : "");
    md.served = i + 1;
    if (strcmp(md.steps[i], "HOLD") == 0) {
      const char *s = SSE_HEAD CHUNK("{\"content\":\"partial \"}");
      ssize_t w = send(fd, s, strlen(s), MSG_NOSIGNAL);
      (void)w;
      char c;
      ssize_t r = recv(fd, &c, 1, 0); /* until the orchestrator hangs up */
      (void)r;
    } else {
      ssize_t w = send(fd, md.steps[i], strlen(md.steps[i]), MSG_NOSIGNAL);
      (void)w;
    }
    close(fd);
  }
  return NULL;
}

static void md_start(int n, const char *const *steps) {
  memset(&md, 0, sizeof md);
  md.n_steps = n;
  for (int i = 0; i < n; i++)
    md.steps[i] = steps[i];
  md.lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  ck_assert_int_eq(bind(md.lfd, (struct sockaddr *)&a, sizeof a), 0);
  ck_assert_int_eq(listen(md.lfd, 4), 0);
  socklen_t al = sizeof a;
  getsockname(md.lfd, (struct sockaddr *)&a, &al);
  md.port = ntohs(a.sin_port);
  ck_assert_int_eq(pthread_create(&md.th, NULL, md_main, NULL), 0);
}

/* ---- the orchestrator's world: a server object with a store and the connector, no API -------- */

#define MAX_EVENTS 128
static struct {
  uv_loop_t loop;
  char dir[64];
  struct orch_config cfg;
  struct orch *o;
  struct orch_chat *chat;
  struct orch_listener l;
  size_t n;
  int64_t seq[MAX_EVENTS];
  json_t *data[MAX_EVENTS];
  int asked, ask_rc, stopped;
  char msg_id[64], turn_id[64];
} w;

static void on_event(struct orch_listener *l, const struct orch_event *ev) {
  (void)l;
  if (strcmp(ev->type, "message") != 0)
    return;
  ck_assert_uint_lt(w.n, MAX_EVENTS);
  w.seq[w.n] = ev->seq;
  w.data[w.n] = json_loadb(ev->data, ev->len, 0, NULL);
  ck_assert_ptr_nonnull(w.data[w.n]);
  w.n++;
}

static void on_stored(int rc, const struct sbx_error *err, void *ud) {
  (void)err;
  *(int *)ud = rc == 0 ? 1 : -1;
}

static void setup_with(enum orch_exec_mode mode, int max_calls, int with_model) {
  sbx_log_set_level(SBX_LOG_ERROR);
  memset(&w, 0, sizeof w);
  snprintf(w.dir, sizeof w.dir, "/tmp/orch-asst-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(w.dir));
  ck_assert_int_eq(uv_loop_init(&w.loop), 0);
  ck_assert_int_eq(orch_config_defaults(&w.cfg), 0);
  w.cfg.exec_mode = mode;
  w.cfg.llm_max_tool_calls = max_calls;
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/v1", md.port);
  struct sbx_error err;
  if (with_model) {
    ck_assert_int_eq(orch_config_set(&w.cfg, "CEREA_LLM_URL", url, &err), 0);
    ck_assert_int_eq(orch_config_set(&w.cfg, "CEREA_LLM_MODEL", "double", &err), 0);
    ck_assert_int_eq(orch_config_set(&w.cfg, "CEREA_LLM_API_KEY", "sk-test", &err), 0);
  }
  struct orch *o = w.o = sbx_calloc(1, sizeof *o);
  o->loop = &w.loop;
  o->cfg = &w.cfg;
  orch__chats_init(o);
  orch__rt_init(&o->rt, &w.cfg);
  o->run_seq = 1;
  ck_assert_int_eq(store_open(&w.loop, w.dir, &o->st, &err), 0);
  ck_assert_int_eq(orch__llm_new(&w.loop, &w.cfg, &o->llm, &err), 0);
  struct store_chat sc = {.created_at = 1};
  store_new_id(sc.id);
  memset(sc.token_hash, 'a', 64);
  int stored = 0;
  ck_assert_int_eq(store_chat_create(o->st, &sc, on_stored, &stored), 0);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(stored, 1);
  ck_assert_int_eq(orch__chat_get(o, sc.id, &w.chat), 0);
  orch__chat_listen(w.chat, &w.l, on_event);
}

static void teardown(void) {
  struct orch *o = w.o;
  o->closing = 1;
  orch__asst_close_all(o);
  orch__llm_free(o->llm);
  store_close(o->st);
  orch__asst_free_all(o);
  uv_run(&w.loop, UV_RUN_DEFAULT);
  orch__chats_free(o);
  ck_assert_int_eq(uv_loop_close(&w.loop), 0);
  for (size_t e = 0; e < w.n; e++)
    json_decref(w.data[e]);
  sbx_free(o);
  orch_config_free(&w.cfg);
  pthread_join(md.th, NULL);
  close(md.lfd);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", w.dir);
  ck_assert_int_eq(system(cmd), 0);
}

static void on_asked(void *ud, int rc, const struct sbx_error *err, const char *mid,
                     const char *aid, const char *tid) {
  (void)ud;
  (void)err;
  w.asked = 1;
  w.ask_rc = rc;
  if (rc == 0) {
    ck_assert_str_ne(mid, aid); /* the posted message, then the answer */
    snprintf(w.msg_id, sizeof w.msg_id, "%s", aid);
    snprintf(w.turn_id, sizeof w.turn_id, "%s", tid);
  }
}

static void ask(const char *text) {
  struct orch_ask a = {.text = text};
  ck_assert_int_eq(orch__asst_ask(w.o, w.chat, &a, on_asked, NULL), 0);
  ck_assert_int_eq(w.asked, 0); /* never from inside the call */
}

/* The assistant's last durable message event in a final state, or NULL. */
static json_t *final_event(void) {
  for (size_t i = w.n; i-- > 0;) {
    const char *role = json_string_value(json_object_get(w.data[i], "role"));
    const char *st = json_string_value(json_object_get(w.data[i], "state"));
    if (w.seq[i] > 0 && role && strcmp(role, "assistant") == 0 && strcmp(st, "streaming") != 0)
      return w.data[i];
  }
  return NULL;
}

/* Runs the loop until the answer ended (10 s at most). */
static json_t *wait_end(void) {
  uint64_t t0 = sbx_now_mono_ms();
  while (final_event() == NULL && sbx_now_mono_ms() - t0 < 10000)
    uv_run(&w.loop, UV_RUN_ONCE);
  json_t *e = final_event();
  ck_assert_ptr_nonnull(e);
  uv_run(&w.loop, UV_RUN_NOWAIT); /* its writes back */
  return e;
}

static const char *str(const json_t *j, const char *k) {
  return json_string_value(json_object_get(j, k));
}

/* ---- tests ----------------------------------------------------------------------------------- */

START_TEST(plain_answer) {
  static const char *const steps[] = {TEXT("Hi there.")};
  md_start(1, steps);
  setup_with(ORCH_EXEC_BROWSER, 8, 1);
  ask("hello");
  json_t *fin = wait_end();
  ck_assert_int_eq(w.ask_rc, 0);
  ck_assert_str_eq(str(fin, "state"), "done");
  ck_assert_str_eq(str(fin, "text"), "Hi there.");
  ck_assert_ptr_eq(w.chat->asst, NULL);
  /* the events: user (durable) before the assistant's streaming one (durable), a delta (live:
   * published at once, so it may come before the durable ones are), the end last */
  ck_assert_uint_eq(w.n, 4);
  size_t user = 9, created = 9, delta_at = 9;
  for (size_t i = 0; i < w.n; i++) {
    if (w.seq[i] == 0)
      delta_at = i;
    else if (strcmp(str(w.data[i], "role"), "user") == 0)
      user = i;
    else if (strcmp(str(w.data[i], "state"), "streaming") == 0)
      created = i;
  }
  ck_assert_uint_lt(user, created);
  ck_assert_uint_lt(delta_at, 3);
  ck_assert_ptr_eq(w.data[3], fin);
  json_t *delta = json_object_get(w.data[delta_at], "delta");
  ck_assert_int_eq(json_integer_value(json_object_get(delta, "offset")), 0);
  ck_assert_str_eq(str(delta, "text"), "Hi there.");
  /* stored: both messages, the turn finished with the answer */
  struct store_message *v = NULL;
  size_t n = 0;
  ck_assert_int_eq(store_message_list(w.o->st, w.chat->id, 10, &v, &n), 0);
  ck_assert_uint_eq(n, 2);
  ck_assert_str_eq(v[0].text, "hello");
  ck_assert_str_eq(v[1].state, "done");
  ck_assert_str_eq(v[1].text, "Hi there.");
  store_message_list_free(v, n);
  struct store_turn t;
  ck_assert_int_eq(store_turn_get(w.o->st, w.turn_id, &t), 0);
  ck_assert_int_eq(t.state, STORE_TURN_FINISHED);
  ck_assert_str_eq(t.answer, "Hi there.");
  store_turn_free(&t);
  /* the request: the key as a bearer header, the conversation, the tool */
  json_t *body = json_loads(md.bodies[0], 0, NULL);
  ck_assert_ptr_nonnull(body);
  ck_assert_str_eq(str(body, "model"), "double");
  ck_assert(json_is_true(json_object_get(body, "stream")));
  ck_assert_uint_eq(json_array_size(json_object_get(body, "tools")), 1);
  json_t *msgs = json_object_get(body, "messages");
  ck_assert_str_eq(str(json_array_get(msgs, 0), "role"), "system");
  ck_assert_str_eq(str(json_array_get(msgs, 1), "content"), "hello");
  json_decref(body);
  teardown();
}
END_TEST

START_TEST(tool_call_result_reaches_the_model) {
  static const char *const steps[] = {TOOL_CALL("call_1"), TEXT("It was not run.")};
  md_start(2, steps);
  setup_with(ORCH_EXEC_OFF, 8, 1); /* the run ends rejected at once: no page needed */
  ask("run it");
  json_t *fin = wait_end();
  ck_assert_str_eq(str(fin, "state"), "done");
  ck_assert_str_eq(str(fin, "text"), "It was not run.");
  json_t *ids = json_object_get(fin, "run_ids");
  ck_assert_uint_eq(json_array_size(ids), 1);
  struct store_run r;
  ck_assert_int_eq(store_run_get(w.o->st, json_string_value(json_array_get(ids, 0)), &r), 0);
  ck_assert_str_eq(r.origin, "tool");
  ck_assert_str_eq(r.turn_id, w.turn_id);
  ck_assert_str_eq(r.code, "print(1)");
  store_run_free(&r);
  json_t *body = json_loads(md.bodies[1], 0, NULL);
  json_t *msgs = json_object_get(body, "messages");
  size_t n = json_array_size(msgs);
  json_t *call = json_array_get(msgs, n - 2), *tool = json_array_get(msgs, n - 1);
  ck_assert_str_eq(str(call, "role"), "assistant");
  ck_assert_str_eq(str(json_array_get(json_object_get(call, "tool_calls"), 0), "id"), "call_1");
  ck_assert_str_eq(str(tool, "role"), "tool");
  ck_assert_str_eq(str(tool, "tool_call_id"), "call_1");
  ck_assert_ptr_nonnull(strstr(str(tool, "content"), "turned off")); /* tools.c's words */
  json_decref(body);
  teardown();
}
END_TEST

START_TEST(tool_call_limit_last_request_without_tools) {
  static const char *const steps[] = {TOOL_CALL("call_1"), TOOL_CALL("call_2"), TEXT("Enough.")};
  md_start(3, steps);
  setup_with(ORCH_EXEC_OFF, 1, 1);
  ask("loop");
  json_t *fin = wait_end();
  ck_assert_str_eq(str(fin, "state"), "done");
  ck_assert_str_eq(str(json_object_get(fin, "error"), "code"), "tool_call_limit");
  ck_assert_uint_eq(json_array_size(json_object_get(fin, "run_ids")), 1); /* the second not run */
  json_t *body = json_loads(md.bodies[2], 0, NULL);
  ck_assert_ptr_null(json_object_get(body, "tools"));
  json_t *msgs = json_object_get(body, "messages");
  json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
  ck_assert_str_eq(str(last, "tool_call_id"), "call_2");
  ck_assert_ptr_nonnull(strstr(str(last, "content"), "Not run"));
  json_decref(body);
  teardown();
}
END_TEST

START_TEST(model_error_ends_the_turn) {
  static const char *const steps[] = {
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 34"
      "\r\nConnection: close\r\n\r\n{\"error\":{\"message\":\"warming up\"}}"};
  md_start(1, steps);
  setup_with(ORCH_EXEC_BROWSER, 8, 1);
  ask("hello");
  json_t *fin = wait_end();
  ck_assert_str_eq(str(fin, "state"), "error");
  json_t *e = json_object_get(fin, "error");
  ck_assert_str_eq(str(e, "code"), "model_error");
  ck_assert_str_eq(str(e, "message"), "The model answered HTTP 503: warming up.");
  ck_assert_ptr_eq(w.chat->asst, NULL);
  struct store_turn t;
  ck_assert_int_eq(store_turn_get(w.o->st, w.turn_id, &t), 0);
  ck_assert_int_eq(t.state, STORE_TURN_FINISHED);
  store_turn_free(&t);
  teardown();
}
END_TEST

static int has_delta(void) {
  for (size_t i = 0; i < w.n; i++)
    if (w.seq[i] == 0)
      return 1;
  return 0;
}

static void on_stop(void *ud, int rc, const char *mid) {
  (void)ud;
  ck_assert_int_eq(rc, 0);
  ck_assert_str_eq(mid, w.msg_id);
  w.stopped++;
}

START_TEST(stop_mid_stream_keeps_the_text) {
  static const char *const steps[] = {"HOLD"};
  md_start(1, steps);
  setup_with(ORCH_EXEC_BROWSER, 8, 1);
  ask("hello");
  uint64_t t0 = sbx_now_mono_ms();
  while (!has_delta() && sbx_now_mono_ms() - t0 < 5000) /* the partial text came */
    uv_run(&w.loop, UV_RUN_ONCE);
  ck_assert(has_delta());
  size_t hl = 0;
  char *held = orch__asst_held(w.chat, &hl); /* what a page attaching now is sent */
  ck_assert_ptr_nonnull(strstr(held, "\"text\":\"partial \""));
  ck_assert_ptr_nonnull(strstr(held, "\"state\":\"streaming\""));
  sbx_free(held);
  struct orch_ask again = {.text = "more"};
  ck_assert_int_eq(orch__asst_ask(w.o, w.chat, &again, on_asked, NULL), SBX_EBUSY);
  ck_assert_int_eq(orch__asst_stop(w.o, "00000000000000000000000000000000", on_stop, NULL),
                   SBX_ENOENT);
  ck_assert_int_eq(orch__asst_stop(w.o, w.turn_id, on_stop, NULL), 0);
  json_t *fin = wait_end();
  while (w.stopped == 0)
    uv_run(&w.loop, UV_RUN_ONCE);
  ck_assert_str_eq(str(fin, "state"), "stopped");
  ck_assert_str_eq(str(fin, "text"), "partial ");
  ck_assert(json_is_null(json_object_get(fin, "error")));
  ck_assert_int_eq(w.stopped, 1);
  teardown();
}
END_TEST

START_TEST(no_model) {
  md_start(0, NULL);
  setup_with(ORCH_EXEC_BROWSER, 8, 0);
  struct orch_ask a = {.text = "hello"};
  ck_assert_ptr_null(w.o->llm);
  ck_assert_int_eq(orch__asst_ask(w.o, w.chat, &a, on_asked, NULL), SBX_ENOENT);
  teardown();
}
END_TEST

int main(void) {
  Suite *s = suite_create("assistant");
  TCase *tc = tcase_create("turn");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, plain_answer);
  tcase_add_test(tc, tool_call_result_reaches_the_model);
  tcase_add_test(tc, tool_call_limit_last_request_without_tools);
  tcase_add_test(tc, model_error_ends_the_turn);
  tcase_add_test(tc, stop_mid_stream_keeps_the_text);
  tcase_add_test(tc, no_model);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
