/* test_main.c -- runs every transport suite (one per source file), in fork mode. */
#include <check.h>
#include <stdlib.h>

Suite *http1_suite(void);
Suite *router_suite(void);
Suite *sse_suite(void);
Suite *static_suite(void);
Suite *http2_suite(void);
Suite *tls_suite(void);
Suite *server_suite(void);
Suite *faults_suite(void);
Suite *http_client_suite(void);

int main(void) {
  SRunner *sr = srunner_create(router_suite());
  srunner_add_suite(sr, http1_suite());
  srunner_add_suite(sr, sse_suite());
  srunner_add_suite(sr, static_suite());
  srunner_add_suite(sr, http2_suite());
  srunner_add_suite(sr, tls_suite());
  srunner_add_suite(sr, server_suite());
  srunner_add_suite(sr, faults_suite());
  srunner_add_suite(sr, http_client_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
