/* Text units shared by the scenario loader, the sweep flags and the report printer.
 *
 * Pure string functions: durations ("250us", "25ms", "3s", "1.5m", "1h"; a bare number is
 * seconds), byte sizes ("80MB" = 80*10^6, "80MiB" = 80*2^20, "512KB", "1GiB"; a bare number is
 * bytes) and their human-readable formatting for tables. */
#ifndef PP_SIM_UNITS_H
#define PP_SIM_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* Parses a non-negative duration into ns. 0 on success, -1 if the text is not a duration. */
int pp_units_parse_duration(const char *text, uint64_t *out_ns);
/* Parses a non-negative byte size. 0 on success, -1 otherwise. */
int pp_units_parse_bytes(const char *text, uint64_t *out_bytes);
/* Parses a finite double (the whole string). 0 on success, -1 otherwise. */
int pp_units_parse_double(const char *text, double *out);

/* Formats a duration given in ns with 3-4 significant digits: "830us", "27.6ms", "2.76s".
 * Writes into buf (cap >= 16 is enough) and returns buf. */
char *pp_units_format_ns(double ns, char *buf, size_t cap);
/* Formats bytes as "130MB" / "1.2GB" (decimal units). Returns buf. */
char *pp_units_format_bytes(double bytes, char *buf, size_t cap);

#endif
