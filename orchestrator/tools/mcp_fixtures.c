/* mcp_fixtures.c -- the official MCP conformance suite's fixtures
 * (@modelcontextprotocol/conformance: the tools, resources and prompts its server scenarios call,
 * as its reference "everything" server defines them), added beside our own tools when the
 * server runs with CEREA_MCP_CONFORMANCE_FIXTURES=1 (off by default; refused with production
 * settings: config.c).  Static answers only: a fixture runs nothing and reads nothing, so the
 * mode adds no way in; it exists so the suite can hold the real protocol code (mcp.c) to the
 * spec.  Names all start with test_ or test://, so none can be taken for ours.
 */
#include "mcp.h"

#include <stdio.h>
#include <string.h>

/* The fixtures as the suite's reference server has them ("@TOKEN": the call's progressToken). */
static const char fixtures_json[] =
    "{\"tools\":[{\"name\":\"test_simple_text\",\"description\":\"Tests simple text content res"
    "ponse\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"This is a simple text respo"
    "nse for testing.\"}]}},{\"name\":\"test_image_content\",\"description\":\"Tests image cont"
    "ent response\",\"result\":{\"content\":[{\"type\":\"image\",\"data\":\"iVBORw0KGgoAAAANSUh"
    "EUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==\",\"mimeType"
    "\":\"image/png\"}]}},{\"name\":\"test_audio_content\",\"description\":\"Tests audio conten"
    "t response\",\"result\":{\"content\":[{\"type\":\"audio\",\"data\":\"UklGRiYAAABXQVZFZm10I"
    "BAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=\",\"mimeType\":\"audio/wav\"}]}},{\"name\":\"test_"
    "embedded_resource\",\"description\":\"Tests embedded resource content response\",\"result\""
    ":{\"content\":[{\"type\":\"resource\",\"resource\":{\"uri\":\"test://embedded-resource\",\""
    "mimeType\":\"text/plain\",\"text\":\"This is an embedded resource content.\"}}]}},{\"name\""
    ":\"test_multiple_content_types\",\"description\":\"Tests response with multiple content ty"
    "pes (text, image, resource)\",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"Multi"
    "ple content types test:\"},{\"type\":\"image\",\"data\":\"iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"
    "CAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==\",\"mimeType\":\"image/pn"
    "g\"},{\"type\":\"resource\",\"resource\":{\"uri\":\"test://mixed-content-resource\",\"mime"
    "Type\":\"application/json\",\"text\":\"{\\\"test\\\":\\\"data\\\",\\\"value\\\":123}\"}}]}"
    "},{\"name\":\"test_tool_with_logging\",\"description\":\"Tests tool that emits log message"
    "s during execution\",\"logs\":[\"Tool execution started\",\"Tool processing data\",\"Tool "
    "execution completed\"],\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"Tool with lo"
    "gging executed successfully\"}]}},{\"name\":\"test_tool_with_progress\",\"description\":\""
    "Tests tool that reports progress notifications\",\"progress\":[0,50,100],\"result\":{\"con"
    "tent\":[{\"type\":\"text\",\"text\":\"@TOKEN\"}]}},{\"name\":\"test_error_handling\",\"des"
    "cription\":\"Tests error response handling\",\"result\":{\"isError\":true,\"content\":[{\""
    "type\":\"text\",\"text\":\"This tool intentionally returns an error for testing\"}]}},{\"n"
    "ame\":\"test_missing_capability\",\"description\":\"Test tool requiring sampling\",\"requi"
    "res\":\"sampling\",\"stateless\":true,\"result\":{\"content\":[{\"type\":\"text\",\"text\""
    ":\"Success\"}]}},{\"name\":\"test_streaming_elicitation\",\"description\":\"Diagnostic too"
    "l validating response progress streams\",\"stateless\":true,\"progress\":[50],\"result\":{"
    "\"content\":[{\"type\":\"text\",\"text\":\"Streaming complete\"}]}},{\"name\":\"test_loggi"
    "ng_tool\",\"description\":\"Diagnostic logging validator tool\",\"stateless\":true,\"logs\""
    ":[\"Diagnostic trace logging activated\"],\"result\":{\"content\":[{\"type\":\"text\",\"te"
    "xt\":\"Logging evaluated\"}]}}],\"resources\":[{\"uri\":\"test://static-text\",\"name\":\""
    "static-text\",\"title\":\"Static Text Resource\",\"description\":\"A static text resource "
    "for testing\",\"mimeType\":\"text/plain\",\"contents\":[{\"uri\":\"test://static-text\",\""
    "mimeType\":\"text/plain\",\"text\":\"This is the content of the static text resource.\"}]}"
    ",{\"uri\":\"test://static-binary\",\"name\":\"static-binary\",\"title\":\"Static Binary Re"
    "source\",\"description\":\"A static binary resource (image) for testing\",\"mimeType\":\"i"
    "mage/png\",\"contents\":[{\"uri\":\"test://static-binary\",\"mimeType\":\"image/png\",\"bl"
    "ob\":\"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAAB"
    "JRU5ErkJggg==\"}]},{\"uri\":\"test://watched-resource\",\"name\":\"watched-resource\",\"ti"
    "tle\":\"Watched Resource\",\"description\":\"A resource a client may subscribe to\",\"mime"
    "Type\":\"text/plain\",\"contents\":[{\"uri\":\"test://watched-resource\",\"mimeType\":\"te"
    "xt/plain\",\"text\":\"Watched resource content\"}]}],\"resourceTemplates\":[{\"uriTemplate"
    "\":\"test://template/{id}/data\",\"name\":\"template\",\"title\":\"Resource Template\",\"d"
    "escription\":\"A resource template with parameter substitution\",\"mimeType\":\"applicatio"
    "n/json\"}],\"prompts\":[{\"name\":\"test_simple_prompt\",\"title\":\"Simple Test Prompt\","
    "\"description\":\"A simple prompt without arguments\",\"messages\":[{\"role\":\"user\",\"c"
    "ontent\":{\"type\":\"text\",\"text\":\"This is a simple prompt for testing.\"}}]},{\"name\""
    ":\"test_prompt_with_arguments\",\"title\":\"Prompt With Arguments\",\"description\":\"A pr"
    "ompt with required arguments\",\"arguments\":[{\"name\":\"arg1\",\"description\":\"First t"
    "est argument\",\"required\":true},{\"name\":\"arg2\",\"description\":\"Second test argumen"
    "t\",\"required\":true}],\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"text\",\""
    "text\":\"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'\"}}]},{\"name\":\"test_prompt"
    "_with_embedded_resource\",\"title\":\"Prompt With Embedded Resource\",\"description\":\"A "
    "prompt that includes an embedded resource\",\"arguments\":[{\"name\":\"resourceUri\",\"des"
    "cription\":\"URI of the resource to embed\",\"required\":true}],\"messages\":[{\"role\":\""
    "user\",\"content\":{\"type\":\"resource\",\"resource\":{\"uri\":\"{resourceUri}\",\"mimeTy"
    "pe\":\"text/plain\",\"text\":\"Embedded resource content for testing.\"}}},{\"role\":\"use"
    "r\",\"content\":{\"type\":\"text\",\"text\":\"Please process the embedded resource above.\""
    "}}]},{\"name\":\"test_prompt_with_image\",\"title\":\"Prompt With Image\",\"description\":"
    "\"A prompt that includes image content\",\"messages\":[{\"role\":\"user\",\"content\":{\"t"
    "ype\":\"image\",\"data\":\"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8D"
    "wHwAFBQIAX8jx0gAAAABJRU5ErkJggg==\",\"mimeType\":\"image/png\"}},{\"role\":\"user\",\"cont"
    "ent\":{\"type\":\"text\",\"text\":\"Please analyze the image above.\"}}]}]}";

static json_t *fixtures(void) {
  static json_t *f;
  if (f == NULL)
    f = json_loads(fixtures_json, 0, NULL); /* kept for the process's life */
  return f;
}

static json_t *find(const char *list, const char *key, const char *value) {
  size_t i;
  json_t *it;
  json_array_foreach(json_object_get(fixtures(), list), i, it) {
    if (value && strcmp(json_string_value(json_object_get(it, key)), value) == 0)
      return it;
  }
  return NULL;
}

json_t *orch__mcp_fixture_capabilities(int stateless) {
  return stateless ? json_pack("{s:{s:b}, s:{s:b}, s:{}}", "resources", "listChanged", 0,
                               "prompts", "listChanged", 0, "completions")
                   : json_pack("{s:{s:b, s:b}, s:{s:b}, s:{}, s:{}}", "resources", "subscribe", 1,
                               "listChanged", 0, "prompts", "listChanged", 0, "completions",
                               "logging");
}

void orch__mcp_fixture_tools(json_t *tools, int stateless) {
  size_t i;
  json_t *t;
  json_array_foreach(json_object_get(fixtures(), "tools"), i, t) {
    if (json_is_true(json_object_get(t, "stateless")) && !stateless)
      continue;
    json_array_append_new(tools, json_pack("{s:O, s:O, s:{s:s, s:{}}}", "name",
                                           json_object_get(t, "name"), "description",
                                           json_object_get(t, "description"), "inputSchema",
                                           "type", "object", "properties"));
  }
}

/* text with each {name} replaced by args[name] (a new string). */
static json_t *fill(const char *text, const json_t *args) {
  char out[2048];
  size_t n = 0;
  for (const char *p = text; *p && n + 1 < sizeof(out);) {
    const char *end = *p == '{' ? strchr(p, '}') : NULL;
    char key[64];
    if (end && (size_t)(end - p - 1) < sizeof(key)) {
      snprintf(key, sizeof(key), "%.*s", (int)(end - p - 1), p + 1);
      const char *v = json_string_value(json_object_get(args, key));
      n += (size_t)snprintf(out + n, sizeof(out) - n, "%s", v ? v : "");
      n = n < sizeof(out) ? n : sizeof(out) - 1;
      p = end + 1;
    } else
      out[n++] = *p++;
  }
  out[n] = '\0';
  return json_string(out);
}

/* A deep copy of v with every string filled from args. */
static json_t *filled(const json_t *v, const json_t *args) {
  if (json_is_string(v))
    return fill(json_string_value(v), args);
  json_t *c = json_deep_copy(v);
  const char *k;
  json_t *x;
  size_t i;
  if (json_is_object(c))
    json_object_foreach(c, k, x) json_object_set_new(c, k, filled(x, args));
  else if (json_is_array(c))
    json_array_foreach(c, i, x) json_array_set_new(c, i, filled(x, args));
  return c;
}

static void answer(struct orch_mcp_fixture_reply *r, json_t *result) {
  r->status = 200;
  r->result = result;
}

static void refuse(struct orch_mcp_fixture_reply *r, int status, int code, const char *msg,
                   json_t *data) {
  r->status = status;
  r->code = code;
  snprintf(r->message, sizeof(r->message), "%s", msg);
  r->data = data;
}

static void tool_call(const json_t *params, int stateless, struct orch_mcp_fixture_reply *r,
                      const json_t *t) {
  const json_t *meta = json_object_get(params, "_meta");
  const json_t *caps = json_object_get(meta, "io.modelcontextprotocol/clientCapabilities");
  const char *needs = json_string_value(json_object_get(t, "requires"));
  if (needs && stateless && json_object_get(caps, needs) == NULL) {
    refuse(r, 400, ORCH_RPC_MISSING_CAPABILITY,
           "Missing required client capability: this tool needs sampling",
           json_pack("{s:{s:{}}}", "requiredCapabilities", needs));
    return;
  }
  const json_t *token = json_object_get(meta, "progressToken");
  char tok[300] = "";
  if (json_is_string(token))
    snprintf(tok, sizeof(tok), "%s", json_string_value(token));
  else if (json_is_integer(token))
    snprintf(tok, sizeof(tok), "%lld", (long long)json_integer_value(token));
  json_t *notes = json_array();
  size_t i;
  json_t *v;
  if (token != NULL)
    json_array_foreach(json_object_get(t, "progress"), i, v) {
      json_int_t p = json_integer_value(v);
      char msg[80];
      snprintf(msg, sizeof(msg), "Completed step %lld of 100", (long long)p);
      json_array_append_new(notes, json_pack("{s:s, s:s, s:{s:O, s:I, s:i, s:s}}", "jsonrpc",
                                             "2.0", "method", "notifications/progress",
                                             "params", "progressToken", token, "progress", p,
                                             "total", 100, "message", msg));
    }
  /* Logging: in a session always (the suite sets no level first); stateless only when the
   * request asked for a level, as 2026-07-28 says. */
  if (!stateless || json_object_get(meta, "io.modelcontextprotocol/logLevel"))
    json_array_foreach(json_object_get(t, "logs"), i, v) {
      json_array_append_new(notes, json_pack("{s:s, s:s, s:{s:s, s:s, s:O}}", "jsonrpc", "2.0",
                                             "method", "notifications/message", "params",
                                             "level", "info", "logger", "conformance-fixtures",
                                             "data", v));
    }
  r->notes = notes;
  json_t *result = json_deep_copy(json_object_get(t, "result"));
  json_t *content = json_object_get(result, "content");
  json_array_foreach(content, i, v) {
    if (strcmp(json_string_value(json_object_get(v, "text")) ?: "", "@TOKEN") == 0)
      json_object_set_new(v, "text", json_string(tok));
  }
  answer(r, result);
}

/* A template's URI: test://template/{id}/data. */
static json_t *template_read(const char *uri) {
  const char *pre = "test://template/", *post = "/data";
  size_t n = strlen(uri), a = strlen(pre), b = strlen(post);
  if (n <= a + b || strncmp(uri, pre, a) != 0 || strcmp(uri + n - b, post) != 0)
    return NULL;
  char id[200], text[400];
  snprintf(id, sizeof(id), "%.*s", (int)(n - a - b), uri + a);
  json_t *j = json_pack("{s:s, s:b, s:s+}", "id", id, "templateTest", 1, "data", "Data for ID: ", id);
  char *s = orch__json_dump(j, NULL);
  json_decref(j);
  snprintf(text, sizeof(text), "%s", s ? s : "{}");
  sbx_free(s);
  return json_pack("{s:[{s:s, s:s, s:s}]}", "contents", "uri", uri, "mimeType",
                   "application/json", "text", text);
}

int orch__mcp_fixture_method(const char *method, const json_t *params, int stateless,
                             struct orch_mcp_fixture_reply *r) {
  memset(r, 0, sizeof(*r));
  if (fixtures() == NULL)
    return 0;
  const char *name = json_string_value(json_object_get(params, "name"));
  if (strcmp(method, "tools/call") == 0) {
    const json_t *t = find("tools", "name", name);
    if (t == NULL || (json_is_true(json_object_get(t, "stateless")) && !stateless))
      return 0;
    tool_call(params, stateless, r, t);
    return 1;
  }
  if (strcmp(method, "resources/list") == 0) {
    json_t *list = json_array(), *it;
    size_t i;
    json_array_foreach(json_object_get(fixtures(), "resources"), i, it) {
      json_t *c = json_deep_copy(it);
      json_object_del(c, "contents");
      json_array_append_new(list, c);
    }
    answer(r, json_pack("{s:o}", "resources", list));
  } else if (strcmp(method, "resources/templates/list") == 0) {
    answer(r, json_pack("{s:O}", "resourceTemplates",
                        json_object_get(fixtures(), "resourceTemplates")));
  } else if (strcmp(method, "resources/read") == 0) {
    const char *uri = json_string_value(json_object_get(params, "uri"));
    const json_t *res = find("resources", "uri", uri);
    json_t *tpl = res || uri == NULL ? NULL : template_read(uri);
    if (res)
      answer(r, json_pack("{s:O}", "contents", json_object_get(res, "contents")));
    else if (tpl)
      answer(r, tpl);
    else /* 2026-07-28 made it -32602; 2025-11-25 has -32002 */
      refuse(r, 200, stateless ? ORCH_RPC_INVALID_PARAMS : -32002, "Resource not found",
             json_pack("{s:s?}", "uri", uri));
  } else if (!stateless && (strcmp(method, "resources/subscribe") == 0 ||
                            strcmp(method, "resources/unsubscribe") == 0 ||
                            strcmp(method, "logging/setLevel") == 0)) {
    answer(r, json_object());
  } else if (strcmp(method, "prompts/list") == 0) {
    json_t *list = json_array(), *it;
    size_t i;
    json_array_foreach(json_object_get(fixtures(), "prompts"), i, it) {
      json_t *c = json_deep_copy(it);
      json_object_del(c, "messages");
      json_array_append_new(list, c);
    }
    answer(r, json_pack("{s:o}", "prompts", list));
  } else if (strcmp(method, "prompts/get") == 0) {
    const json_t *p = find("prompts", "name", name);
    if (p == NULL) {
      refuse(r, 200, ORCH_RPC_INVALID_PARAMS, "Unknown prompt", NULL);
      return 1;
    }
    answer(r, json_pack("{s:O, s:o}", "description", json_object_get(p, "description"),
                        "messages",
                        filled(json_object_get(p, "messages"),
                               json_object_get(params, "arguments"))));
  } else if (strcmp(method, "completion/complete") == 0) {
    answer(r, json_pack("{s:{s:[], s:i, s:b}}", "completion", "values", "total", 0, "hasMore", 0));
  } else
    return 0;
  return 1;
}
