/* libppcontrol: the pure control library shared by puma-plus-server, pp-sim and pp-replay.
 *
 * Everything here is sans-I/O: no clocks, no sockets, no files, no logging, no globals,
 * no rand(). Time and randomness are arguments. That is what lets a production decision
 * log replay bit-for-bit in the simulator. Include this header for the whole library. */
#ifndef PP_CONTROL_H
#define PP_CONTROL_H

/* One error enum for the library. Every fallible call returns 0 (or a length) on
 * success and one of these, negative, on failure. */
typedef enum pp_ctl_err {
  PP_CTL_OK = 0,
  PP_CTL_EINVAL = -1, /* an argument or a field value is out of its domain */
  PP_CTL_ENOSPC = -2, /* the caller's output buffer is too small */
  PP_CTL_EPARSE = -3, /* the input text is malformed (the error struct says where) */
  PP_CTL_ERANGE = -4, /* a number does not fit its field */
  PP_CTL_ENOENT = -5, /* an unknown field name */
} pp_ctl_err;

/* A static English description of an error code; never NULL. */
const char *pp_ctl_strerror(int err);

/* Durations are unsigned nanoseconds; PP_UNKNOWN_NS marks a measurement that was not
 * taken (GVL wait on Ruby < 3.2, memory when /proc is unavailable). Unknown is never zero. */
#define PP_UNKNOWN_NS (-1LL)

#include "control/hist.h"
#include "control/observation.h"
#include "control/policy.h"
#include "control/decide.h"
#include "control/declog.h"
#include "control/admit.h"

#endif
