/* test_tools.c -- the tools' pure parts (tools.c): the definitions carry the deployment's facts
 * (time limit, pause wait, packages served and lacking, PyPI, the mode) and the caller's scope;
 * MCP and OpenAI shapes say the same; arguments are checked (table-driven) against the schema
 * and the scope; the result text of every status (restart with its remounted files, notes,
 * files with where later runs see them, the value and display() text), the whole text in its
 * order, size units, images (figures, display() and value PNGs) and links in the content,
 * isError.  The
 * execution (runs, the store) is tested over HTTP (tests/integration/mcp.test.mjs). */
#include "mcp.h"

#include <check.h>
#include <string.h>

static const char *const CHAT = "0123456789abcdef0123456789abcdef";

static struct orch_tool_env env_with(json_t **pk) {
  *pk = json_pack("{s:s, s:[{s:s, s:s}], s:[{s:s, s:s}]}", "python", "3.14.2", "has", "name",
                  "openpyxl", "version", "3.0.9", "lacks", "name", "numpy", "reason", "compiled");
  return (struct orch_tool_env){.exec_mode = ORCH_EXEC_BROWSER,
                                .time_limit_s = 42,
                                .paused_wait_ms = 90000,
                                .input_wait_s = 300,
                                .pypi = 0,
                                .python = "3.14.2",
                                .packages = *pk};
}

static const char *desc_of(json_t *list, int i, int openai) {
  json_t *t = json_array_get(list, i);
  return json_string_value(
      json_object_get(openai ? json_object_get(t, "function") : t, "description"));
}

START_TEST(test_definitions) {
  json_t *pk;
  struct orch_tool_env env = env_with(&pk);
  struct orch_tool_scope all = {""}, one;
  strcpy(one.chat_id, CHAT);
  json_t *mcp = orch__tools_json(&env, &all, ORCH_TOOLS_MCP);
  json_t *oai = orch__tools_json(&env, &all, ORCH_TOOLS_OPENAI);
  ck_assert_uint_eq(json_array_size(mcp), ORCH_TOOL__COUNT);
  const char *run = desc_of(mcp, 0, 0);
  ck_assert_ptr_nonnull(strstr(run, "Python 3.14.2"));
  ck_assert_ptr_nonnull(strstr(run, "Time limit: 42 s per run"));
  ck_assert_ptr_nonnull(strstr(run, "up to 90 s"));
  ck_assert_ptr_nonnull(strstr(run, "page must be open"));
  ck_assert_ptr_nonnull(strstr(run, "the standard library, openpyxl."));
  ck_assert_ptr_nonnull(strstr(run, "Not available here (importing them raises "
                                    "ModuleNotFoundError): numpy."));
  ck_assert_ptr_nonnull(strstr(run, "Network: none (no HTTP, sockets or downloads)."));
  ck_assert_ptr_nonnull(strstr(run, "8,000 characters"));
  ck_assert_ptr_nonnull(strstr(run, "input(): asks the person at the chat's page and waits for "
                                    "the answer (up to 300 s"));
  for (int i = 0; i < ORCH_TOOL__COUNT; i++) {
    json_t *m = json_array_get(mcp, i), *f = json_object_get(json_array_get(oai, i), "function");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(oai, i), "type")),
                     "function");
    ck_assert_str_eq(json_string_value(json_object_get(m, "name")),
                     json_string_value(json_object_get(f, "name")));
    ck_assert_str_eq(desc_of(mcp, i, 0), desc_of(oai, i, 1));
    ck_assert(json_equal(json_object_get(m, "inputSchema"), json_object_get(f, "parameters")));
    ck_assert_int_eq(orch__tool_find(orch__tool_name(i)), i);
  }
  ck_assert_int_eq(orch__tool_find("nope"), -1);
  ck_assert_int_eq(orch__tool_find(NULL), -1);
  json_t *schema = json_object_get(json_array_get(mcp, 0), "inputSchema");
  ck_assert_int_eq(
      json_integer_value(json_object_get(
          json_object_get(json_object_get(schema, "properties"), "timeout_s"), "maximum")),
      42);
  json_decref(mcp);
  json_decref(oai);
  /* Server mode, PyPI on, no package list; a chat key: no chat_id, the chat named. */
  env.exec_mode = ORCH_EXEC_SERVER;
  env.pypi = 1;
  env.packages = NULL;
  mcp = orch__tools_json(&env, &one, ORCH_TOOLS_MCP);
  run = desc_of(mcp, 0, 0);
  ck_assert_ptr_null(strstr(run, "page must be open"));
  ck_assert_ptr_nonnull(strstr(run, "server's sandboxed hosts"));
  ck_assert_ptr_nonnull(strstr(run, "except installing pure-Python packages from PyPI"));
  ck_assert_ptr_nonnull(strstr(run, "Other imports raise ModuleNotFoundError."));
  ck_assert_ptr_nonnull(strstr(run, "reaches chat 0123456789abcdef0123456789abcdef only"));
  for (int i = 0; i < ORCH_TOOL__COUNT; i++) {
    json_t *s = json_object_get(json_array_get(mcp, i), "inputSchema");
    ck_assert_ptr_null(json_object_get(json_object_get(s, "properties"), "chat_id"));
    size_t k;
    json_t *v;
    json_array_foreach(json_object_get(s, "required"), k, v)
        ck_assert_str_ne(json_string_value(v), "chat_id");
  }
  json_decref(mcp);
  env.exec_mode = ORCH_EXEC_OFF;
  mcp = orch__tools_json(&env, &all, ORCH_TOOLS_MCP);
  ck_assert_ptr_nonnull(strstr(desc_of(mcp, 0, 0), "turned off"));
  json_decref(mcp);
  json_decref(pk);
}
END_TEST

/* Every tool a description of the list names is in the list. */
static void names_only_offered(json_t *list) {
  for (size_t i = 0; i < json_array_size(list); i++) {
    const char *d = desc_of(list, (int)i, 0);
    for (int t = 0; t < ORCH_TOOL__COUNT; t++) {
      if (strstr(d, orch__tool_name(t)) == NULL)
        continue;
      int listed = 0;
      for (size_t k = 0; k < json_array_size(list); k++)
        listed |= strcmp(json_string_value(json_object_get(json_array_get(list, k), "name")),
                         orch__tool_name(t)) == 0;
      ck_assert_msg(listed, "tool %zu names %s, which is not offered", i, orch__tool_name(t));
    }
  }
}

START_TEST(test_words_from_deployment) {
  /* Charts only where matplotlib is served; the tools named only where they are offered. */
  json_t *pk;
  struct orch_tool_env env = env_with(&pk);
  env.handoff_s = 50;
  struct orch_tool_scope all = {""};
  json_t *mcp = orch__tools_json(&env, &all, ORCH_TOOLS_MCP);
  const char *run = desc_of(mcp, 0, 0);
  ck_assert_ptr_null(strstr(run, "plt.show"));
  ck_assert_ptr_null(strstr(run, "Charts"));
  ck_assert_ptr_nonnull(strstr(run, "(list_files shows them, add_file adds one)"));
  ck_assert_ptr_nonnull(strstr(run, "more than 50 s without progress notifications returns with "
                                    "the run still going and its run_id; wait_for_run gets its "
                                    "result, cancel_run stops it."));
  names_only_offered(mcp);
  json_decref(mcp);
  json_array_append_new(json_object_get(pk, "has"),
                        json_pack("{s:s, s:s}", "name", "matplotlib", "version", "3.8.4"));
  mcp = orch__tools_json(&env, &all, ORCH_TOOLS_MCP);
  ck_assert_ptr_nonnull(strstr(desc_of(mcp, 0, 0), "- Charts: plt.show() saves each open figure"));
  json_decref(mcp);
  /* The built-in assistant is offered run_python alone: no other tool is named. */
  env.offered = ORCH_TOOL_BIT(ORCH_TOOL_RUN_PYTHON);
  json_t *oai = orch__tools_json(&env, &all, ORCH_TOOLS_OPENAI);
  ck_assert_uint_eq(json_array_size(oai), 1);
  run = desc_of(oai, 0, 1);
  for (int t = 1; t < ORCH_TOOL__COUNT; t++)
    ck_assert_msg(strstr(run, orch__tool_name(t)) == NULL, "names %s", orch__tool_name(t));
  ck_assert_ptr_nonnull(strstr(run, "the chat's files are at /mnt/data/<name>. To give"));
  json_decref(oai);
  env.offered = ORCH_TOOL_BIT(ORCH_TOOL_RUN_PYTHON) | ORCH_TOOL_BIT(ORCH_TOOL_LIST_FILES);
  mcp = orch__tools_json(&env, &all, ORCH_TOOLS_MCP);
  ck_assert_uint_eq(json_array_size(mcp), 2);
  ck_assert_ptr_nonnull(strstr(desc_of(mcp, 0, 0), "(list_files shows them)"));
  names_only_offered(mcp);
  json_decref(mcp);
  json_decref(pk);
}
END_TEST

START_TEST(test_check_args) {
  struct orch_tool_scope all = {""}, one;
  strcpy(one.chat_id, CHAT);
  static const struct {
    int tool, scoped;
    const char *args; /* JSON, or NULL for none */
    int ok;
    const char *why;
  } cases[] = {
      {ORCH_TOOL_RUN_PYTHON, 0, "{\"chat_id\":\"0123456789abcdef0123456789abcdef\",\"code\":\"x\"}",
       1, NULL},
      {ORCH_TOOL_RUN_PYTHON, 0, "{\"code\":\"x\"}", 0, "chat_id: required"},
      {ORCH_TOOL_RUN_PYTHON, 0, NULL, 0, "chat_id: required"},
      {ORCH_TOOL_RUN_PYTHON, 0, "[]", 0, "must be an object"},
      {ORCH_TOOL_RUN_PYTHON, 0, "{\"chat_id\":5,\"code\":\"x\"}", 0, "chat_id: must be a string"},
      {ORCH_TOOL_RUN_PYTHON, 0, "{\"chat_id\":\"ABC\",\"code\":\"x\"}", 0, "no chat ABC"},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\"}", 1, NULL},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"chat_id\":null}", 1, NULL},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"chat_id\":\"0123456789abcdef0123456789abcdef\"}",
       1, NULL},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"chat_id\":\"fedcba9876543210fedcba9876543210\"}",
       0, "reaches chat 0123456789abcdef0123456789abcdef only"},
      {ORCH_TOOL_RUN_PYTHON, 1, "{}", 0, "code: required"},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":[\"x\"]}", 0, "code: must be a string"},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"timeout_s\":10}", 1, NULL},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"timeout_s\":10.0}", 1, NULL},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"timeout_s\":null}", 1, NULL},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"timeout_s\":0}", 0, "from 1 to 60"},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"timeout_s\":61}", 0, "from 1 to 60"},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"timeout_s\":2.5}", 0, "timeout_s"},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"timeout_s\":\"5\"}", 0, "timeout_s"},
      {ORCH_TOOL_RUN_PYTHON, 1, "{\"code\":\"x\",\"timeout_s\":1e300}", 0, "timeout_s"},
      {ORCH_TOOL_LIST_FILES, 1, "{}", 1, NULL},
      {ORCH_TOOL_LIST_FILES, 0, "{}", 0, "chat_id: required"},
      {ORCH_TOOL_ADD_FILE, 1, "{\"name\":\"a.txt\",\"text\":\"hi\"}", 1, NULL},
      {ORCH_TOOL_ADD_FILE, 1, "{\"name\":\"a.bin\",\"base64\":\"aGk=\"}", 1, NULL},
      {ORCH_TOOL_ADD_FILE, 1, "{\"text\":\"hi\"}", 0, "name: required"},
      {ORCH_TOOL_ADD_FILE, 1, "{\"name\":\"\",\"text\":\"hi\"}", 0, "name: required"},
      {ORCH_TOOL_ADD_FILE, 1, "{\"name\":\"a\"}", 0, "text or as base64"},
      {ORCH_TOOL_ADD_FILE, 1, "{\"name\":\"a\",\"text\":\"x\",\"base64\":\"eA==\"}", 0,
       "text or as base64"},
      {ORCH_TOOL_ADD_FILE, 1, "{\"name\":\"a\",\"text\":7}", 0, "text: must be a string"},
      {ORCH_TOOL_WAIT_FOR_RUN, 0, "{\"run_id\":\"0123456789abcdef0123456789abcdef\"}", 1, NULL},
      {ORCH_TOOL_WAIT_FOR_RUN, 1, "{\"run_id\":\"0123456789abcdef0123456789abcdef\",\"wait_s\":0}",
       1, NULL},
      {ORCH_TOOL_WAIT_FOR_RUN, 0,
       "{\"run_id\":\"0123456789abcdef0123456789abcdef\",\"wait_s\":"
       "500}",
       1, NULL},
      {ORCH_TOOL_WAIT_FOR_RUN, 0, "{}", 0, "run_id: required"},
      {ORCH_TOOL_WAIT_FOR_RUN, 0, "{\"run_id\":7}", 0, "run_id: must be a string"},
      {ORCH_TOOL_WAIT_FOR_RUN, 0, "{\"run_id\":\"nope\"}", 0, "run_id: no run nope"},
      {ORCH_TOOL_WAIT_FOR_RUN, 0, "{\"run_id\":\"0123456789abcdef0123456789abcdef\",\"wait_s\":-1}",
       0, "wait_s: whole seconds from 0"},
      {ORCH_TOOL_WAIT_FOR_RUN, 0,
       "{\"run_id\":\"0123456789abcdef0123456789abcdef\",\"wait_s\":"
       "\"5\"}",
       0, "wait_s"},
      {ORCH_TOOL_CANCEL_RUN, 1, "{\"run_id\":\"0123456789abcdef0123456789abcdef\"}", 1, NULL},
      {ORCH_TOOL_CANCEL_RUN, 1, "{}", 0, "run_id: required"},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    json_t *args = cases[i].args ? json_loads(cases[i].args, JSON_DECODE_ANY, NULL) : NULL;
    ck_assert(cases[i].args == NULL || args != NULL);
    struct orch_tool_args a;
    char why[400] = "";
    int rc = orch__tool_check(cases[i].tool, args, cases[i].scoped ? &one : &all, 60, &a, why,
                              sizeof(why));
    ck_assert_msg((rc == 0) == cases[i].ok, "%s: rc %d (%s)", cases[i].args, rc, why);
    if (!cases[i].ok)
      ck_assert_msg(strstr(why, cases[i].why) != NULL, "%s: %s", cases[i].args, why);
    else if (cases[i].tool >= ORCH_TOOL_WAIT_FOR_RUN && !cases[i].scoped)
      ck_assert_ptr_null(a.chat_id); /* the run says its chat (orch__tool_start) */
    else
      ck_assert_str_eq(a.chat_id, CHAT);
    if (cases[i].ok && cases[i].tool >= ORCH_TOOL_WAIT_FOR_RUN)
      ck_assert_str_eq(a.run_id, "0123456789abcdef0123456789abcdef");
    json_decref(args);
  }
  /* Sizes: code and add_file content have their own caps. */
  char *big = sbx_malloc(ORCH_TOOL_FILE_MAX + 2);
  memset(big, 'a', ORCH_TOOL_FILE_MAX + 1);
  big[ORCH_TOOL_FILE_MAX + 1] = '\0';
  json_t *args = json_pack("{s:s, s:s}", "name", "a", "text", big);
  struct orch_tool_args a;
  char why[400];
  ck_assert_int_eq(orch__tool_check(ORCH_TOOL_ADD_FILE, args, &one, 60, &a, why, sizeof(why)),
                   SBX_EINVAL);
  ck_assert_ptr_nonnull(strstr(why, "over 8 MB"));
  json_decref(args);
  big[ORCH_TOOL_CODE_MAX + 1] = '\0';
  args = json_pack("{s:s}", "code", big);
  ck_assert_int_eq(orch__tool_check(ORCH_TOOL_RUN_PYTHON, args, &one, 60, &a, why, sizeof(why)),
                   SBX_EINVAL);
  json_decref(args);
  sbx_free(big);
}
END_TEST

static json_t *run_of(const char *json) {
  json_t *j = json_loads(json, 0, NULL);
  ck_assert_ptr_nonnull(j);
  return j;
}

START_TEST(test_run_text) {
  static const struct {
    const char *run, *want[4];
    int is_error;
  } cases[] = {
      {"{\"status\":\"ok\",\"stdout\":\"42\",\"stderr\":\"\",\"duration_ms\":1234}",
       {"The code ran to the end in 1.23 s.\n", "\nstdout:\n42\n"},
       0},
      {"{\"status\":\"ok\",\"stdout\":\"\",\"stderr\":\"\"}", {"It printed nothing."}, 0},
      {"{\"status\":\"error\",\"stdout\":\"a\\n\",\"stderr\":\"w\\n\",\"error\":{\"type\":"
       "\"ValueError\",\"message\":\"bad\",\"traceback\":\"Traceback...\\nValueError: bad\"}}",
       {"(status error)", "stdout:\na\n", "stderr:\nw\n", "\nTraceback...\nValueError: bad\n"},
       1},
      {"{\"status\":\"error\",\"error\":{\"type\":\"SyntaxError\",\"message\":\"oops\","
       "\"traceback\":null}}",
       {"\nSyntaxError: oops\n"},
       1},
      {"{\"status\":\"timeout\",\"restarted\":true,\"remounted\":[\"a.csv\",\"b.txt\"],\"error\":"
       "{\"type\":\"TimeoutError\",\"message\":\"The run did not finish within its time limit of "
       "3 s.\",\"traceback\":\"\"}}",
       {"stopped by the time limit (status timeout)", "time limit of 3 s",
        "Split the work into smaller steps",
        "The sandbox was restarted: variables and files written outside /mnt/output are gone. "
        "Files back in /mnt/data: a.csv, b.txt.\n"},
       1},
      {"{\"status\":\"crashed\",\"restarted\":true,\"remounted\":[]}",
       {"crashed while running", "No files to remount."},
       1},
      {"{\"status\":\"abandoned\",\"error\":{\"type\":\"Abandoned\",\"message\":\"The code did not "
       "run: no page\"}}",
       {"did not run (status abandoned)", "Abandoned: The code did not run: no page"},
       1},
      {"{\"status\":\"cancelled\"}", {"cancelled (status cancelled)"}, 1},
      {"{\"status\":\"rejected\"}", {"not run (status rejected)"}, 1},
      {"{\"status\":\"ok\",\"stdout\":\"\",\"value\":{\"text/plain\":\"3\"}}",
       {"\nValue of the last expression:\n3\n"},
       0},
      {"{\"status\":\"ok\",\"value\":null,\"displays\":[{\"text/plain\":\"<A>\"},"
       "{\"text/html\":\"<b>\",\"text/plain\":\"\"},{\"text/plain\":\"<C>\\n\"}]}",
       {"\ndisplay() 1 of 3:\n<A>\n", "\ndisplay() 3 of 3:\n<C>\n"},
       0},
      {"{\"status\":\"ok\",\"notes\":[\"stdout was cut at 8,000 characters\"],\"files_unlisted\":3,"
       "\"figures_dropped\":2}",
       {"\nNotes:\n- stdout was cut at 8,000 characters\n", "3 more changed files",
        "2 figures were dropped (at most 20 per run)"},
       0},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    json_t *run = run_of(cases[i].run);
    char *text = orch__tool_run_text(run, NULL, 0);
    ck_assert_msg(strstr(text, "display() 2 of 3") == NULL, "an empty text/plain is not shown");
    for (size_t k = 0; k < 4 && cases[i].want[k]; k++)
      ck_assert_msg(strstr(text, cases[i].want[k]) != NULL, "case %zu: want %s in:\n%s", i,
                    cases[i].want[k], text);
    json_t *res = orch__tool_run_result(run, NULL, 0, "http://h");
    ck_assert_int_eq(json_is_true(json_object_get(res, "isError")), cases[i].is_error);
    ck_assert(json_equal(json_object_get(res, "structuredContent"), run));
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(res, "content"), 0), "text")),
                     text);
    json_decref(res);
    sbx_free(text);
    json_decref(run);
  }
}
END_TEST

START_TEST(test_run_files) {
  json_t *run = run_of("{\"status\":\"ok\",\"files\":["
                       "{\"name\":\"figure-1.png\",\"size\":8,\"kind\":\"figure\",\"artifact_id\":"
                       "\"f1\"},"
                       "{\"name\":\"out/t.csv\",\"size\":20480,\"kind\":\"file\",\"artifact_id\":"
                       "\"f2\"},"
                       "{\"name\":\"big.bin\",\"size\":30000000,\"kind\":\"file\",\"artifact_id\":"
                       "\"f3\"},"
                       "{\"name\":\"huge.png\",\"size\":9000000,\"kind\":\"file\",\"artifact_id\":"
                       "\"f4\"}]}");
  json_t *list = json_object_get(run, "files");
  static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  struct orch_tool_file files[4] = {
      {.file = json_array_get(list, 0),
       .mounted = 1,
       .named_only = 1,
       .image_type = "image/png",
       .image = png,
       .image_len = 8},
      {.file = json_array_get(list, 1), .mounted = 1},
      {.file = json_array_get(list, 2), .mounted = 0, .left_out_reason = "over the 20 MB limit"},
      {.file = json_array_get(list, 3),
       .mounted = 1,
       .named_only = 1,
       .not_shown = "too large to show"},
  };
  char *text = orch__tool_run_text(run, files, 4);
  ck_assert_ptr_nonnull(strstr(text, "\nFiles this run saved in /mnt/output:\n"));
  ck_assert_ptr_nonnull(strstr(text, "- figure-1.png (8 bytes, a figure): shown below as an "
                                     "image. A later run gets it at /mnt/data/figure-1.png when "
                                     "its code names it.\n"));
  ck_assert_ptr_nonnull(strstr(text, "- out/t.csv (20.0 KB): The file is available to code at "
                                     "/mnt/data/out/t.csv (its latest version, if it has been "
                                     "edited).\n"));
  ck_assert_ptr_nonnull(strstr(text, "- big.bin (28.6 MB): Not mounted for later runs: over the "
                                     "20 MB limit.\n"));
  ck_assert_ptr_nonnull(strstr(text, "- huge.png (8.6 MB): not shown here (too large to show)."));
  json_t *res = orch__tool_run_result(run, files, 4, "http://127.0.0.1:9");
  json_t *content = json_object_get(res, "content");
  ck_assert_uint_eq(json_array_size(content), 5); /* text, one image, three links */
  json_t *img = json_array_get(content, 1);
  ck_assert_str_eq(json_string_value(json_object_get(img, "type")), "image");
  ck_assert_str_eq(json_string_value(json_object_get(img, "mimeType")), "image/png");
  ck_assert_str_eq(json_string_value(json_object_get(img, "data")), "iVBORw0KGgo=");
  json_t *link = json_array_get(content, 2);
  ck_assert_str_eq(json_string_value(json_object_get(link, "type")), "resource_link");
  ck_assert_str_eq(json_string_value(json_object_get(link, "uri")),
                   "http://127.0.0.1:9/v1/files/f2");
  ck_assert_str_eq(json_string_value(json_object_get(link, "name")), "out/t.csv");
  ck_assert_str_eq(json_string_value(json_object_get(link, "mimeType")), "text/csv; charset=utf-8");
  ck_assert_int_eq(json_integer_value(json_object_get(link, "size")), 20480);
  ck_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 4), "name")),
                   "huge.png");
  json_decref(res);
  sbx_free(text);
  json_decref(run);
}
END_TEST

/* Every part in its place, in the order a model reads them: what happened, what it printed, what
 * it showed, the error, the restart, the notes, the files. */
START_TEST(test_run_text_order) {
  json_t *run = run_of(
      "{\"status\":\"timeout\",\"stdout\":\"row 1\\nrow 2\",\"stderr\":\"slow\\n\",\"value\":null,"
      "\"displays\":[{\"text/plain\":\"<Figure>\"}],\"error\":{\"type\":\"TimeoutError\","
      "\"message\":\"The run did not finish within its time limit of 5 s.\",\"traceback\":\"\"},"
      "\"restarted\":true,\"remounted\":[\"data.csv\"],\"notes\":[\"stdout was cut at 8,000 "
      "characters.\"],\"files\":[{\"name\":\"part.csv\",\"size\":10239,\"kind\":\"file\","
      "\"artifact_id\":\"f1\"}]}");
  struct orch_tool_file f = {.file = json_array_get(json_object_get(run, "files"), 0),
                             .mounted = 1};
  char *text = orch__tool_run_text(run, &f, 1);
  ck_assert_str_eq(text,
                   "The code was stopped by the time limit (status timeout).\n"
                   "\nstdout:\nrow 1\nrow 2\n"
                   "\nstderr:\nslow\n"
                   "\ndisplay() 1 of 1:\n<Figure>\n"
                   "\nTimeoutError: The run did not finish within its time limit of 5 s.\n"
                   "Split the work into smaller steps, or work on a sample of the data.\n"
                   "\nThe sandbox was restarted: variables and files written outside /mnt/output "
                   "are gone. Files back in /mnt/data: data.csv.\n"
                   "\nNotes:\n- stdout was cut at 8,000 characters.\n"
                   "\nFiles this run saved in /mnt/output:\n"
                   "- part.csv (10239 bytes): The file is available to code at "
                   "/mnt/data/part.csv (its latest version, if it has been edited).\n");
  sbx_free(text);
  json_decref(run);
}
END_TEST

/* Sizes as a person writes them: bytes below 10 KB, then KB, then MB from 1 MB on. */
START_TEST(test_sizes) {
  static const struct {
    long long size;
    const char *want;
  } cases[] = {
      {0, "(0 bytes)"},        {10239, "(10239 bytes)"}, {10240, "(10.0 KB)"},
      {1048575, "(1.0 MB)"},   {1048576, "(1.0 MB)"},    {9000000, "(8.6 MB)"},
      {52428800, "(50.0 MB)"},
  };
  for (size_t i = 0; i < SBX_ARRAY_SIZE(cases); i++) {
    json_t *run = json_pack("{s:s, s:[{s:s, s:I, s:s}]}", "status", "ok", "files", "name", "f.bin",
                            "size", cases[i].size, "artifact_id", "a");
    struct orch_tool_file f = {.file = json_array_get(json_object_get(run, "files"), 0),
                               .left_out_reason = "over the 20 MB limit"};
    char *text = orch__tool_run_text(run, &f, 1);
    ck_assert_msg(strstr(text, cases[i].want) != NULL, "%lld: %s", cases[i].size, text);
    ck_assert_ptr_nonnull(strstr(text, "Not mounted for later runs: over the 20 MB limit.\n"));
    sbx_free(text);
    json_decref(run);
  }
}
END_TEST

/* display() and value bundles with a PNG: image items after the figures, before the links. */
START_TEST(test_bundle_images) {
  json_t *run = run_of("{\"status\":\"ok\",\"value\":{\"text/plain\":\"<V>\",\"image/png\":"
                       "\"dg==\"},\"displays\":[{\"text/plain\":\"<D>\",\"image/png\":\"ZA==\"},"
                       "{\"text/plain\":\"no image\"}],\"files\":[{\"name\":\"t.csv\","
                       "\"size\":1,\"artifact_id\":\"f1\"}]}");
  struct orch_tool_file f = {.file = json_array_get(json_object_get(run, "files"), 0),
                             .mounted = 1};
  json_t *res = orch__tool_run_result(run, &f, 1, "http://h");
  json_t *content = json_object_get(res, "content");
  ck_assert_uint_eq(json_array_size(content), 4); /* text, two images, a link */
  ck_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 1), "data")), "ZA==");
  ck_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 2), "data")), "dg==");
  ck_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 2), "mimeType")),
                   "image/png");
  ck_assert_str_eq(json_string_value(json_object_get(json_array_get(content, 3), "type")),
                   "resource_link");
  const char *text = json_string_value(json_object_get(json_array_get(content, 0), "text"));
  ck_assert_ptr_nonnull(strstr(text, "\ndisplay() 1 of 2:\n<D>\n\ndisplay() 2 of 2:\nno image\n"
                                     "\nValue of the last expression:\n<V>\n"));
  json_decref(res);
  json_decref(run);
}
END_TEST

int main(void) {
  Suite *s = suite_create("tools");
  TCase *tc = tcase_create("tools");
  tcase_add_test(tc, test_definitions);
  tcase_add_test(tc, test_words_from_deployment);
  tcase_add_test(tc, test_check_args);
  tcase_add_test(tc, test_run_text);
  tcase_add_test(tc, test_run_files);
  tcase_add_test(tc, test_run_text_order);
  tcase_add_test(tc, test_sizes);
  tcase_add_test(tc, test_bundle_images);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
