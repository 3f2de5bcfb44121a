/* Units: durations, sizes and their formatting. See units.h. Small, pure, no allocation. */
#include "sim/units.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pp_units_parse_double(const char *text, double *out) {
  if (!text || !*text) return -1;
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || *end != '\0' || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

/* Splits "12.5ms" into a number and a suffix; the suffix must match the table. */
static int parse_with_suffix(const char *text, const char *const *names, const double *scale,
                             double default_scale, double *out) {
  if (!text) return -1;
  while (isspace((unsigned char)*text))
    text++;
  if (!*text) return -1;
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno || end == text || !isfinite(v) || v < 0) return -1;
  while (isspace((unsigned char)*end))
    end++;
  size_t n = strlen(end);
  while (n > 0 && isspace((unsigned char)end[n - 1]))
    n--;
  if (n == 0) {
    *out = v * default_scale;
    return 0;
  }
  for (size_t i = 0; names[i]; i++) {
    if (strlen(names[i]) == n && strncmp(end, names[i], n) == 0) {
      *out = v * scale[i];
      return 0;
    }
  }
  return -1;
}

int pp_units_parse_duration(const char *text, uint64_t *out_ns) {
  static const char *const names[] = {"ns", "us", "ms", "s", "m", "h", NULL};
  static const double scale[] = {1, 1e3, 1e6, 1e9, 60e9, 3600e9};
  double v;
  if (parse_with_suffix(text, names, scale, 1e9, &v) != 0) return -1;
  if (v > 9.2e18) return -1;
  *out_ns = (uint64_t)llround(v);
  return 0;
}

int pp_units_parse_bytes(const char *text, uint64_t *out_bytes) {
  static const char *const names[] = {"B", "KB", "MB", "GB", "KiB", "MiB", "GiB", "kB", NULL};
  static const double scale[] = {1, 1e3, 1e6, 1e9, 1024.0, 1048576.0, 1073741824.0, 1e3};
  double v;
  if (parse_with_suffix(text, names, scale, 1, &v) != 0) return -1;
  if (v > 9.2e18) return -1;
  *out_bytes = (uint64_t)llround(v);
  return 0;
}

char *pp_units_format_ns(double ns, char *buf, size_t cap) {
  if (ns < 0) {
    snprintf(buf, cap, "-");
  } else if (ns < 1e3) {
    snprintf(buf, cap, "%.0fns", ns);
  } else if (ns < 1e6) {
    snprintf(buf, cap, ns < 1e4 ? "%.2fus" : ns < 1e5 ? "%.1fus" : "%.0fus", ns / 1e3);
  } else if (ns < 1e9) {
    snprintf(buf, cap, ns < 1e7 ? "%.2fms" : ns < 1e8 ? "%.1fms" : "%.0fms", ns / 1e6);
  } else if (ns < 1e12) {
    snprintf(buf, cap, ns < 1e10 ? "%.2fs" : ns < 1e11 ? "%.1fs" : "%.0fs", ns / 1e9);
  } else {
    snprintf(buf, cap, "%.3gks", ns / 1e12);
  }
  return buf;
}

char *pp_units_format_bytes(double bytes, char *buf, size_t cap) {
  if (bytes < 1e3)
    snprintf(buf, cap, "%.0fB", bytes);
  else if (bytes < 1e6)
    snprintf(buf, cap, "%.0fkB", bytes / 1e3);
  else if (bytes < 1e9)
    snprintf(buf, cap, "%.0fMB", bytes / 1e6);
  else
    snprintf(buf, cap, "%.2fGB", bytes / 1e9);
  return buf;
}
