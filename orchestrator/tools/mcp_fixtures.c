/* mcp_fixtures.c -- the official MCP conformance suite's fixtures
 * (@modelcontextprotocol/conformance: the tools, resources and prompts its server scenarios call,
 * as its reference "everything" server defines them), added beside our own tools when the
 * server runs with CEREA_MCP_CONFORMANCE_FIXTURES=1 (off by default; refused with production
 * settings: config.c).  Static answers only: a fixture runs nothing and reads nothing, so the
 * mode adds no way in; it exists so the suite can hold the real protocol code (mcp.c) to the
 * spec.  Names all start with test_ or test://, so none can be taken for ours, but the Tasks
 * extension's (greet, slow_compute, failing_job, protocol_error_job, confirm_delete, multi_input:
 * the names its scenarios call), which are stateless only and none of ours either.
 */
#include "mcp.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

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
    "xt\":\"Logging evaluated\"}]}},{\"name\":\"test_sampling\",\"description\":\"Tests server-"
    "initiated sampling (LLM completion request)\",\"args\":{\"prompt\":\"The prompt to send to"
    " the LLM\"},\"ask\":{\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[{\"ro"
    "le\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"{prompt}\"}}],\"maxTokens\":100}},"
    "\"says\":\"LLM response\"},{\"name\":\"test_elicitation\",\"description\":\"Tests server-i"
    "nitiated elicitation (user input request)\",\"args\":{\"message\":\"The message to show th"
    "e user\"},\"ask\":{\"method\":\"elicitation/create\",\"params\":{\"message\":\"{message}\""
    ",\"requestedSchema\":{\"type\":\"object\",\"properties\":{\"response\":{\"type\":\"string\""
    ",\"description\":\"User's response\"}},\"required\":[\"response\"]}}},\"says\":\"User resp"
    "onse\"},{\"name\":\"test_elicitation_sep1034_defaults\",\"description\":\"Tests elicitatio"
    "n with default values per SEP-1034\",\"ask\":{\"method\":\"elicitation/create\",\"params\""
    ":{\"message\":\"Please review and update the form fields with defaults\",\"requestedSchema"
    "\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"description\":\"Us"
    "er name\",\"default\":\"John Doe\"},\"age\":{\"type\":\"integer\",\"description\":\"User a"
    "ge\",\"default\":30},\"score\":{\"type\":\"number\",\"description\":\"User score\",\"defau"
    "lt\":95.5},\"status\":{\"type\":\"string\",\"description\":\"User status\",\"enum\":[\"act"
    "ive\",\"inactive\",\"pending\"],\"default\":\"active\"},\"verified\":{\"type\":\"boolean\""
    ",\"description\":\"Verification status\",\"default\":true}},\"required\":[]}}},\"says\":\""
    "Elicitation completed\"},{\"name\":\"test_elicitation_sep1330_enums\",\"description\":\"Te"
    "sts elicitation with enum schema improvements per SEP-1330\",\"ask\":{\"method\":\"elicita"
    "tion/create\",\"params\":{\"message\":\"Please select options from the enum fields\",\"req"
    "uestedSchema\":{\"type\":\"object\",\"properties\":{\"untitledSingle\":{\"type\":\"string\""
    ",\"description\":\"Select one option\",\"enum\":[\"option1\",\"option2\",\"option3\"]},\"t"
    "itledSingle\":{\"type\":\"string\",\"description\":\"Select one option with titles\",\"one"
    "Of\":[{\"const\":\"value1\",\"title\":\"First Option\"},{\"const\":\"value2\",\"title\":\""
    "Second Option\"},{\"const\":\"value3\",\"title\":\"Third Option\"}]},\"legacyEnum\":{\"typ"
    "e\":\"string\",\"description\":\"Select one option (legacy)\",\"enum\":[\"opt1\",\"opt2\","
    "\"opt3\"],\"enumNames\":[\"Option One\",\"Option Two\",\"Option Three\"]},\"untitledMulti\""
    ":{\"type\":\"array\",\"description\":\"Select multiple options\",\"minItems\":1,\"maxItems"
    "\":3,\"items\":{\"type\":\"string\",\"enum\":[\"option1\",\"option2\",\"option3\"]}},\"tit"
    "ledMulti\":{\"type\":\"array\",\"description\":\"Select multiple options with titles\",\"m"
    "inItems\":1,\"maxItems\":3,\"items\":{\"anyOf\":[{\"const\":\"value1\",\"title\":\"First C"
    "hoice\"},{\"const\":\"value2\",\"title\":\"Second Choice\"},{\"const\":\"value3\",\"title\""
    ":\"Third Choice\"}]}}},\"required\":[]}}},\"says\":\"Elicitation completed\"}],\"resources"
    "\":[{\"uri\":\"test://static-text\",\"name\":\"static-text\",\"title\":\"Static Text Resou"
    "rce\",\"description\":\"A static text resource for testing\",\"mimeType\":\"text/plain\",\""
    "contents\":[{\"uri\":\"test://static-text\",\"mimeType\":\"text/plain\",\"text\":\"This is"
    " the content of the static text resource.\"}]},{\"uri\":\"test://static-binary\",\"name\":"
    "\"static-binary\",\"title\":\"Static Binary Resource\",\"description\":\"A static binary r"
    "esource (image) for testing\",\"mimeType\":\"image/png\",\"contents\":[{\"uri\":\"test://s"
    "tatic-binary\",\"mimeType\":\"image/png\",\"blob\":\"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAA"
    "AAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==\"}]},{\"uri\":\"test://watched"
    "-resource\",\"name\":\"watched-resource\",\"title\":\"Watched Resource\",\"description\":\""
    "A resource a client may subscribe to\",\"mimeType\":\"text/plain\",\"contents\":[{\"uri\":"
    "\"test://watched-resource\",\"mimeType\":\"text/plain\",\"text\":\"Watched resource conten"
    "t\"}]}],\"resourceTemplates\":[{\"uriTemplate\":\"test://template/{id}/data\",\"name\":\"t"
    "emplate\",\"title\":\"Resource Template\",\"description\":\"A resource template with param"
    "eter substitution\",\"mimeType\":\"application/json\"}],\"prompts\":[{\"name\":\"test_simp"
    "le_prompt\",\"title\":\"Simple Test Prompt\",\"description\":\"A simple prompt without arg"
    "uments\",\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"This i"
    "s a simple prompt for testing.\"}}]},{\"name\":\"test_prompt_with_arguments\",\"title\":\""
    "Prompt With Arguments\",\"description\":\"A prompt with required arguments\",\"arguments\""
    ":[{\"name\":\"arg1\",\"description\":\"First test argument\",\"required\":true},{\"name\":"
    "\"arg2\",\"description\":\"Second test argument\",\"required\":true}],\"messages\":[{\"rol"
    "e\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"Prompt with arguments: arg1='{arg1}"
    "', arg2='{arg2}'\"}}]},{\"name\":\"test_prompt_with_embedded_resource\",\"title\":\"Prompt"
    " With Embedded Resource\",\"description\":\"A prompt that includes an embedded resource\","
    "\"arguments\":[{\"name\":\"resourceUri\",\"description\":\"URI of the resource to embed\","
    "\"required\":true}],\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"resource\",\""
    "resource\":{\"uri\":\"{resourceUri}\",\"mimeType\":\"text/plain\",\"text\":\"Embedded reso"
    "urce content for testing.\"}}},{\"role\":\"user\",\"content\":{\"type\":\"text\",\"text\":"
    "\"Please process the embedded resource above.\"}}]},{\"name\":\"test_prompt_with_image\",\""
    "title\":\"Prompt With Image\",\"description\":\"A prompt that includes image content\",\"m"
    "essages\":[{\"role\":\"user\",\"content\":{\"type\":\"image\",\"data\":\"iVBORw0KGgoAAAANS"
    "UhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==\",\"mimeTy"
    "pe\":\"image/png\"}},{\"role\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"Please a"
    "nalyze the image above.\"}}]}]}";

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

static const char *const mrtr_tools[][2] = {
    {"test_input_required_result_elicitation", "MRTR: returns InputRequiredResult with elicitation request"},
    {"test_input_required_result_sampling", "MRTR: returns InputRequiredResult with sampling request"},
    {"test_input_required_result_list_roots", "MRTR: returns InputRequiredResult with roots/list request"},
    {"test_input_required_result_request_state", "MRTR: round-trips requestState"},
    {"test_input_required_result_multiple_inputs", "MRTR: several input requests at once"},
    {"test_input_required_result_multi_round", "MRTR: two rounds of input"},
    {"test_input_required_result_tampered_state", "MRTR: refuses a requestState changed by the client"},
    {"test_input_required_result_capabilities", "MRTR: asks only what the client declared"},
};

/* The Tasks extension's fixtures (task_fixture, below). */
static const char *const task_tools[][3] = {
    /* name, description, taskSupport */
    {"greet", "Says hello to {name} (never a task)", NULL},
    {"slow_compute", "Sleeps `seconds` seconds, then answers (a task)", "optional"},
    {"failing_job", "Fails as a tool after ~1 s (a task)", "required"},
    {"protocol_error_job", "Fails with a protocol error (a task)", "optional"},
    {"confirm_delete", "Asks the client to confirm deleting {filename}, then answers (a task)",
     "optional"},
    {"multi_input", "Asks the client two things at once, then answers (a task)", "optional"},
    {"test_tool_with_task", "Asks the client's name (InputRequiredResult), then greets it as a task",
     "required"},
};
enum { TASK_GREET, TASK_SLOW, TASK_FAILING, TASK_PROTOCOL_ERROR, TASK_CONFIRM, TASK_MULTI, TASK_COMPOSED };

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
    json_t *props = json_object(), *required = json_array(), *d;
    const char *k;
    json_object_foreach(json_object_get(t, "args"), k, d) {
      json_object_set_new(props, k, json_pack("{s:s, s:O}", "type", "string", "description", d));
      json_array_append_new(required, json_string(k));
    }
    json_array_append_new(tools, json_pack("{s:O, s:O, s:{s:s, s:o, s:o}}", "name",
                                           json_object_get(t, "name"), "description",
                                           json_object_get(t, "description"), "inputSchema",
                                           "type", "object", "properties", props, "required",
                                           required));
  }
  for (size_t k = 0; stateless && k < SBX_ARRAY_SIZE(mrtr_tools); k++)
    json_array_append_new(tools, json_pack("{s:s, s:s, s:{s:s, s:{}}}", "name", mrtr_tools[k][0],
                                           "description", mrtr_tools[k][1], "inputSchema", "type",
                                           "object", "properties"));
  for (size_t k = 0; stateless && k < SBX_ARRAY_SIZE(task_tools); k++) {
    json_t *tt =
        json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s}, s:{s:s}, s:{s:s}}}}", "name", task_tools[k][0],
                  "description", task_tools[k][1], "inputSchema", "type", "object", "properties",
                  "name", "type", "string", "seconds", "type", "number", "label", "type", "string");
    json_object_set_new(json_object_get(json_object_get(tt, "inputSchema"), "properties"),
                        "filename", json_pack("{s:s}", "type", "string"));
    if (task_tools[k][2])
      json_object_set_new(tt, "execution", json_pack("{s:s}", "taskSupport", task_tools[k][2]));
    json_array_append_new(tools, tt);
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

/* ---- multi-round fixtures (2026-07-28's InputRequiredResult, SEP-2322) --------------------- */

/* requestState is "<hmac>:<json>", the HMAC under a key of this process: what a client changes
 * is refused. */
static const unsigned char *state_key(void) {
  static unsigned char key[ORCH_CHAT_SECRET_LEN];
  static int have;
  if (!have && sbx_random(key, sizeof(key)) == 0)
    have = 1;
  return have ? key : NULL;
}

static json_t *state_sign(json_t *state) { /* steals state */
  char *text = orch__json_dump(state, NULL), mac[65];
  json_decref(state);
  if (text == NULL || state_key() == NULL ||
      orch__secret_mac(state_key(), "conformance request state", text, strlen(text), mac) != 0) {
    sbx_free(text);
    return NULL;
  }
  json_t *s = json_sprintf("%s:%s", mac, text);
  sbx_free(text);
  return s;
}

/* The state a request carries: 1 and *out (new, or NULL when none was sent); 0: tampered. */
static int state_read(const json_t *params, json_t **out) {
  *out = NULL;
  const json_t *raw = json_object_get(params, "requestState");
  if (raw == NULL)
    return 1;
  const char *s = json_string_value(raw), *colon = s ? strchr(s, ':') : NULL;
  char mac[65];
  if (colon == NULL || colon - s != 64 || state_key() == NULL ||
      orch__secret_mac(state_key(), "conformance request state", colon + 1, strlen(colon + 1),
                       mac) != 0 ||
      strncmp(mac, s, 64) != 0)
    return 0;
  *out = json_loads(colon + 1, 0, NULL);
  return *out != NULL;
}

static json_t *elicit(const char *message, const char *field, const char *type) {
  return json_pack("{s:s, s:{s:s, s:{s:s, s:{s:{s:s}}, s:[s]}}}", "method", "elicitation/create",
                   "params", "message", message, "requestedSchema", "type", "object",
                   "properties", field, "type", type, "required", field);
}

static json_t *sample(const char *text, int max_tokens) {
  return json_pack("{s:s, s:{s:[{s:s, s:{s:s, s:s}}], s:i}}", "method", "sampling/createMessage",
                   "params", "messages", "role", "user", "content", "type", "text", "text", text,
                   "maxTokens", max_tokens);
}

static json_t *text_result(const char *text) {
  return json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);
}

/* An InputRequiredResult (requests stolen; state stolen, NULL: none). */
static json_t *input_required(json_t *requests, json_t *state) {
  json_t *r = json_pack("{s:s, s:o}", "resultType", "input_required", "inputRequests", requests);
  if (state)
    json_object_set_new(r, "requestState", state_sign(state));
  return r;
}

/* inputResponses[key].content[field] as text ("unknown" when it is not a string). */
static const char *said(const json_t *ir, const char *key, const char *field) {
  const char *v =
      json_string_value(json_object_get(json_object_get(json_object_get(ir, key), "content"), field));
  return v ? v : "unknown";
}

static const char *kind_of(const json_t *st) {
  return json_string_value(json_object_get(st, "kind")) ?: "";
}

/* The multi-round prompt: its message once the client said its context. */
static json_t *mrtr_prompt(const char *t, const json_t *ir) {
  if (strcmp(t, "prompt") != 0)
    return NULL;
  if (json_object_get(ir, "user_context") == NULL)
    return input_required(
        json_pack("{s:o}", "user_context",
                  elicit("What context should the prompt use?", "context", "string")),
        NULL);
  char text[600];
  snprintf(text, sizeof(text), "Prompt with context: %s", said(ir, "user_context", "context"));
  return json_pack("{s:[{s:s, s:{s:s, s:s}}]}", "messages", "role", "user", "content", "type",
                   "text", "text", text);
}

/* The tools that ask the client one thing (elicitation, sampling, roots) and answer with it. */
static json_t *mrtr_one_question(const char *t, const json_t *ir) {
  char text[600];
  json_t *res = NULL;
  if (strcmp(t, "elicitation") == 0) {
    if (json_object_get(ir, "user_name")) {
      snprintf(text, sizeof(text), "Hello, %s!", said(ir, "user_name", "name"));
      res = text_result(text);
    } else
      res = input_required(
          json_pack("{s:o}", "user_name", elicit("What is your name?", "name", "string")), NULL);
  } else if (strcmp(t, "sampling") == 0) {
    if (json_object_get(ir, "sample_request")) {
      const char *got = json_string_value(
          json_object_get(json_object_get(json_object_get(ir, "sample_request"), "content"), "text"));
      snprintf(text, sizeof(text), "Sampling result: %s", got ? got : "no response");
      res = text_result(text);
    } else
      res = input_required(json_pack("{s:o}", "sample_request",
                                     sample("What is the capital of France?", 100)),
                           NULL);
  } else if (strcmp(t, "list_roots") == 0) {
    if (json_object_get(ir, "roots_request")) {
      snprintf(text, sizeof(text), "Found %zu root(s)",
               json_array_size(json_object_get(json_object_get(ir, "roots_request"), "roots")));
      res = text_result(text);
    } else
      res = input_required(
          json_pack("{s:{s:s, s:{}}}", "roots_request", "method", "roots/list", "params"), NULL);
  }
  return res;
}

/* The tools whose rounds are told apart by their requestState (st, verified; NULL: none). */
static json_t *mrtr_stateful(const char *t, const json_t *ir, const json_t *st) {
  char text[600];
  json_t *res = NULL;
  if (strcmp(t, "request_state") == 0) {
    if (st && strcmp(kind_of(st), "request-state") == 0 &&
        json_is_true(json_object_get(json_object_get(json_object_get(ir, "confirm"), "content"), "ok")))
      res = text_result("state-ok: requestState validated");
    else
      res = input_required(json_pack("{s:o}", "confirm", elicit("Please confirm", "ok", "boolean")),
                           json_pack("{s:s}", "kind", "request-state"));
  } else if (strcmp(t, "multiple_inputs") == 0) {
    if (st && strcmp(kind_of(st), "multiple-inputs") == 0 && json_object_get(ir, "user_name") &&
        json_object_get(ir, "greeting") && json_object_get(ir, "client_roots")) {
      const char *g = json_string_value(
          json_object_get(json_object_get(json_object_get(ir, "greeting"), "content"), "text"));
      snprintf(text, sizeof(text), "Name: %s; Greeting: %s; Roots: %zu",
               said(ir, "user_name", "name"), g ? g : "Hello there!",
               json_array_size(json_object_get(json_object_get(ir, "client_roots"), "roots")));
      res = text_result(text);
    } else
      res = input_required(
          json_pack("{s:o, s:o, s:{s:s, s:{}}}", "user_name",
                    elicit("What is your name?", "name", "string"), "greeting",
                    sample("Generate a greeting", 50), "client_roots", "method", "roots/list",
                    "params"),
          json_pack("{s:s}", "kind", "multiple-inputs"));
  } else if (strcmp(t, "multi_round") == 0) {
    json_int_t round = json_integer_value(json_object_get(st, "round"));
    if (round == 1 && json_object_get(ir, "step1"))
      res = input_required(
          json_pack("{s:o}", "step2",
                    elicit("Step 2: What is your favorite color?", "color", "string")),
          json_pack("{s:i, s:s}", "round", 2, "name", said(ir, "step1", "name")));
    else if (round == 2 && json_object_get(ir, "step2")) {
      const char *who = json_string_value(json_object_get(st, "name"));
      snprintf(text, sizeof(text), "Multi-round complete for %s who likes %s",
               who ? who : "friend", said(ir, "step2", "color"));
      res = text_result(text);
    } else
      res = input_required(
          json_pack("{s:o}", "step1", elicit("Step 1: What is your name?", "name", "string")),
          json_pack("{s:i}", "round", 1));
  } else if (strcmp(t, "tampered_state") == 0) {
    if (st && strcmp(kind_of(st), "tamper-test") == 0 && json_object_get(ir, "confirm"))
      res = text_result("integrity-ok: state verified");
    else
      res = input_required(json_pack("{s:o}", "confirm", elicit("Please confirm", "ok", "boolean")),
                           json_pack("{s:s}", "kind", "tamper-test"));
  }
  return res;
}

/* The capabilities tool: asks what the client declared it can be asked, then names what it got. */
static json_t *mrtr_capabilities(const json_t *ir, const json_t *caps) {
  char text[600];
  const char *k;
  json_t *v, *res;
  json_t *asks = json_object();
  if (json_object_get(caps, "elicitation"))
    json_object_set_new(asks, "elicit_input", elicit("Elicitation input", "value", "string"));
  if (json_object_get(caps, "sampling"))
    json_object_set_new(asks, "sample_input", sample("Sample request", 50));
  if (json_object_size(ir) > 0) {
    size_t n = (size_t)snprintf(text, sizeof(text), "capabilities-ok: received ");
    int first = 1;
    json_object_foreach((json_t *)ir, k, v) {
      n += (size_t)snprintf(text + n, n < sizeof(text) ? sizeof(text) - n : 0, "%s%s",
                            first ? "" : ",", k);
      first = 0;
    }
    json_decref(asks);
    res = text_result(text);
  } else if (json_object_size(asks) == 0) {
    json_decref(asks);
    res = text_result("No supported capabilities declared");
  } else
    res = input_required(asks, json_pack("{s:s}", "kind", "capabilities-test"));
  return res;
}

/* The multi-round tools and prompt: 1 when name is one (answered into r). */
static int mrtr(const char *method, const char *name, const json_t *params,
                struct orch_mcp_fixture_reply *r) {
  if (name == NULL || strncmp(name, "test_input_required_result_", 27) != 0)
    return 0;
  const char *t = name + 27;
  const json_t *ir = json_object_get(params, "inputResponses");
  const json_t *caps = json_object_get(json_object_get(params, "_meta"),
                                       "io.modelcontextprotocol/clientCapabilities");
  const char *k;
  json_t *v;
  int bad = ir != NULL && !json_is_object(ir);
  json_object_foreach((json_t *)ir, k, v) bad |= !json_is_object(v);
  if (bad) {
    refuse(r, 200, ORCH_RPC_INVALID_PARAMS,
           "inputResponses is an object of responses, each an object", NULL);
    return 1;
  }
  json_t *st;
  if (!state_read(params, &st)) {
    refuse(r, 200, ORCH_RPC_INVALID_PARAMS, "requestState integrity check failed", NULL);
    return 1;
  }
  json_t *res;
  if (strcmp(method, "prompts/get") == 0)
    res = mrtr_prompt(t, ir);
  else if (strcmp(t, "capabilities") == 0)
    res = mrtr_capabilities(ir, caps);
  else if ((res = mrtr_one_question(t, ir)) == NULL)
    res = mrtr_stateful(t, ir, st);
  json_decref(st);
  if (res == NULL)
    return 0;
  answer(r, res);
  return 1;
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
  const json_t *ask = json_object_get(t, "ask");
  if (ask != NULL) { /* the server's own request first: the result follows its answer */
    r->status = 200;
    r->ask = filled(ask, json_object_get(params, "arguments"));
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

json_t *orch__mcp_fixture_answered(const char *tool, const json_t *result, const json_t *error) {
  const json_t *t = find("tools", "name", tool);
  const char *says = json_string_value(json_object_get(t, "says"));
  char text[1500];
  if (error != NULL) {
    snprintf(text, sizeof(text), "%s not supported or error: %s",
             strcmp(says ?: "", "LLM response") == 0 ? "Sampling" : "Elicitation",
             json_string_value(json_object_get(error, "message")) ?: "(no message)");
  } else if (strcmp(says ?: "", "LLM response") == 0) {
    const char *said = json_string_value(json_object_get(json_object_get(result, "content"), "text"));
    if (said == NULL)
      said = json_string_value(json_object_get(
          json_object_get(json_object_get(result, "message"), "content"), "text"));
    snprintf(text, sizeof(text), "LLM response: %s", said ? said : "No response");
  } else {
    const json_t *content = json_object_get(result, "content");
    char *c = content ? orch__json_dump(content, NULL) : NULL;
    snprintf(text, sizeof(text), "%s: action=%s, content=%s", says ?: "Elicitation completed",
             json_string_value(json_object_get(result, "action")) ?: "undefined", c ? c : "{}");
    sbx_free(c);
  }
  return json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);
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

/* ---- the Tasks extension's fixtures (SEP-2663, stateless) -------------------------------------
 * greet answers at once; slow_compute (its `seconds`), failing_job and protocol_error_job are
 * tasks for a client that negotiated the extension.  Nothing runs: a fixture task's id says its
 * kind and when it ends ("fixture-<kind>-<ms>"), and tasks/get reads it against the clock; only
 * a cancel is remembered (the last FIXTURE_CANCELS of them, in this process).
 * The tasks that ask the client for input (confirm_delete: one elicitation; multi_input: two at
 * once; test_tool_with_task: an InputRequiredResult first, then a task with the name it was
 * told) are held in memory, the last FIXTURE_ASKS of them ("fixture-ask-<n>"): what each still
 * asks (a bit per key of fixture_keys), and the text it ends with once nothing is pending. */

#define FIXTURE_CANCELS 64
static char fixture_cancelled[FIXTURE_CANCELS][64];
static unsigned fixture_cancels;

#define FIXTURE_ASKS 64
static const char *const fixture_keys[] = {"confirm", "name"};
static struct fixture_ask {
  unsigned n;       /* its number in its id (0: the slot is free) */
  unsigned pending; /* bit k: fixture_keys[k] is asked and not answered */
  int cancelled;
  long long made, last;
  char text[300]; /* the result's text once nothing is pending */
} fixture_asks[FIXTURE_ASKS];
static unsigned fixture_asks_made;

static json_t *fixture_task(const char *id, const char *status, long long made, long long last) {
  return orch__mcp_task_json(id, status, made, last, 500);
}

/* A new input-asking task (the oldest one's slot reused): its CreateTaskResult. */
static json_t *ask_task_new(unsigned pending, const char *text, long long now) {
  unsigned n = ++fixture_asks_made;
  struct fixture_ask *a = &fixture_asks[n % FIXTURE_ASKS];
  *a = (struct fixture_ask){.n = n, .pending = pending, .made = now, .last = now};
  snprintf(a->text, sizeof(a->text), "%s", text);
  char id[64];
  snprintf(id, sizeof(id), "fixture-ask-%u", n);
  json_t *t = fixture_task(id, "working", now, now);
  json_object_set_new(t, "resultType", json_string("task"));
  return t;
}

static struct fixture_ask *ask_task_of(const char *id) {
  unsigned n;
  char end;
  if (id == NULL || sscanf(id, "fixture-ask-%u%c", &n, &end) != 1 || n == 0)
    return NULL;
  struct fixture_ask *a = &fixture_asks[n % FIXTURE_ASKS];
  return a->n == n ? a : NULL;
}

/* tasks/get, tasks/update and tasks/cancel of an input-asking task. */
static void ask_task_method(const char *method, const char *id, struct fixture_ask *a,
                            const json_t *params, long long now, struct orch_mcp_fixture_reply *r) {
  if (strcmp(method, "tasks/cancel") == 0) {
    if (a->pending && !a->cancelled) {
      a->cancelled = 1;
      a->last = now;
    }
    answer(r, json_object());
    return;
  }
  if (strcmp(method, "tasks/update") == 0) {
    const json_t *ir = json_object_get(params, "inputResponses");
    if (!json_is_object(ir)) {
      refuse(r, 200, ORCH_RPC_INVALID_PARAMS, "tasks/update: params.inputResponses (an object) is required",
             NULL);
      return;
    }
    for (size_t k = 0; k < SBX_ARRAY_SIZE(fixture_keys) && !a->cancelled; k++)
      if ((a->pending & (1u << k)) && json_object_get(ir, fixture_keys[k])) {
        a->pending &= ~(1u << k); /* answered (keys it does not ask are ignored) */
        a->last = now;
      }
    answer(r, json_object()); /* an ack: what it did shows in the next tasks/get */
    return;
  }
  json_t *t;
  if (a->cancelled)
    t = fixture_task(id, "cancelled", a->made, a->last);
  else if (a->pending) {
    json_t *asks = json_object();
    for (size_t k = 0; k < SBX_ARRAY_SIZE(fixture_keys); k++)
      if (a->pending & (1u << k))
        json_object_set_new(asks, fixture_keys[k],
                            k == 0 ? elicit("Confirm?", "confirm", "boolean")
                                   : elicit("What is your name?", "name", "string"));
    t = fixture_task(id, "input_required", a->made, a->last);
    json_object_set_new(t, "inputRequests", asks);
  } else {
    t = fixture_task(id, "completed", a->made, a->last);
    json_object_set_new(t, "result", text_result(a->text));
  }
  answer(r, t);
}

/* A tools/call of a task tool: 1 when name is one (answered into r). */
static int task_tool_call(const json_t *params, long long now, struct orch_mcp_fixture_reply *r) {
  const char *name = json_string_value(json_object_get(params, "name"));
  const json_t *args = json_object_get(params, "arguments");
  int k = -1;
  for (int i = 0; name && i < (int)SBX_ARRAY_SIZE(task_tools); i++)
    if (strcmp(name, task_tools[i][0]) == 0)
      k = i;
  if (k < 0)
    return 0;
  char text[300];
  if (k == TASK_GREET) {
    snprintf(text, sizeof(text), "Hello, %.200s!",
             json_string_value(json_object_get(args, "name")) ?: "World");
    answer(r, text_result(text));
    return 1;
  }
  if (!orch__mcp_tasks_negotiated(params)) { /* no extension: answered at once, as a plain call */
    if (strcmp(task_tools[k][2], "required") == 0)
      refuse(r, 400, ORCH_RPC_MISSING_CAPABILITY,
             "Missing required client capability: this tool runs only as a task (the "
             "extension io.modelcontextprotocol/tasks)",
             json_pack("{s:{s:{s:{}}}}", "requiredCapabilities", "extensions",
                       "io.modelcontextprotocol/tasks"));
    else if (k == TASK_PROTOCOL_ERROR)
      refuse(r, 200, ORCH_RPC_INTERNAL, "protocol_error_job: an internal error", NULL);
    else if (k == TASK_CONFIRM || k == TASK_MULTI)
      answer(r, orch__tool_error_result("This tool asks for input as a task only."));
    else
      answer(r, text_result("computed"));
    return 1;
  }
  if (k == TASK_CONFIRM) {
    snprintf(text, sizeof(text), "Deleted %.200s",
             json_string_value(json_object_get(args, "filename")) ?: "the file");
    answer(r, ask_task_new(1u << 0, text, now));
    return 1;
  }
  if (k == TASK_MULTI) {
    answer(r, ask_task_new(1u << 0 | 1u << 1, "Both inputs received", now));
    return 1;
  }
  if (k == TASK_COMPOSED) { /* the input first (round 1), then the task that uses it */
    const json_t *ir = json_object_get(params, "inputResponses");
    if (json_object_get(ir, "user_name") == NULL) {
      answer(r, input_required(
                    json_pack("{s:o}", "user_name", elicit("What is your name?", "name", "string")),
                    NULL));
      return 1;
    }
    snprintf(text, sizeof(text), "Hello, %.200s!", said(ir, "user_name", "name"));
    answer(r, ask_task_new(0, text, now));
    return 1;
  }
  const json_t *sec = json_object_get(args, "seconds");
  long long wait = k == TASK_SLOW      ? (long long)(json_number_value(sec) * 1000)
                   : k == TASK_FAILING ? 1000
                                       : 300;
  char id[64];
  snprintf(id, sizeof(id), "fixture-%d-%lld-%lld", k, now, now + (wait > 0 ? wait : 0));
  json_t *t = fixture_task(id, "working", now, now);
  json_object_set_new(t, "resultType", json_string("task"));
  answer(r, t);
  return 1;
}

/* The task tools (tools/call), and tasks/get, tasks/cancel, tasks/update of the tasks they made. */
static int task_fixture(const char *method, const json_t *params,
                        struct orch_mcp_fixture_reply *r) {
  long long now = sbx_now_wall_ms();
  if (strcmp(method, "tools/call") == 0)
    return task_tool_call(params, now, r);
  int get = strcmp(method, "tasks/get") == 0, cancel = strcmp(method, "tasks/cancel") == 0;
  int update = strcmp(method, "tasks/update") == 0;
  const char *id = json_string_value(json_object_get(params, "taskId"));
  struct fixture_ask *a = (get || cancel || update) ? ask_task_of(id) : NULL;
  if (a != NULL) {
    ask_task_method(method, id, a, params, now, r);
    return 1;
  }
  int k;
  long long made, due;
  if (!(get || cancel || update) || id == NULL ||
      sscanf(id, "fixture-%d-%lld-%lld", &k, &made, &due) != 3 || strlen(id) >= 64)
    return 0;
  int cancelled = 0;
  for (unsigned i = 0; i < FIXTURE_CANCELS; i++)
    cancelled |= strcmp(fixture_cancelled[i], id) == 0;
  if (update) { /* a task that asks nothing: the answers are ignored */
    answer(r, json_object());
    return 1;
  }
  if (cancel) {
    if (!cancelled && now < due)
      snprintf(fixture_cancelled[fixture_cancels++ % FIXTURE_CANCELS], 64, "%s", id);
    answer(r, json_object());
    return 1;
  }
  json_t *t;
  if (cancelled)
    t = fixture_task(id, "cancelled", made, made);
  else if (now < due)
    t = fixture_task(id, "working", made, made);
  else if (k == TASK_PROTOCOL_ERROR) {
    t = fixture_task(id, "failed", made, due);
    json_object_set_new(t, "error",
                        json_pack("{s:i, s:s}", "code", ORCH_RPC_INTERNAL, "message",
                                  "protocol_error_job: an internal error"));
  } else {
    t = fixture_task(id, "completed", made, due);
    json_object_set_new(t, "result",
                        json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                                  k == TASK_FAILING ? "failing_job failed" : "computed", "isError",
                                  k == TASK_FAILING));
  }
  answer(r, t);
  return 1;
}

int orch__mcp_fixture_method(const char *method, const json_t *params, int stateless,
                             struct orch_mcp_fixture_reply *r) {
  memset(r, 0, sizeof(*r));
  if (fixtures() == NULL)
    return 0;
  const char *name = json_string_value(json_object_get(params, "name"));
  if (stateless && task_fixture(method, params, r))
    return 1;
  if (stateless && (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0) &&
      mrtr(method, name, params, r))
    return 1;
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
    if (stateless)
      json_array_append_new(list, json_pack("{s:s, s:s}", "name", "test_input_required_result_prompt",
                                            "description",
                                            "MRTR: prompt that requires elicitation input"));
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
