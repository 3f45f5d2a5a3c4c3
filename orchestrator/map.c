/* map.c -- a small open-addressing hash map from string ids to objects (chats, live runs).
 * Keys are borrowed from the values.  Linear probing with tombstones; grows at 70 % load.
 * What it does not do: own keys or values, or iterate in any defined order. */
#include "internal.h"

#include <string.h>

static const char TOMB[] = "";

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

void orch__map_init(struct orch_map *m) { memset(m, 0, sizeof(*m)); }

void orch__map_free(struct orch_map *m) {
  sbx_free(m->keys);
  sbx_free(m->vals);
  memset(m, 0, sizeof(*m));
}

static size_t find(const struct orch_map *m, const char *key, int *found) {
  size_t mask = m->cap - 1, i = hash(key) & mask, tomb = (size_t)-1;
  for (;;) {
    const char *k = m->keys[i];
    if (k == NULL) {
      *found = 0;
      return tomb != (size_t)-1 ? tomb : i;
    }
    if (k == TOMB) {
      if (tomb == (size_t)-1)
        tomb = i;
    } else if (strcmp(k, key) == 0) {
      *found = 1;
      return i;
    }
    i = (i + 1) & mask;
  }
}

void *orch__map_get(const struct orch_map *m, const char *key) {
  if (m->cap == 0)
    return NULL;
  int found;
  size_t i = find(m, key, &found);
  return found ? m->vals[i] : NULL;
}

static int grow(struct orch_map *m) {
  size_t ncap = m->cap ? m->cap * 2 : 64;
  if (m->len * 2 < m->cap)
    ncap = m->cap; /* mostly tombstones: rehash in place size */
  struct orch_map n = {.cap = ncap};
  n.keys = sbx_calloc(ncap, sizeof(*n.keys));
  n.vals = sbx_calloc(ncap, sizeof(*n.vals));
  if (n.keys == NULL || n.vals == NULL) {
    sbx_free(n.keys);
    sbx_free(n.vals);
    return SBX_ENOMEM;
  }
  for (size_t i = 0; i < m->cap; i++)
    if (m->keys[i] != NULL && m->keys[i] != TOMB) {
      int found;
      size_t j = find(&n, m->keys[i], &found);
      n.keys[j] = m->keys[i];
      n.vals[j] = m->vals[i];
      n.len++;
    }
  orch__map_free(m);
  *m = n;
  return 0;
}

int orch__map_put(struct orch_map *m, const char *key, void *val) {
  if ((m->len + m->tombs + 1) * 10 >= m->cap * 7) {
    int rc = grow(m);
    if (rc != 0)
      return rc;
  }
  int found;
  size_t i = find(m, key, &found);
  if (!found) {
    if (m->keys[i] == TOMB)
      m->tombs--;
    m->len++;
  }
  m->keys[i] = key;
  m->vals[i] = val;
  return 0;
}

void orch__map_del(struct orch_map *m, const char *key) {
  if (m->cap == 0)
    return;
  int found;
  size_t i = find(m, key, &found);
  if (!found)
    return;
  m->keys[i] = TOMB;
  m->vals[i] = NULL;
  m->len--;
  m->tombs++;
}

int orch__map_next(const struct orch_map *m, size_t *i, const char **key, void **val) {
  for (; *i < m->cap; (*i)++)
    if (m->keys[*i] != NULL && m->keys[*i] != TOMB) {
      *key = m->keys[*i];
      *val = m->vals[*i];
      (*i)++;
      return 1;
    }
  return 0;
}
