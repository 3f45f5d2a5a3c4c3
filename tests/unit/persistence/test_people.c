/* test_people.c -- people.c and a chat's owner and deletion (chats.c): people made (a taken name
 * refused), read by id and by name, listed, updated; sessions made, read, touched (their person
 * seen), ended one by one and all of a person's but one, purged; a person's chats; a chat deleted
 * with its files, runs, run files, events and messages, and the blobs only it held (their files
 * gone from disk), a blob another chat still holds kept. */
#include <sys/stat.h>

#include "helpers.h"

START_TEST(test_people) {
  struct tctx t;
  t_open(&t);
  store_id ada, bob;
  t_person_add(&t, "ada", "admin", ada);
  t_person_add(&t, "bob", "user", bob);
  /* the name is taken: a conflict through the callback, nothing written */
  struct store_person dup = {.name = "ada", .role = "user", .pw_hash = "x", .created_at = 8};
  store_new_id(dup.id);
  struct done d = {0};
  ck_assert_int_eq(store_person_create(t.st, &dup, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ECONFLICT);
  struct store_person bad = {0};
  ck_assert_int_eq(store_person_create(t.st, &bad, on_done, &d), SBX_EINVAL);
  int64_t n = 0;
  ck_assert_int_eq(store_person_count(t.st, &n), 0);
  ck_assert_int_eq(n, 2);
  struct store_person p;
  ck_assert_int_eq(store_person_by_name(t.st, "bob", &p), 0);
  ck_assert_str_eq(p.id, bob);
  ck_assert_str_eq(p.role, "user");
  ck_assert_int_eq(p.disabled, 0);
  ck_assert_str_eq(p.settings_json, "{}");
  /* updated: role, hash, disabled, must_change_password, settings */
  sbx_free(p.role);
  p.role = sbx_strdup("admin");
  p.disabled = 1;
  p.must_change_password = 1;
  sbx_free(p.settings_json);
  p.settings_json = sbx_strdup("{\"pypi\":false}");
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_person_update(t.st, &p, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  store_person_free(&p);
  ck_assert_int_eq(store_person_get(t.st, bob, &p), 0);
  ck_assert_str_eq(p.role, "admin");
  ck_assert_int_eq(p.disabled, 1);
  ck_assert_int_eq(p.must_change_password, 1);
  ck_assert_str_eq(p.settings_json, "{\"pypi\":false}");
  /* an update of nobody */
  store_new_id(p.id);
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_person_update(t.st, &p, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ENOENT);
  store_person_free(&p);
  ck_assert_int_eq(store_person_by_name(t.st, "carol", &p), SBX_ENOENT);
  struct store_person *v;
  size_t k;
  ck_assert_int_eq(store_person_list(t.st, &v, &k), 0);
  ck_assert_uint_eq(k, 2);
  ck_assert_str_eq(v[0].name, "ada"); /* oldest first */
  ck_assert_str_eq(v[1].name, "bob");
  store_person_list_free(v, k);
  t_close(&t);
}
END_TEST

static void session_of(struct store_session *s, const char *cookie, const char *person,
                       int64_t at) {
  memset(s, 0, sizeof *s);
  store_sha256_hex(cookie, strlen(cookie), s->token_hash);
  snprintf(s->person_id, sizeof s->person_id, "%s", person);
  s->created_at = s->last_used_at = at;
}

START_TEST(test_sessions) {
  struct tctx t;
  t_open(&t);
  store_id ada;
  t_person_add(&t, "ada", "user", ada);
  struct store_session s1, s2, s3, g;
  session_of(&s1, "one", ada, 100);
  session_of(&s2, "two", ada, 200);
  session_of(&s3, "three", ada, 300);
  struct done d = {0};
  ck_assert_int_eq(store_session_create(t.st, &s1, on_done, &d), 0);
  ck_assert_int_eq(store_session_create(t.st, &s2, on_done, &d), 0);
  ck_assert_int_eq(store_session_create(t.st, &s3, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  struct store_person p;
  ck_assert_int_eq(store_person_get(t.st, ada, &p), 0);
  ck_assert_int_eq(p.last_seen_at, 300); /* a sign-in is a sight */
  store_person_free(&p);
  /* a session of nobody: refused by the foreign key */
  struct store_session orphan;
  session_of(&orphan, "orphan", "f0000000000000000000000000000000", 1);
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_session_create(t.st, &orphan, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ECONFLICT);
  ck_assert_int_eq(store_session_get(t.st, orphan.token_hash, &g), SBX_ENOENT);
  /* touched: the session's use and its person's */
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_session_touch(t.st, s1.token_hash, ada, 500, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  ck_assert_int_eq(store_session_get(t.st, s1.token_hash, &g), 0);
  ck_assert_int_eq(g.created_at, 100);
  ck_assert_int_eq(g.last_used_at, 500);
  ck_assert_int_eq(g.ended_at, 0);
  ck_assert_int_eq(store_person_get(t.st, ada, &p), 0);
  ck_assert_int_eq(p.last_seen_at, 500);
  store_person_free(&p);
  /* one ended; then every other of the person but s2 */
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_session_end(t.st, s1.token_hash, 600, on_done, &d), 0);
  ck_assert_int_eq(store_session_end_person(t.st, ada, s2.token_hash, 700, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  ck_assert_int_eq(store_session_get(t.st, s1.token_hash, &g), 0);
  ck_assert_int_eq(g.ended_at, 600); /* ended once: the second end left it as it was */
  ck_assert_int_eq(store_session_get(t.st, s2.token_hash, &g), 0);
  ck_assert_int_eq(g.ended_at, 0);
  ck_assert_int_eq(store_session_get(t.st, s3.token_hash, &g), 0);
  ck_assert_int_eq(g.ended_at, 700);
  /* a touch of an ended session changes nothing */
  ck_assert_int_eq(store_session_touch(t.st, s3.token_hash, ada, 800, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(store_session_get(t.st, s3.token_hash, &g), 0);
  ck_assert_int_eq(g.last_used_at, 300);
  /* all of them */
  ck_assert_int_eq(store_session_end_person(t.st, ada, NULL, 900, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(store_session_get(t.st, s2.token_hash, &g), 0);
  ck_assert_int_eq(g.ended_at, 900);
  /* purged before 650: s1 (ended at 600); s3 ended at 700 and s2 used at 200 ... s2's last use
   * is 200 < 650 too */
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_session_purge(t.st, 650, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, 0);
  ck_assert_int_eq(store_session_get(t.st, s1.token_hash, &g), SBX_ENOENT);
  ck_assert_int_eq(store_session_get(t.st, s2.token_hash, &g), SBX_ENOENT);
  ck_assert_int_eq(store_session_get(t.st, s3.token_hash, &g), SBX_ENOENT);
  t_close(&t);
}
END_TEST

static void chat_of(struct tctx *t, const char *id, const char *owner, int64_t at) {
  struct store_chat c = {.created_at = at};
  snprintf(c.id, sizeof c.id, "%s", id);
  store_sha256_hex(id, strlen(id), c.token_hash);
  if (owner)
    snprintf(c.owner, sizeof c.owner, "%s", owner);
  struct done d = {0};
  ck_assert_int_eq(store_chat_create(t->st, &c, on_done, &d), 0);
  t_wait(t);
  ck_assert_msg(d.rc == 0, "%s", d.msg);
}

struct kept {
  store_id id;
  char sha[65];
};

static void file_of(struct tctx *t, const char *chat, const char *name, const char *bytes,
                    struct kept *k) {
  struct store_file_in in = {.chat_id = chat,
                             .name = name,
                             .source = STORE_SRC_ATTACHMENT,
                             .mounted = 1,
                             .data = bytes,
                             .size = strlen(bytes)};
  struct added a;
  ck_assert_int_eq(t_add_in(t, &in, &a), 0);
  memcpy(k->id, a.f.id, sizeof k->id);
  memcpy(k->sha, a.f.sha256, sizeof k->sha);
  store_file_free(&a.f);
}

START_TEST(test_owner_and_delete) {
  struct tctx t;
  t_open(&t);
  store_id ada;
  t_person_add(&t, "ada", "user", ada);
  const char *mine1 = "a0000000000000000000000000000001", *mine2 = "a0000000000000000000000000000002",
             *other = "b0000000000000000000000000000001";
  chat_of(&t, mine1, ada, 10);
  chat_of(&t, other, NULL, 20);
  chat_of(&t, mine2, ada, 30);
  struct store_chat *v;
  size_t k;
  ck_assert_int_eq(store_chat_list_owner(t.st, ada, 10, &v, &k), 0);
  ck_assert_uint_eq(k, 2);
  ck_assert_str_eq(v[0].id, mine2); /* newest first */
  ck_assert_str_eq(v[1].id, mine1);
  store_chat_list_free(v, k);
  struct store_chat g;
  ck_assert_int_eq(store_chat_get(t.st, other, &g), 0);
  ck_assert_str_eq(g.owner, "");
  store_chat_free(&g);
  /* mine1 holds a file of its own, one whose content other holds too, a run with an output
   * file, an event and a message */
  struct kept own, shared, theirs;
  file_of(&t, mine1, "own.txt", "only mine1 has this\n", &own);
  file_of(&t, mine1, "shared.txt", "both have this\n", &shared);
  file_of(&t, other, "copy.txt", "both have this\n", &theirs);
  struct store_run r = {.code = "print(1)", .origin = "user", .state = "done", .status = "ok",
                        .created_at = 40};
  snprintf(r.id, sizeof r.id, "r%031d", 1);
  snprintf(r.chat_id, sizeof r.chat_id, "%s", mine1);
  struct done d = {0};
  ck_assert_int_eq(store_run_put(t.st, &r, on_done, &d), 0);
  ck_assert_int_eq(store_run_file_put(t.st, r.id, 0, own.id, on_done, &d), 0);
  ck_assert_int_eq(store_event_append(t.st, mine1, 1, "run", "{}", on_done, &d), 0);
  struct store_message m = {.role = "user", .state = "done", .text = "hi", .run_ids_json = "[]",
                            .created_at = 5, .updated_at = 5};
  snprintf(m.id, sizeof m.id, "m1");
  snprintf(m.chat_id, sizeof m.chat_id, "%s", mine1);
  ck_assert_int_eq(store_message_put(t.st, &m, on_done, &d), 0);
  t_wait(&t);
  ck_assert_msg(d.rc == 0, "%s", d.msg);
  char *own_path = store_blob_path(t.st, own.sha), *shared_path = store_blob_path(t.st, shared.sha);
  struct stat sb;
  ck_assert_int_eq(stat(own_path, &sb), 0);
  uint64_t before = store_blob_bytes(t.st);

  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_chat_delete(t.st, mine1, on_done, &d), 0);
  t_wait(&t);
  ck_assert_msg(d.rc == 0, "%s", d.msg);
  ck_assert_int_eq(store_chat_get(t.st, mine1, &g), SBX_ENOENT);
  struct store_file f;
  ck_assert_int_eq(store_file_get(t.st, own.id, &f), SBX_ENOENT);
  ck_assert_int_eq(store_file_get(t.st, shared.id, &f), SBX_ENOENT);
  ck_assert_int_eq(store_file_get(t.st, theirs.id, &f), 0); /* the other chat's stays */
  store_file_free(&f);
  struct store_run rr;
  ck_assert_int_eq(store_run_get(t.st, r.id, &rr), SBX_ENOENT);
  struct store_event *ev;
  ck_assert_int_eq(store_event_since(t.st, mine1, 0, 10, &ev, &k), 0);
  ck_assert_uint_eq(k, 0);
  store_event_list_free(ev, k);
  struct store_message *mv;
  ck_assert_int_eq(store_message_list(t.st, mine1, 10, &mv, &k), 0);
  ck_assert_uint_eq(k, 0);
  store_message_list_free(mv, k);
  /* the bytes only mine1 held are gone, from the table and the disk; the shared ones stay */
  ck_assert_int_ne(stat(own_path, &sb), 0);
  ck_assert_int_eq(stat(shared_path, &sb), 0);
  ck_assert_uint_eq(store_blob_bytes(t.st), before - strlen("only mine1 has this\n"));
  char *data = NULL;
  size_t len = 0;
  ck_assert_int_eq(store_blob_read(t.st, own.sha, &data, &len), SBX_ENOENT);
  ck_assert_int_eq(store_blob_read(t.st, shared.sha, &data, &len), 0);
  sbx_free(data);
  sbx_free(own_path);
  sbx_free(shared_path);
  ck_assert_int_eq(store_chat_list_owner(t.st, ada, 10, &v, &k), 0);
  ck_assert_uint_eq(k, 1);
  store_chat_list_free(v, k);
  /* again: no such chat */
  memset(&d, 0, sizeof d);
  ck_assert_int_eq(store_chat_delete(t.st, mine1, on_done, &d), 0);
  t_wait(&t);
  ck_assert_int_eq(d.rc, SBX_ENOENT);
  ck_assert_int_eq(store_chat_delete(t.st, "short", on_done, &d), SBX_EINVAL);
  t_close(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("people");
  TCase *tc = tcase_create("people");
  tcase_add_test(tc, test_people);
  tcase_add_test(tc, test_sessions);
  tcase_add_test(tc, test_owner_and_delete);
  return t_run_suite(s, tc);
}
