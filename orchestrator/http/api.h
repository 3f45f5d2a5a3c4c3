/* api.h -- what the HTTP side of the orchestrator shares: the answers (api_reply.h, which it
 * includes), the handlers' helpers (api.c: body reading, credential and chat checks, waiters),
 * every api_*.c file's routes, the forwarding of another node's chat (api.c, over proxy.c's
 * client on the loop).
 *
 * Layers: the api_*.c files and server.c (which mounts the routes) include it; the
 * domain (chat.c, run.c, page.c, turn.c, tools.c, assistant.c, nodes.c, ...) never does: it holds
 * no request and answers nothing.
 *
 * Internal to the orchestrator, like internal.h (which it includes).
 */
#ifndef ORCH_API_H
#define ORCH_API_H

#include "api_reply.h"
#include "proxy.h"

/* api.c: bodies, fields, access checks, waiters */
/* Parses the body as a JSON object; answers 400 and returns NULL when it is not one. */
json_t *orch__api_body_object(struct tp_req *req);
/* A person's call on the chat of the path (its {chat}) with an object body: the body (new
 * reference) and *c, or NULL once an answer was sent. */
json_t *orch__api_chat_object(struct orch *o, struct tp_req *req, struct orch_chat **c);
/* The same with extra jansson decoding flags (JSON_ALLOW_NUL for program output). */
json_t *orch__api_body_object_flags(struct tp_req *req, size_t flags);
/* One field of a request body for orch__api_unpack: its key, the json_unpack format of its value
 * ("s", "I", "F", "b", "o"...), where that goes, whether the body must have it; `given` is set. */
struct orch_field {
  const char *key;
  const char *fmt;
  void *out;
  int required;
  int given;
};
/* Reads each field of the object obj with json_unpack_ex; a field given as null counts as absent.
 * The first one of another type (or required and absent) is answered 400 invalid_field
 * "[within.]key: <jansson's message>" and returns nonzero. */
int orch__api_unpack(struct tp_req *req, const json_t *obj, const char *within,
                     struct orch_field *f, size_t n);
#define ORCH_FIELD(key, fmt, out)                                                                  \
  { (key), (fmt), (out), 0, 0 }
#define ORCH_FIELD_REQUIRED(key, fmt, out)                                                         \
  { (key), (fmt), (out), 1, 0 }
/* For calls only the backend may make: 0 for the API key; else answers 403 (a real page token,
 * the host key, a session) or 401 (none, wrong) and returns nonzero.  `what` names the call. */
int orch__api_backend_only(struct orch *o, struct tp_req *req, const char *what);
/* The same for the admin calls, which an administrator's session makes too (*out, when given,
 * gets the credential). */
int orch__api_admin_only(struct orch *o, struct tp_req *req, const char *what,
                         struct orch_auth *out);
/* The request's credential: Authorization: Bearer, else query_token (NULL: none), else the
 * session cookie (checked against the store: a live session, its person not disabled; a
 * state-changing call's Origin checked, a->origin_bad). */
void orch__api_auth(struct orch *o, struct tp_req *req, const char *query_token,
                    struct orch_auth *a);
/* Answers 401 (none, wrong, an ended session) or 403 (a cookie call from another origin) and
 * returns 1; 0 when a may go on. */
int orch__api_deny_auth(struct tp_req *req, const struct orch_auth *a);
/* With nodes, the hosts' key reaches only the chats this node holds (in its memory: hosts.c gives
 * its hosts no other).  1 when a is that key and chat_id is not one of them: the call must neither
 * take the chat's lease here nor be forwarded (the key is this node's own, so the owner would
 * refuse it).  orch__api_host_elsewhere also answers it: 409, which a host takes as "this attempt
 * or chat is not yours any more" (hosts.c detaches such a chat at its next tick). */
int orch__host_elsewhere(const struct orch *o, const struct orch_auth *a, const char *chat_id);
int orch__api_host_elsewhere(struct orch *o, struct tp_req *req, const struct orch_auth *a,
                             const char *chat_id);
/* Who besides the backend may make a chat's call (orch__api_chat's `who`). */
enum orch_api_who {
  ORCH_API_BACKEND = 0, /* the API key only */
  ORCH_API_PAGE = 1,    /* also the chat's page token and the hosts' key: the page protocol */
  ORCH_API_PERSON = 2   /* also the page token, but not the hosts' key: what the person at the
                           page does (messages, runs, renames, chat keys), which a host never needs */
};
/* Resolves and checks access to a chat; answers (401/403/404) and returns NULL on failure.  A
 * chat another node serves: the request is forwarded there (nodes.c) and NULL returned; _body
 * forwards *stage with it (a streamed upload; taken). */
struct orch_chat *orch__api_chat_body(struct orch *o, struct tp_req *req, const char *chat_id,
                                      enum orch_api_who who, int query_token_allowed,
                                      struct store_blob_stage **stage);
static inline struct orch_chat *orch__api_chat(struct orch *o, struct tp_req *req,
                                               const char *chat_id, enum orch_api_who who,
                                               int query_token_allowed) {
  return orch__api_chat_body(o, req, chat_id, who, query_token_allowed, NULL);
}
/* Loads a run (live or stored) the caller may see; answers and returns nonzero on failure.
 * *live is the live run or NULL; rec is filled from the store when *live is NULL, else only its
 * id and chat_id are set (read the live run); owned by the caller either way: store_run_free. */
int orch__api_run_body(struct orch *o, struct tp_req *req, const char *run_id,
                       struct orch_run **live, struct store_run *rec, struct orch_chat **chat,
                       struct store_blob_stage **stage);
static inline int orch__api_run(struct orch *o, struct tp_req *req, const char *run_id,
                                struct orch_run **live, struct store_run *rec,
                                struct orch_chat **chat) {
  return orch__api_run_body(o, req, run_id, live, rec, chat, NULL);
}
/* The same for a call that acts on the run the route's {run} names: *live the live run, or NULL
 * when it has ended; *chat its chat (may be NULL).  Answers and returns nonzero on failure.  The
 * _body variant is for a PUT whose body is in *stage: forwarded with it when another node serves
 * the run's chat (nodes.c). */
int orch__api_live_run_body(struct orch *o, struct tp_req *req, struct orch_run **live,
                            struct orch_chat **chat, struct store_blob_stage **stage);
static inline int orch__api_live_run(struct orch *o, struct tp_req *req, struct orch_run **live,
                                     struct orch_chat **chat) {
  return orch__api_live_run_body(o, req, live, chat, NULL);
}
/* Our base URL as the client reached us ("http://127.0.0.1:8080"); "" when Host is unusable. */
void orch__api_base_url(struct orch *o, struct tp_req *req, char *out, size_t cap);
/* Answers req with the run object (`status`) when the run ends, or after wait_ms with the run as it
 * is then.  Holds req until it answers or the client leaves. */
void orch__waiter_add(struct orch *o, struct tp_req *req, struct orch_run *run, int status,
                      uint64_t wait_ms);
/* An orch_end_cb whose ud is a held request: answers it with the run object once the run is
 * stored done (200), or with the failure (400 invalid_name, 500 storage), and releases it. */
void orch__api_answer_end(void *ud, struct orch *o, struct orch_run *run, int rc,
                          const struct sbx_error *err);

void orch__routes_static(struct orch *o);
void orch__routes_chats(struct orch *o);
void orch__routes_files(struct orch *o);
void orch__routes_runs(struct orch *o);
void orch__routes_events(struct orch *o);
void orch__routes_page(struct orch *o);
void orch__routes_run_events(struct orch *o);
void orch__routes_health(struct orch *o);
void orch__routes_turns(struct orch *o);
void orch__routes_admin(struct orch *o);
void orch__routes_people(struct orch *o);

/* api_nodes.c: after the listeners, orch__nodes_start, GET /v1/node and the check that
 * CEREA_NODE_URL reaches this node (when it does not, the process exits with one line); at
 * close, forwarded requests end (then orch__nodes_stop). */
int orch__routes_nodes(struct orch *o, struct sbx_error *err);
void orch__api_nodes_stop(struct orch *o);

/* api.c: answers req by forwarding it to the node holding chat_id's lease (proxy.c), or 503;
 * *stage, when given, is the streamed body (taken). */
void orch__node_forward(struct orch *o, struct tp_req *req, const char *chat_id,
                        struct store_blob_stage **stage);

#endif
