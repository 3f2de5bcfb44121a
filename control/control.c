/* libppcontrol's error strings. The one table every pp_ctl_err code maps through, so a
 * message printed by the server, pp-sim and pp-replay reads the same. */
#include "control/control.h"

const char *pp_ctl_strerror(int err) {
  switch (err) {
  case PP_CTL_OK: return "success";
  case PP_CTL_EINVAL: return "invalid argument or field value";
  case PP_CTL_ENOSPC: return "output buffer too small";
  case PP_CTL_EPARSE: return "malformed input";
  case PP_CTL_ERANGE: return "number out of range for its field";
  case PP_CTL_ENOENT: return "unknown field";
  default: return "unknown error";
  }
}
