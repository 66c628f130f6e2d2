/*
 * longhaul: a fault-tolerant, low-bandwidth collective communication library.
 *
 * This header is the stable C99 ABI. It contains no C++ types; every object is an opaque handle
 * and every fallible call returns an lh_status. A status other than LH_OK is always accompanied by
 * a human-readable message retrievable from the object that produced it.
 *
 * Thread safety: unless a function says otherwise, calls on one handle must not run concurrently.
 */
#ifndef LONGHAUL_LONGHAUL_H_
#define LONGHAUL_LONGHAUL_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Every error the library can report. Values are part of the ABI and never renumbered. */
typedef enum lh_status {
  LH_OK = 0,
  LH_ERR_INVALID_ARGUMENT = 1, /* bad input from the caller; nothing was changed */
  LH_ERR_PEER_LOST = 2,        /* a remote end closed, reset or went silent; retryable */
  LH_ERR_ABORTED = 3,          /* the operation was aborted (by the master or the caller) */
  LH_ERR_TIMEOUT = 4,          /* a deadline passed */
  LH_ERR_AUTH = 5,             /* authentication failed (wrong secret, TLS failure) */
  LH_ERR_PROTOCOL = 6,         /* the remote end violated the protocol (bad frame, bad version) */
  LH_ERR_IO = 7,               /* an operating-system call failed (bind, connect, file) */
  LH_ERR_UNSUPPORTED = 8,      /* a valid request this build or configuration cannot serve */
  LH_ERR_CLOSED = 9,           /* the object was closed or shut down locally */
  LH_ERR_STATE_MISMATCH = 10,  /* shared state differs in keys, types or sizes */
  LH_ERR_INTERNAL = 11         /* a bug in longhaul; please report it */
} lh_status;

/* A static, never-NULL English name for a status code ("LH_ERR_PEER_LOST", ...). */
const char* lh_status_string(lh_status status);

/* The library's version as "MAJOR.MINOR.PATCH". */
const char* lh_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LONGHAUL_LONGHAUL_H_ */
