/* bundle.c -- the MIME bundles a run shows besides its output (the cell's value, its display()
 * bundles), as the orchestrator takes them from a page: checked, and bounded.
 *
 * A bundle is a JSON object of MIME type -> representation, Jupyter's shape: `text/plain` (a
 * string, required), and whatever richer forms the object offered (`text/html`, `image/png` as
 * base64, `image/svg+xml`, ...: strings), plus `application/json`, which is the JSON value itself
 * (as in Jupyter's notebooks, not a string holding JSON text).  A bundle that is not one is
 * malformed (the page's request gets 400).  Sizes are bounded, not refused, so a result is never
 * lost for a big picture: `text/plain` is cut at ORCH_OUT_CHARS characters; the rich parts (every
 * entry but text/plain) of one bundle may take ORCH_BUNDLE_BYTES, and those of a run's value and
 * displays together ORCH_SHOWN_BYTES: a bundle past either keeps its text/plain only, and a note
 * says what was left out.  The bounds keep every event that carries bundles (a `display` on the
 * chat's stream, the run stream's `end` with the whole run object) within what one event stream
 * sends at once, and the run object every reader receives within a few MiB.
 *
 * What it does not do: render bundles or decide which one is the value (the kernel does).
 */
#include "internal.h"

#include <string.h>

#define BUNDLE_KEYS     16
#define MIME_TYPE_BYTES 127

/* RFC 6838's restricted-name characters. */
static int mime_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         strchr("!#$&^_.+-", c) != NULL;
}

/* "type/subtype", each part one or more restricted-name characters. */
static int mime_type_ok(const char *k) {
  size_t n = strlen(k), slash = strcspn(k, "/");
  if (n == 0 || n > MIME_TYPE_BYTES || slash == 0 || slash >= n - 1)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (i != slash && !mime_char(k[i]))
      return 0;
  return 1;
}

int orch__bundle_valid(const json_t *b, char *why, size_t cap) {
  const char *bad = NULL;
  if (!json_is_object(b))
    bad = "a MIME bundle: an object of MIME type -> string, with text/plain";
  else if (json_object_size(b) > BUNDLE_KEYS)
    bad = "a MIME bundle has at most 16 MIME types";
  else if (!json_is_string(json_object_get(b, "text/plain")))
    bad = "a MIME bundle needs text/plain (a string)";
  const char *k;
  json_t *v;
  if (bad == NULL)
    json_object_foreach((json_t *)b, k, v) {
      if (!mime_type_ok(k)) {
        bad = "a MIME bundle's keys are MIME types (type/subtype)";
        break;
      }
      if (!json_is_string(v) && strcmp(k, "application/json") != 0) {
        bad = "a MIME bundle's values are strings (application/json: any JSON value)";
        break;
      }
    }
  if (bad != NULL)
    snprintf(why, cap, "%s", bad);
  return bad == NULL ? 0 : SBX_EINVAL;
}

/* Bytes one entry takes as JSON text (a string's own bytes: what its escaping adds is small
 * against the bounds, and the whole bundle is measured once it is kept). */
static size_t entry_bytes(const json_t *v) {
  if (json_is_string(v))
    return json_string_length(v);
  char *t = orch__json_dump(v, NULL);
  size_t n = t ? strlen(t) : SIZE_MAX;
  sbx_free(t);
  return n;
}

static void note(json_t *notes, const char *text) {
  if (notes != NULL)
    json_array_append_new(notes, json_string(text));
}

json_t *orch__bundle_keep(const json_t *b, size_t *budget, const char *what, json_t *notes) {
  json_t *kept = json_object();
  if (kept == NULL)
    return NULL;
  const char *plain = json_string_value(json_object_get(b, "text/plain"));
  size_t len = json_string_length(json_object_get(b, "text/plain")), i = 0, chars = 0;
  for (; i < len && chars < ORCH_OUT_CHARS; chars++)
    i += orch__utf8_next(plain + i, len - i, NULL);
  if (json_object_set_new(kept, "text/plain", json_stringn(plain, i)) != 0) {
    json_decref(kept);
    return NULL;
  }
  char text[300];
  if (i < len) {
    snprintf(text, sizeof(text), "%s: its text/plain was cut at %d characters", what,
             ORCH_OUT_CHARS);
    note(notes, text);
  }
  size_t rich = 0;
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)b, k, v) {
    if (strcmp(k, "text/plain") != 0)
      rich += entry_bytes(v);
  }
  if (rich > ORCH_BUNDLE_BYTES || rich > *budget) {
    snprintf(text, sizeof(text),
             rich > ORCH_BUNDLE_BYTES
                 ? "%s: shown as text only: its rich forms take %zu KiB, more than the %u KiB a "
                   "bundle may"
                 : "%s: shown as text only: its rich forms (%zu KiB) would take the run's "
                   "bundles past %u KiB",
             what, (rich + 1023) / 1024,
             (rich > ORCH_BUNDLE_BYTES ? ORCH_BUNDLE_BYTES : ORCH_SHOWN_BYTES) / 1024);
    note(notes, text);
    return kept;
  }
  json_object_foreach((json_t *)b, k, v) {
    if (strcmp(k, "text/plain") != 0 && json_object_set(kept, k, v) != 0) {
      json_decref(kept);
      return NULL;
    }
  }
  *budget -= rich;
  return kept;
}
