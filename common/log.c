/* log.c -- one line per message on stderr: time, level, module, text.  The level comes from
 * CEREA_LOG (trace, debug, info, warn, error) at first use, or sbx_log_set_level(). */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int level = -1;

static const char *level_names[] = {"trace", "debug", "info", "warn", "error"};

enum sbx_log_level sbx_log_get_level(void) {
  if (level < 0) {
    const char *env = getenv("CEREA_LOG");
    level = SBX_LOG_INFO;
    for (int i = 0; env != NULL && i < (int)SBX_ARRAY_SIZE(level_names); i++)
      if (strcmp(env, level_names[i]) == 0)
        level = i;
  }
  return (enum sbx_log_level)level;
}

void sbx_log_set_level(enum sbx_log_level l) { level = (int)l; }

void sbx_log(enum sbx_log_level l, const char *module, const char *fmt, ...) {
  if (!SBX_LOG_ENABLED(l))
    return;
  char line[2048];
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %-8s ",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   ts.tv_nsec / 1000000, level_names[l], module);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof(line))
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s\n", line); /* one write per line: lines from threads do not interleave */
}
