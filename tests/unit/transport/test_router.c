/* test_router.c -- transport/router.c: pattern matching (literal before parametrised, {name},
 * trailing {name*}, percent-decoding inside parameters, 404 vs 405 with Allow), bad patterns,
 * percent-decoding rules and MIME types. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static void h(struct tp_req *r, void *ud) {}

struct rcase {
  const char *method, *path;
  const char *pattern; /* expected route, NULL for none */
  int status;          /* 0, 404, 405 */
  const char *pname, *pvalue;
};

static const struct rcase rcases[] = {
    {"GET", "/v1/chats", "/v1/chats", 0, NULL, NULL},
    {"POST", "/v1/chats", "/v1/chats", 0, NULL, NULL},
    {"GET", "/v1/chats/abc/files", "/v1/chats/{chat}/files", 0, "chat", "abc"},
    {"GET", "/v1/chats/a%20b/files", "/v1/chats/{chat}/files", 0, "chat", "a b"},
    {"GET", "/v1/chats/special/files", "/v1/chats/special/files", 0, NULL, NULL},
    {"PUT", "/v1/runs/r1/files/plots/a.png", "/v1/runs/{run}/files/{name*}", 0, "name",
     "plots/a.png"},
    {"PUT", "/v1/runs/r1/files/a%2Fb", "/v1/runs/{run}/files/{name*}", 0, "name", "a/b"},
    {"PUT", "/v1/runs/r1/files/", NULL, 404, NULL, NULL},
    {"GET", "/v1/chats//files", NULL, 404, NULL, NULL},
    {"GET", "/v1/chats/abc/files/extra", NULL, 404, NULL, NULL},
    {"DELETE", "/v1/chats", NULL, 405, NULL, NULL},
    {"HEAD", "/v1/chats", "/v1/chats", 0, NULL, NULL},
    {"GET", "/", "/", 0, NULL, NULL},
    {"GET", "/nothing", NULL, 404, NULL, NULL},
    {"GET", "/v1/chats/", NULL, 404, NULL, NULL},
    {"GET", "/v1/%63hats", "/v1/chats", 0, NULL, NULL}, /* encoded literal */
    {"GET", "/v1/chat%", NULL, 404, NULL, NULL},        /* truncated escape */
    {"GET", "/v1/chat%7", NULL, 404, NULL, NULL},
    {"GET", "/v1/chatsX", NULL, 404, NULL, NULL},
    {"GET", "/v1/chat", NULL, 404, NULL, NULL},
    /* deeper than a pattern may be (TP_ROUTE_MAX_SEGS): only the rest route takes it */
    {"PUT", "/v1/runs/r1/files/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/0/1/2/3/4/5",
     "/v1/runs/{run}/files/{name*}", 0, "name",
     "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/0/1/2/3/4/5"},
    {"GET", "/v1/chats/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/0/1/2/3/4/5", NULL, 404,
     NULL, NULL},
    {"POST", "/v1/chats/abc/files", NULL, 405, NULL, NULL}, /* Allow only from a miss */
    {"GET", "/v1/chats/abc%2Fdef/files", "/v1/chats/{chat}/files", 0, "chat", "abc/def"},
};

START_TEST(test_route_table) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct tp_server *s;
  ck_assert_int_eq(tp_server_new(&loop, NULL, &s, NULL), 0);
  ck_assert_int_eq(tp_route(s, "GET", "/v1/chats/{chat}/files", 0, h, NULL), 0);
  ck_assert_int_eq(tp_route(s, "GET", "/v1/chats/special/files", 0, h, NULL), 0);
  ck_assert_int_eq(tp_route(s, "GET", "/v1/chats", 0, h, NULL), 0);
  ck_assert_int_eq(tp_route(s, "POST", "/v1/chats", 0, h, NULL), 0);
  ck_assert_int_eq(tp_route(s, "PUT", "/v1/runs/{run}/files/{name*}", 0, h, NULL), 0);
  ck_assert_int_eq(tp_route(s, "GET", "/", 0, h, NULL), 0);
  const struct rcase *c = &rcases[_i];
  struct tp_req r;
  memset(&r, 0, sizeof(r));
  char allow[64];
  int status = -1;
  const struct tp_route *rt =
      tp__route_match(s, c->method, c->path, &r, allow, sizeof(allow), &status);
  ck_assert_msg(status == c->status, "%s %s: status %d", c->method, c->path, status);
  if (c->pattern) {
    ck_assert_ptr_nonnull(rt);
    ck_assert_str_eq(rt->pattern, c->pattern);
  } else {
    ck_assert_ptr_null(rt);
  }
  if (c->pname)
    ck_assert_str_eq(tp_req_param(&r, c->pname), c->pvalue);
  if (status == 405)
    ck_assert_str_eq(allow, strcmp(c->path, "/v1/chats") == 0 ? "GET, POST" : "GET");
  tp__req_strings_free(&r);
  tp_server_close(s, 0, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(test_route_bad_patterns) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  struct tp_server *s;
  ck_assert_int_eq(tp_server_new(&loop, NULL, &s, NULL), 0);
  ck_assert_int_eq(tp_route(s, "GET", "no-slash", 0, h, NULL), SBX_EINVAL);
  ck_assert_int_eq(tp_route(s, "GET", "/a/{rest*}/b", 0, h, NULL), SBX_EINVAL);
  ck_assert_int_eq(tp_route(s, "GET", "/a/x{y}", 0, h, NULL), SBX_EINVAL);
  ck_assert_int_eq(tp_route(s, "GET", "/a", 0, NULL, NULL), SBX_EINVAL);
  char deep[3 * (TP_ROUTE_MAX_SEGS + 1) + 1], *p = deep; /* one segment too many */
  for (int i = 0; i <= TP_ROUTE_MAX_SEGS; i++)
    p += sprintf(p, "/%c", 'a' + i % 26);
  ck_assert_int_eq(tp_route(s, "GET", deep, 0, h, NULL), SBX_EINVAL);
  ck_assert_int_eq(s->nroutes, 0);
  deep[strlen(deep) - 2] = '\0'; /* TP_ROUTE_MAX_SEGS segments: fine */
  ck_assert_int_eq(tp_route(s, "GET", deep, 0, h, NULL), 0);
  ck_assert_int_eq(s->nroutes, 1);
  tp_server_close(s, 0, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

START_TEST(test_pct_decode) {
  char *d = tp__pct_decode("a%20b+c", 7, 0);
  ck_assert_str_eq(d, "a b+c");
  sbx_free(d);
  d = tp__pct_decode("a%20b+c", 7, 1);
  ck_assert_str_eq(d, "a b c");
  sbx_free(d);
  ck_assert_ptr_null(tp__pct_decode("%2", 2, 0));
  ck_assert_ptr_null(tp__pct_decode("%zz", 3, 0));
  ck_assert_ptr_null(tp__pct_decode("a%00b", 5, 0)); /* NUL never decoded */
  d = tp__pct_decode("%41", 3, 0);
  ck_assert_str_eq(d, "A");
  sbx_free(d);
}
END_TEST

START_TEST(test_mime) {
  ck_assert_str_eq(tp__mime_type("/x/pyodide.asm.wasm"), "application/wasm");
  ck_assert_str_eq(tp__mime_type("a.mjs"), "text/javascript; charset=utf-8");
  ck_assert_str_eq(tp__mime_type("a.JSON"), "application/json");
  ck_assert_str_eq(tp__mime_type("dir.d/noext"), "application/octet-stream");
  ck_assert_str_eq(tp__status_text(431), "Request Header Fields Too Large");
}
END_TEST

Suite *router_suite(void);
Suite *router_suite(void) {
  Suite *s = suite_create("router");
  TCase *tc = tcase_create("router");
  tcase_add_loop_test(tc, test_route_table, 0, (int)(sizeof(rcases) / sizeof(rcases[0])));
  tcase_add_test(tc, test_route_bad_patterns);
  tcase_add_test(tc, test_pct_decode);
  tcase_add_test(tc, test_mime);
  suite_add_tcase(s, tc);
  return s;
}
