/* mcp_task.c -- the Tasks extension's (SEP-2663, io.modelcontextprotocol/tasks) two shapes that
 * the protocol (mcp.c) and the conformance fixtures (mcp_fixtures.c) both use: whether a request
 * negotiated the extension, and a task's own fields.  What it does not do: know runs, calls or
 * sessions (mcp.c makes a task of a run; the fixtures of their scripted jobs).
 */
#include "mcp.h"

#include <stdio.h>
#include <time.h>

int orch__mcp_tasks_negotiated(const json_t *params) {
  const json_t *caps = json_object_get(json_object_get(params, "_meta"),
                                       "io.modelcontextprotocol/clientCapabilities");
  return json_is_object(json_object_get(json_object_get(caps, "extensions"), ORCH_MCP_TASKS_EXT));
}

/* ms since the epoch as ISO 8601 (UTC, milliseconds) */
static void iso_ms(long long ms, char out[32]) {
  time_t sec = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&sec, &tm);
  size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

json_t *orch__mcp_task_json(const char *id, const char *status, long long made, long long last,
                            int poll_ms) {
  char a[32], b[32];
  iso_ms(made, a);
  iso_ms(last, b);
  return json_pack("{s:s, s:s, s:s, s:s, s:n, s:i}", "taskId", id, "status", status, "createdAt", a,
                   "lastUpdatedAt", b, "ttlMs", "pollIntervalMs", poll_ms);
}

