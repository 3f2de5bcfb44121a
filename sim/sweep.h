/* Sweeps: `--set policy.spawn_cooldown=1s,2s,5s` axes and their cross product, the seeds
 * each variant runs with, and the split of that work into shards.
 *
 * Each axis names a policy field (the names of pp_policy_field_names, optionally prefixed
 * with "policy.") and a comma-separated list of values. Variant k of the cross product is
 * decoded in mixed radix, the first axis varying slowest, so the order is stable and a
 * variant's label says exactly what it set.
 *
 * A unit of work is one variant with one seed: unit u = variant * n_seeds + seed index (the
 * variant varying slowest). Shard i of n (1-based) holds the units with u % n == i - 1, so
 * every unit is in exactly one shard for any n, and neighbouring variants (which cost about
 * the same) are dealt to different shards. Pure: no I/O, no allocation. */
#ifndef PP_SIM_SWEEP_H
#define PP_SIM_SWEEP_H

#include <stddef.h>
#include <stdint.h>

#include "control/control.h"

#define PP_SWEEP_MAX_AXES   8
#define PP_SWEEP_MAX_VALUES 64
#define PP_SWEEP_VALUE_MAX  32
#define PP_SWEEP_MAX_SEEDS  1024

typedef struct pp_sweep_axis {
  char field[64];
  size_t n_values;
  char values[PP_SWEEP_MAX_VALUES][PP_SWEEP_VALUE_MAX];
} pp_sweep_axis;

typedef struct pp_sweep {
  size_t n_axes;
  pp_sweep_axis axes[PP_SWEEP_MAX_AXES];
  size_t n_seeds; /* 0 until pp_sweep_set_seeds: the caller's single seed */
  uint64_t seeds[PP_SWEEP_MAX_SEEDS];
} pp_sweep;

void pp_sweep_init(pp_sweep *sw);
/* Adds an axis from "field=v1,v2". Each value is checked against a default policy with
 * pp_policy_set. Returns 0, or -1 with a sentence in errbuf. */
int pp_sweep_add(pp_sweep *sw, const char *spec, char *errbuf, size_t errcap);
/* Number of variants (1 with no axes). */
size_t pp_sweep_count(const pp_sweep *sw);
/* Applies variant k to *p (over its current values) and validates it; writes a label like
 * "spawn_cooldown=2s max_step=4". Returns 0, or -1 with errbuf filled. */
int pp_sweep_apply(const pp_sweep *sw, size_t k, pp_policy *p, char *label, size_t label_cap,
                   char *errbuf, size_t errcap);

/* Seeds from "42", "1,2,7" or "1-50" (ranges and lists mix: "1-3,10"); duplicates are an
 * error. Returns 0, or -1 with a sentence in errbuf. */
int pp_sweep_set_seeds(pp_sweep *sw, const char *spec, char *errbuf, size_t errcap);
/* Units of work: variants x seeds (a sweep without pp_sweep_set_seeds has one seed). */
size_t pp_sweep_units(const pp_sweep *sw);
/* Parses "I/N" (1 <= I <= N). Returns 0, or -1 with errbuf filled. */
int pp_sweep_parse_shard(const char *spec, uint32_t *index, uint32_t *count, char *errbuf,
                         size_t errcap);
/* 1 when unit u belongs to shard index of count. */
int pp_sweep_in_shard(size_t unit, uint32_t index, uint32_t count);
/* Units of a sweep of `units` units that shard index of count holds. */
size_t pp_sweep_shard_size(size_t units, uint32_t index, uint32_t count);
/* The shard's k-th unit (k < pp_sweep_shard_size), in the stable order. */
size_t pp_sweep_shard_unit(size_t k, uint32_t index, uint32_t count);
/* The canonical text of the axes and seeds: one "set FIELD=V1,V2" line per axis in order,
 * then "seeds S1,S2,...". Part of a sweep's identity (its hash). Returns the length, or -1
 * when cap is too small. */
int pp_sweep_canonical(const pp_sweep *sw, char *buf, size_t cap);
/* 64-bit FNV-1a over len bytes, continuing from h (start with PP_SWEEP_FNV_SEED). */
#define PP_SWEEP_FNV_SEED 0xcbf29ce484222325ull
uint64_t pp_sweep_fnv1a(uint64_t h, const void *data, size_t len);

#endif
