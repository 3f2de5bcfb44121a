/* The Date value and the monotonic-to-realtime offset (see wallclock.h). */
#include "server/base/wallclock.h"

#include <string.h>

static void two(char *p, int v) {
  p[0] = (char)('0' + v / 10);
  p[1] = (char)('0' + v % 10);
}

void pp_http_date(int64_t t, char *out) {
  static const char days[] = "ThuFriSatSunMonTueWed"; /* 1970-01-01 was a Thursday */
  static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
  int64_t day = t >= 0 ? t / 86400 : (t - 86399) / 86400;
  int64_t sec = t - day * 86400;
  /* civil date from days since the epoch (Howard Hinnant's algorithm) */
  int64_t z = day + 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int d = (int)(doy - (153 * mp + 2) / 5 + 1);
  int m = (int)(mp < 10 ? mp + 3 : mp - 9);
  int64_t y = yoe + era * 400 + (m <= 2);
  int wd = (int)(((day % 7) + 7) % 7);
  memcpy(out, days + wd * 3, 3);
  out[3] = ',';
  out[4] = ' ';
  two(out + 5, d);
  out[7] = ' ';
  memcpy(out + 8, months + (m - 1) * 3, 3);
  out[11] = ' ';
  int yy = (int)(y % 10000);
  two(out + 12, yy / 100);
  two(out + 14, yy % 100);
  out[16] = ' ';
  two(out + 17, (int)(sec / 3600));
  out[19] = ':';
  two(out + 20, (int)(sec / 60 % 60));
  out[22] = ':';
  two(out + 23, (int)(sec % 60));
  memcpy(out + 25, " GMT", 5);
}

void pp_wallclock_set(pp_wallclock *w, int64_t realtime_ns, int64_t monotonic_ns) {
  w->real_minus_mono_ns = realtime_ns - monotonic_ns;
  int64_t second = realtime_ns / 1000000000;
  if (second != w->second || !w->date[0]) {
    w->second = second;
    pp_http_date(second, w->date);
  }
}
