/* cli_backup.c -- `cerea-sandbox backup DEST` and `cerea-sandbox restore SRC`: the command lines
 * over persistence's store_backup / store_restore (persistence/backup.c says what a backup holds
 * and what a restore checks).  They open the data directory's files themselves, not the API: a
 * backup runs beside the server that writes to the same directory; a restore needs no server.
 *
 * Exit status: 0 done, 1 refused or failed (one line on stderr saying why), 2 usage.
 */
#include "orch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store.h"

static void usage(FILE *f) {
  fputs(
      "usage: cerea-sandbox backup DEST [--data DIR]     a consistent copy while the server runs\n"
      "       cerea-sandbox restore SRC [--data DIR]     into a new or empty DIR, no server on it\n"
      "  DIR: the server's data directory (default: CEREA_DATA_DIR, else ./var)\n"
      "  DEST must be a new or empty folder; SRC is checked whole (manifest.sha256) first\n",
      f);
}

/* argv[2] the folder, then --data DIR: 0, or the exit code (help: 0 printed, usage: 2). */
static int parse(int argc, char **argv, const char **folder, const char **data) {
  *folder = NULL;
  *data =
      getenv("CEREA_DATA_DIR") && *getenv("CEREA_DATA_DIR") ? getenv("CEREA_DATA_DIR") : "./var";
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return -1;
    }
    if (strcmp(argv[i], "--data") == 0 && i + 1 < argc) {
      *data = argv[++i];
    } else if (argv[i][0] != '-' && *folder == NULL && argv[i][0] != '\0') {
      *folder = argv[i];
    } else {
      fprintf(stderr, "cerea-sandbox %s: unexpected argument '%s'\n", argv[1], argv[i]);
      usage(stderr);
      return 2;
    }
  }
  if (*folder == NULL) {
    fprintf(stderr, "cerea-sandbox %s: which folder?\n", argv[1]);
    usage(stderr);
    return 2;
  }
  return 0;
}

static double mib(uint64_t n) { return (double)n / (1024.0 * 1024.0); }

/* backup and restore: the same arguments (the copy's folder, --data), one store call, a line that
 * sums the copy up. */
static int copy_command(int argc, char **argv, int restore) {
  const char *copy, *data;
  int p = parse(argc, argv, &copy, &data);
  if (p != 0)
    return p < 0 ? 0 : p;
  struct store_backup_stats st;
  struct sbx_error err = {0};
  if ((restore ? store_restore(copy, data, &st, &err) : store_backup(data, copy, &st, &err)) != 0) {
    fprintf(stderr, "cerea-sandbox %s: %s\n", restore ? "restore" : "backup", err.msg);
    return 1;
  }
  if (restore)
    printf("restored %s into %s: database %.1f MiB (schema version %d), %zu blobs %.1f MiB; "
           "start the server with --data %s\n",
           copy, data, mib(st.db_bytes), st.schema_version, st.blobs, mib(st.blob_bytes), data);
  else
    printf("backup of %s in %s: database %.1f MiB (schema version %d), %zu blobs %.1f MiB; "
           "check it with: cd %s && sha256sum -c --quiet manifest.sha256\n",
           data, copy, mib(st.db_bytes), st.schema_version, st.blobs, mib(st.blob_bytes), copy);
  return 0;
}

int orch_cli_backup(int argc, char **argv) { return copy_command(argc, argv, 0); }

int orch_cli_restore(int argc, char **argv) { return copy_command(argc, argv, 1); }
