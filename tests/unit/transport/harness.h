/* harness.h -- what the transport's unit tests share: a real libuv loop with a real server on
 * 127.0.0.1 port 0 in the test's main thread, and a client in a second thread speaking over a
 * blocking socket.  th_run() returns when the client is done and the server has closed; it
 * asserts that uv_loop_close() == 0 (no handle of ours left). */
#ifndef TP_TEST_HARNESS_H
#define TP_TEST_HARNESS_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#include "transport.h"

struct th {
  uv_loop_t loop;
  struct tp_server *srv;
  struct tp_config cfg;
  int port;
  uv_async_t done;
  pthread_t thread;
  void (*client)(struct th *t);
  void *ud;
  int closed;
};

/* Makes the loop and the server (limits may be NULL: defaults; cert/key may be NULL). */
void th_init(struct th *t, const struct tp_limits *lim);
void th_init_tls(struct th *t, const struct tp_limits *lim, const char *cert, const char *key);
/* Listens, runs `client` in a thread, closes the server after it, checks the loop is empty. */
void th_run(struct th *t, void (*client)(struct th *t));
/* The common case: a plain server (limits may be NULL: defaults) carrying th_add_routes()'s routes,
 * run with `client` as th_run() does. */
void th_run_routes(const struct tp_limits *lim, void (*client)(struct th *t));

/* The same, for clients of the body sinks (POST /sink): every sink state must be freed after. */
void th_run_sinks(const struct tp_limits *lim, void (*client)(struct th *t));
/* Limits with a short body clock: header timeout 200 ms, body grace 300 ms, 1000 bytes/s. */
void th_body_clock_limits(struct tp_limits *l);

/* Client side (blocking, 5 s timeouts). */
int th_connect(int port);
void th_send(int fd, const void *p, size_t n);
void th_sends(int fd, const char *s);
/* Reads one HTTP/1.1 response (head + Content-Length or chunked body, decoded) into a new string
 * (free it); NULL when the connection closed first.  *status gets the code. */
char *th_read_response(int fd, int *status);
extern int th_head_response; /* set while reading answers to HEAD requests */
/* Reads until EOF (or 5 s); returns the bytes (free them). */
char *th_read_all(int fd, size_t *n);
/* 1 when the peer closed (EOF or reset) within ms. */
int th_wait_closed(int fd, int ms);
/* Sends `req` on a fresh connection and reads one response. */
char *th_request(int port, const char *req, int *status);

#endif
