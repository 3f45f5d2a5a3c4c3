/* fence.c -- fencing by lease epoch, for several nodes on one PostgreSQL store.
 *
 * Once this node took a lease, each write that belongs to a chat (st__submit_fenced)
 * is checked by the writer, in its own savepoint before its statements, against the epoch this
 * node took that chat's lease at (LEASE_FENCE: the row locked FOR SHARE until the transaction
 * ends, once per chat per transaction); a write whose fence fails is refused (SBX_EFENCED) and
 * store_on_fenced's callback hears of it.  The fences live in st->fences (under st->mu: the loop
 * sets them, the writer reads them); one let go stays until the writes queued before are through.
 *
 * What it does not do: take or renew leases (nodes.c sets and releases the fences as it does), or
 * run the writes (writer.c asks st__fence_check before each fenced write).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static int fence_cmp(const void *a, const void *b) {
  return strcmp(((const struct st_fence *)a)->chat, ((const struct st_fence *)b)->chat);
}

/* Under st->mu. */
static struct st_fence *fence_find(struct store *st, const char *chat_id) {
  struct st_fence key;
  snprintf(key.chat, sizeof key.chat, "%s", chat_id);
  return st->nfences ? bsearch(&key, st->fences, st->nfences, sizeof key, fence_cmp) : NULL;
}

/* A lease taken: its epoch is what this node's writes of the chat are fenced by. */
int st__fence_set(struct store *st, const char *chat_id, const char *node_id, int64_t epoch) {
  int rc = 0;
  pthread_mutex_lock(&st->mu);
  snprintf(st->fence_node, sizeof st->fence_node, "%s", node_id);
  struct st_fence *f = fence_find(st, chat_id);
  if (f == NULL && st->nfences == st->capfences) {
    size_t cap = st->capfences ? st->capfences * 2 : 64;
    struct st_fence *v = sbx_realloc(st->fences, cap * sizeof *v);
    if (v == NULL)
      rc = SBX_ENOMEM;
    else
      st->fences = v, st->capfences = cap;
  }
  if (f == NULL && rc == 0) {
    size_t i = 0; /* the sorted position */
    while (i < st->nfences && strcmp(st->fences[i].chat, chat_id) < 0)
      i++;
    memmove(st->fences + i + 1, st->fences + i, (st->nfences - i) * sizeof *f);
    f = st->fences + i;
    memset(f, 0, sizeof *f);
    snprintf(f->chat, sizeof f->chat, "%s", chat_id);
    st->nfences++;
  }
  if (f) {
    f->epoch = epoch;
    f->released = 0;
  }
  pthread_mutex_unlock(&st->mu);
  return rc;
}

/* Under st->mu: a released fence with nothing pending is forgotten. */
static void fence_forget_idle(struct store *st, struct st_fence *f) {
  if (!f->released || f->pending > 0)
    return;
  size_t i = (size_t)(f - st->fences);
  memmove(f, f + 1, (st->nfences - i - 1) * sizeof *f);
  st->nfences--;
}

/* A lease let go (NULL: all).  Writes queued before still commit if no node took the lease
 * since (its row keeps this node and epoch, expired); once none is pending the chat's fence is
 * forgotten and later writes of it are refused without a statement. */
void st__fence_release(struct store *st, const char *chat_id) {
  pthread_mutex_lock(&st->mu);
  for (size_t i = st->nfences; i-- > 0;) {
    struct st_fence *f = st->fences + i;
    if (chat_id == NULL || strcmp(f->chat, chat_id) == 0) {
      f->released = 1;
      fence_forget_idle(st, f);
    }
  }
  pthread_mutex_unlock(&st->mu);
}

void st__fence_count(struct store *st, struct st_write *w, int add) {
  if (!w->fence[0] || (add ? w->fence_counted : !w->fence_counted))
    return;
  pthread_mutex_lock(&st->mu);
  struct st_fence *f = fence_find(st, w->fence);
  if (f && add) {
    f->pending++;
    w->fence_counted = 1;
  } else if (f && !add) {
    f->pending--;
    w->fence_counted = 0;
    fence_forget_idle(st, f);
  }
  pthread_mutex_unlock(&st->mu);
}

void st__fences_free(struct store *st) {
  sbx_free(st->fences);
  st->fences = NULL;
  st->nfences = st->capfences = 0;
}

int st__fence_check(struct store *st, const struct st_write *w, const store_id *done, size_t n,
                    struct sbx_error *err) {
  if (!w->fence[0])
    return 0;
  pthread_mutex_lock(&st->mu);
  int nodes = st->fence_node[0] != 0;
  struct st_fence *f = nodes ? fence_find(st, w->fence) : NULL;
  int64_t epoch = f ? f->epoch : 0;
  store_id node;
  snprintf(node, sizeof node, "%s", st->fence_node);
  pthread_mutex_unlock(&st->mu);
  if (!nodes)
    return 0; /* one node: no leases */
  for (size_t i = 0; i < n; i++)
    if (strcmp(done[i], w->fence) == 0)
      return 0; /* checked in this transaction: its row stays locked until the commit */
  if (f == NULL)
    return sbx_error_set(err, SBX_EFENCED, "chat %s: this node holds no lease of it", w->fence);
  struct st_stmt *s = st__q(&st->w, ST_LEASE_FENCE);
  st__bind_text(s, 1, w->fence);
  st__bind_text(s, 2, node);
  st__bind_int64(s, 3, epoch);
  int rc = st__step(s, "lease fence", err);
  st__reset(s);
  if (rc == ST_ROW)
    return 0;
  if (rc < 0)
    return rc;
  return sbx_error_set(err, SBX_EFENCED,
                       "chat %s: its lease is no longer this node's at epoch %lld", w->fence,
                       (long long)epoch);
}

void store_on_fenced(struct store *st, store_fenced_cb cb, void *ud) {
  st->on_fenced = cb;
  st->on_fenced_ud = ud;
}
