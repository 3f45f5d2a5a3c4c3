/* metrics.c -- the orchestrator's Prometheus metrics: runs by status, a run-duration histogram,
 * queue depth, attached pages, bytes stored, events.  Counters are plain fields of struct
 * orch_metrics bumped where things happen; gauges are computed at render time from the live
 * objects.  And the last fifteen minutes of a few of them, sampled every five seconds, for the
 * admin page's charts (runs per second, run duration p50/p95 from the histogram's buckets, live
 * pages and runs).  What it does not do: keep anything across a restart (Prometheus scrapes
 * /metrics for that), or know the transport (GET /metrics, api_health.c, appends the transport's
 * own).
 */
#include "internal.h"

#include <string.h>

static const double dur_bounds_s[ORCH_DUR_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                      0.5,   1,    2.5,   5,    15,  60};

void orch__metrics_observe_run(struct orch_metrics *m, enum orch_run_status st,
                               int64_t duration_ms) {
  if ((unsigned)st < SBX_ARRAY_SIZE(m->runs_by_status))
    m->runs_by_status[st]++;
  if (duration_ms < 0)
    return;
  double s = (double)duration_ms / 1000.0;
  int b = 0;
  while (b < ORCH_DUR_BUCKETS && s > dur_bounds_s[b])
    b++;
  m->dur_buckets[b]++;
  m->dur_sum_s += s;
  m->dur_count++;
}

/* The live objects' gauges: runs by state, pages by state, event streams. */
struct live_counts {
  uint64_t by_state[ORCH_RUN__COUNT], pages_visible, pages_hidden, pages_grace, pages_silent,
      streams;
};

static void count_live(const struct orch *o, struct live_counts *lc) {
  memset(lc, 0, sizeof(*lc));
  size_t i = 0;
  const char *k;
  void *v;
  while (orch__map_next(&o->runs, &i, &k, &v))
    lc->by_state[((struct orch_run *)v)->state]++;
  i = 0;
  while (orch__map_next(&o->chats, &i, &k, &v)) {
    struct orch_chat *c = v;
    struct sbx_list *it;
    SBX_LIST_FOREACH(it, &c->pages) {
      struct orch_page *p = SBX_CONTAINER_OF(it, struct orch_page, chat_link);
      lc->pages_visible += p->state == ORCH_PAGE_VISIBLE;
      lc->pages_hidden += p->state == ORCH_PAGE_HIDDEN;
      lc->pages_grace += p->state == ORCH_PAGE_GRACE;
      lc->pages_silent += p->state == ORCH_PAGE_SILENT;
    }
    SBX_LIST_FOREACH(it, &c->listeners) lc->streams++; /* each listener is an event stream */
  }
}

void orch__metrics_sample(struct orch *o) {
  struct orch_metrics *m = &o->m;
  struct live_counts lc;
  count_live(o, &lc);
  struct orch_metrics_sample *s = &m->hist[m->hist_next];
  s->at_ms = sbx_now_wall_ms();
  s->ended = 0;
  for (size_t i = 0; i < SBX_ARRAY_SIZE(m->runs_by_status); i++)
    s->ended += m->runs_by_status[i];
  memcpy(s->buckets, m->dur_buckets, sizeof(s->buckets));
  s->pages = (uint32_t)(lc.pages_visible + lc.pages_hidden + lc.pages_silent);
  s->runs_live = 0;
  for (int st = 0; st < ORCH_RUN_DONE; st++)
    s->runs_live += (uint32_t)lc.by_state[st];
  m->hist_next = (m->hist_next + 1) % ORCH_HISTORY_SAMPLES;
  if (m->hist_n < ORCH_HISTORY_SAMPLES)
    m->hist_n++;
}

/* The q-quantile of the runs that ended between two samples, from their buckets' counts, as
 * Prometheus's histogram_quantile does: linear within the bucket it falls in (the last bucket,
 * past the highest bound, answers that bound).  -1 when none ended. */
static double quantile(const uint64_t *from, const uint64_t *to, double q) {
  uint64_t d[ORCH_DUR_BUCKETS + 1], total = 0;
  for (int b = 0; b <= ORCH_DUR_BUCKETS; b++)
    total += d[b] = to[b] - from[b];
  if (total == 0)
    return -1;
  double rank = q * (double)total, cum = 0;
  for (int b = 0; b < ORCH_DUR_BUCKETS; b++) {
    if (cum + (double)d[b] >= rank) {
      double lo = b ? dur_bounds_s[b - 1] : 0, hi = dur_bounds_s[b];
      return d[b] ? lo + (hi - lo) * (rank - cum) / (double)d[b] : lo;
    }
    cum += (double)d[b];
  }
  return dur_bounds_s[ORCH_DUR_BUCKETS - 1];
}

json_t *orch__metrics_history_json(const struct orch *o) {
  const struct orch_metrics *m = &o->m;
  json_t *samples = json_array();
  size_t first = (m->hist_next + ORCH_HISTORY_SAMPLES - m->hist_n) % ORCH_HISTORY_SAMPLES;
  for (size_t n = 1; n < m->hist_n; n++) {
    const struct orch_metrics_sample *a = &m->hist[(first + n - 1) % ORCH_HISTORY_SAMPLES],
                                     *b = &m->hist[(first + n) % ORCH_HISTORY_SAMPLES];
    double dt = (double)(b->at_ms - a->at_ms) / 1000.0;
    double p50 = quantile(a->buckets, b->buckets, 0.5), p95 = quantile(a->buckets, b->buckets, 0.95);
    json_array_append_new(
        samples, json_pack("{s:I, s:f, s:o, s:o, s:i, s:i}", "at", (json_int_t)b->at_ms,
                           "runs_per_s", dt > 0 ? (double)(b->ended - a->ended) / dt : 0.0, "p50_s",
                           p50 < 0 ? json_null() : json_real(p50), "p95_s",
                           p95 < 0 ? json_null() : json_real(p95), "pages", (int)b->pages,
                           "runs_live", (int)b->runs_live));
  }
  return json_pack("{s:i, s:o}", "interval_s", ORCH_HISTORY_EVERY_MS / 1000, "samples", samples);
}

/* The runs: created, ended by status, the duration histogram.  Nonzero when out of memory. */
static int render_runs(const struct orch_metrics *m, struct sbx_buf *out) {
  int rc = 0;
  rc |= sbx_buf_appendf(out,
                        "# HELP cerea_runs_created_total Runs accepted (durable).\n"
                        "# TYPE cerea_runs_created_total counter\ncerea_runs_created_total %llu\n",
                        (unsigned long long)m->runs_created);
  rc |= sbx_buf_appendf(out, "# HELP cerea_runs_total Runs ended, by final status.\n"
                             "# TYPE cerea_runs_total counter\n");
  for (int s = ORCH_RUN_STATUS_OK; s <= ORCH_RUN_STATUS_ABANDONED; s++)
    rc |= sbx_buf_appendf(out, "cerea_runs_total{status=\"%s\"} %llu\n", orch__run_status_name(s),
                          (unsigned long long)m->runs_by_status[s]);
  rc |= sbx_buf_appendf(out, "# HELP cerea_run_duration_seconds From started to result.\n"
                             "# TYPE cerea_run_duration_seconds histogram\n");
  uint64_t cum = 0;
  for (int b = 0; b < ORCH_DUR_BUCKETS; b++) {
    cum += m->dur_buckets[b];
    rc |= sbx_buf_appendf(out, "cerea_run_duration_seconds_bucket{le=\"%g\"} %llu\n",
                          dur_bounds_s[b], (unsigned long long)cum);
  }
  cum += m->dur_buckets[ORCH_DUR_BUCKETS];
  rc |= sbx_buf_appendf(
      out,
      "cerea_run_duration_seconds_bucket{le=\"+Inf\"} %llu\n"
      "cerea_run_duration_seconds_sum %.6f\ncerea_run_duration_seconds_count %llu\n",
      (unsigned long long)cum, m->dur_sum_s, (unsigned long long)m->dur_count);
  return rc;
}

/* The gauges counted from live objects: runs by state, the queue, pages, event streams. */
static int render_live(struct orch *o, struct sbx_buf *out) {
  int rc = 0;
  struct live_counts lc;
  count_live(o, &lc);
  const uint64_t *by_state = lc.by_state;
  rc |= sbx_buf_appendf(out, "# HELP cerea_runs_live Runs not done, by state (queue depth).\n"
                             "# TYPE cerea_runs_live gauge\n");
  for (int s = 0; s < ORCH_RUN_DONE; s++)
    rc |= sbx_buf_appendf(out, "cerea_runs_live{state=\"%s\"} %llu\n", orch__run_state_name(s),
                          (unsigned long long)by_state[s]);
  rc |=
      sbx_buf_appendf(out,
                      "# HELP cerea_queue_depth Runs waiting for a page (queued or paused).\n"
                      "# TYPE cerea_queue_depth gauge\ncerea_queue_depth %llu\n",
                      (unsigned long long)(by_state[ORCH_RUN_QUEUED] + by_state[ORCH_RUN_PAUSED]));
  rc |= sbx_buf_appendf(out,
                        "# HELP cerea_pages Attached pages by state.\n# TYPE cerea_pages gauge\n"
                        "cerea_pages{state=\"visible\"} %llu\ncerea_pages{state=\"hidden\"} %llu\n"
                        "cerea_pages{state=\"grace\"} %llu\ncerea_pages{state=\"silent\"} %llu\n"
                        "# TYPE cerea_event_streams gauge\ncerea_event_streams %llu\n",
                        (unsigned long long)lc.pages_visible, (unsigned long long)lc.pages_hidden,
                        (unsigned long long)lc.pages_grace, (unsigned long long)lc.pages_silent,
                        (unsigned long long)lc.streams);
  return rc;
}

/* The counters of what happened since start. */
static int render_counters(struct orch *o, const struct orch_metrics *m, struct sbx_buf *out) {
  int rc = 0;
  rc |= sbx_buf_appendf(
      out,
      "# HELP cerea_pages_silent_total Pages that held a run and showed no sign of life for "
      "PAGE_SILENT_MS.\n"
      "# TYPE cerea_pages_silent_total counter\ncerea_pages_silent_total %llu\n"
      "# HELP cerea_runs_paused_by_silence_total Runs paused because their page went silent.\n"
      "# TYPE cerea_runs_paused_by_silence_total counter\ncerea_runs_paused_by_silence_total %llu\n"
      "# HELP cerea_output_calls_total Output calls taken from pages (live output).\n"
      "# TYPE cerea_output_calls_total counter\ncerea_output_calls_total %llu\n"
      "# HELP cerea_live_events_sent_total Live events (output, display, input_request) written to "
      "chat event streams.\n"
      "# TYPE cerea_live_events_sent_total counter\ncerea_live_events_sent_total %llu\n"
      "# TYPE cerea_inputs_given_total counter\ncerea_inputs_given_total %llu\n"
      "# HELP cerea_uploads_refused_busy_total Uploads refused because their chat had "
      "ORCH_CHAT_UPLOADS arriving.\n"
      "# TYPE cerea_uploads_refused_busy_total counter\ncerea_uploads_refused_busy_total %llu\n"
      "# HELP cerea_output_files_over_quota_total Output files not kept: over "
      "CHAT_OUTPUT_QUOTA_MB.\n"
      "# TYPE cerea_output_files_over_quota_total counter\n"
      "cerea_output_files_over_quota_total %llu\n"
      "# HELP cerea_files_refused_quota_total Files users or tools added, refused: over "
      "CHAT_ATTACHMENT_QUOTA_MB.\n"
      "# TYPE cerea_files_refused_quota_total counter\n"
      "cerea_files_refused_quota_total %llu\n",
      (unsigned long long)m->pages_silent, (unsigned long long)m->paused_by_silence,
      (unsigned long long)m->output_calls, (unsigned long long)m->live_events_sent,
      (unsigned long long)m->inputs_given, (unsigned long long)m->uploads_refused_busy,
      (unsigned long long)m->output_files_over_quota,
      (unsigned long long)m->uploads_refused_quota);
  rc |= sbx_buf_appendf(
      out,
      "# HELP cerea_bytes_stored Bytes in the blob store.\n"
      "# TYPE cerea_bytes_stored gauge\ncerea_bytes_stored %llu\n"
      "# TYPE cerea_events_sent_total counter\ncerea_events_sent_total %llu\n"
      "# TYPE cerea_events_replayed_total counter\ncerea_events_replayed_total %llu\n"
      "# TYPE cerea_results_accepted_total counter\ncerea_results_accepted_total %llu\n"
      "# TYPE cerea_results_refused_total counter\ncerea_results_refused_total %llu\n"
      "# TYPE cerea_runs_dispatched_total counter\ncerea_runs_dispatched_total %llu\n"
      "# TYPE cerea_runs_redispatched_total counter\ncerea_runs_redispatched_total %llu\n"
      "# TYPE cerea_output_uploads_total counter\ncerea_output_uploads_total %llu\n"
      "# HELP cerea_runs_paused_total Runs paused because their page went hidden or gone.\n"
      "# TYPE cerea_runs_paused_total counter\ncerea_runs_paused_total %llu\n"
      "# HELP cerea_kernel_restarts_total Kernels replaced (results with restarted, restart "
      "events).\n"
      "# TYPE cerea_kernel_restarts_total counter\ncerea_kernel_restarts_total %llu\n",
      (unsigned long long)store_blob_bytes(o->st), (unsigned long long)m->events_sent,
      (unsigned long long)m->events_replayed, (unsigned long long)m->results_accepted,
      (unsigned long long)m->results_refused, (unsigned long long)m->runs_dispatched,
      (unsigned long long)m->attempts_redispatched, (unsigned long long)m->uploads,
      (unsigned long long)m->pauses, (unsigned long long)m->restarts);
  return rc;
}

int orch__metrics_render(struct orch *o, struct sbx_buf *out) {
  int rc = render_runs(&o->m, out); /* in this order: one statement each */
  rc |= render_live(o, out);
  rc |= render_counters(o, &o->m, out);
  return rc ? SBX_ENOMEM : 0;
}
