/* hello_c: start a longhaul master and one peer on loopback, connect, print the world size, leave.
 *
 * The smallest complete use of the C API: every call's status is checked, and on failure the
 * library's message says what went wrong. In a real run the master is the longhaul-master daemon
 * on one machine and every training process creates only the communicator. */
#include <stdio.h>
#include <stdlib.h>

#include <longhaul/longhaul.h>

static int check(lh_status status, const char* what, const char* message) {
  if (status == LH_OK) return 0;
  fprintf(stderr, "hello_c: %s failed: %s: %s\n", what, lh_status_string(status), message);
  return 1;
}

int main(void) {
  lh_master_options master_options;
  lh_comm_options comm_options;
  lh_master* master = NULL;
  lh_comm* comm = NULL;
  uint16_t port = 0;
  int64_t world_size = 0, epoch = 0;
  char address[64];
  int failed = 0;

  lh_master_options_init(&master_options);
  master_options.listen_address = "127.0.0.1:0"; /* a free port on loopback */
  if (check(lh_master_create(&master_options, &master), "lh_master_create", lh_last_error())) return 1;
  if (check(lh_master_run(master), "lh_master_run", lh_master_last_error(master))) return 1;
  lh_master_port(master, &port);
  sprintf(address, "127.0.0.1:%u", (unsigned)port);

  lh_comm_options_init(&comm_options);
  comm_options.master_address = address;
  comm_options.listen_address = "127.0.0.1:0";
  if (check(lh_comm_create(&comm_options, &comm), "lh_comm_create", lh_last_error())) {
    lh_master_destroy(master);
    return 1;
  }
  failed = check(lh_comm_connect(comm), "lh_comm_connect", lh_comm_last_error(comm));
  if (!failed) {
    lh_comm_get_attribute(comm, LH_ATTR_WORLD_SIZE, &world_size);
    lh_comm_get_attribute(comm, LH_ATTR_EPOCH, &epoch);
    printf("longhaul %s: world size %lld in epoch %lld\n", lh_version(), (long long)world_size, (long long)epoch);
    failed = check(lh_comm_leave(comm, "hello_c is done"), "lh_comm_leave", lh_comm_last_error(comm));
  }
  lh_comm_destroy(comm);
  lh_master_stop(master);
  lh_master_destroy(master);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
