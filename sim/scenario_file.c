/* Scenario files: the only place the scenario loader touches the file system. */
#include "sim/scenario_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pp_sim_read_file(const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return PP_SIM_EIO;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    return PP_SIM_ENOMEM;
  }
  for (;;) {
    if (cap - n < 4096) {
      cap *= 2;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        return PP_SIM_ENOMEM;
      }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return PP_SIM_EIO;
  }
  buf[n] = 0;
  *out = buf;
  *len = n;
  return 0;
}

static void join(char *out, size_t cap, const char *dir, const char *rel) {
  if (rel[0] == '/' || !dir[0])
    snprintf(out, cap, "%s", rel);
  else
    snprintf(out, cap, "%s/%s", dir, rel);
}

static void file_err(pp_scn_error *err, const char *file, int line, const char *field,
                     const char *what, const char *path) {
  if (!err) return;
  memset(err, 0, sizeof *err);
  snprintf(err->file, sizeof err->file, "%s", file);
  err->line = line;
  err->column = line ? 1 : 0;
  snprintf(err->field, sizeof err->field, "%s", field);
  snprintf(err->message, sizeof err->message, "cannot read %s %.200s: %.100s", what, path,
           strerror(errno));
}

int pp_scenario_resolve(pp_scenario *s, const char *base_dir, const char *scenario_file,
                        pp_scn_error *err) {
  char path[PP_SCN_PATH_MAX * 2 + 2];
  for (uint32_t i = 0; i < s->n_configs; i++) {
    pp_config *c = &s->configs[i];
    if (!c->policy_path[0] || c->policy_loaded) continue;
    join(path, sizeof path, base_dir, c->policy_path);
    char *text;
    size_t len;
    char field[64];
    snprintf(field, sizeof field, "configs[%u].policy", i);
    if (pp_sim_read_file(path, &text, &len)) {
      file_err(err, scenario_file, c->policy_line, field, "policy file", path);
      return PP_SIM_EIO;
    }
    pp_policy_error perr;
    memset(&perr, 0, sizeof perr);
    int rc = pp_policy_parse(&c->policy, text, len, &perr);
    free(text);
    if (rc) {
      if (err) {
        memset(err, 0, sizeof *err);
        snprintf(err->file, sizeof err->file, "%s", path);
        err->line = perr.line;
        err->column = perr.column;
        snprintf(err->field, sizeof err->field, "%s", perr.field);
        snprintf(err->message, sizeof err->message, "%s (policy of config %s)",
                 perr.message[0] ? perr.message : pp_ctl_strerror(rc), c->name);
      }
      return PP_SIM_EPARSE;
    }
    c->policy_loaded = 1;
  }
  if (s->process == PP_ARRIVALS_TRACE && !s->trace_ns) {
    join(path, sizeof path, base_dir, s->trace_path);
    char *text;
    size_t len;
    if (pp_sim_read_file(path, &text, &len)) {
      file_err(err, scenario_file, 0, "arrivals.trace", "trace file", path);
      return PP_SIM_EIO;
    }
    int rc = pp_scenario_parse_trace(s, text, len, path, err);
    free(text);
    if (rc) return rc;
  }
  int rc = pp_scenario_validate(s, err);
  if (rc && err && !err->file[0]) snprintf(err->file, sizeof err->file, "%s", scenario_file);
  return rc;
}

int pp_scenario_load(pp_scenario *out, const char *path, pp_scn_error *err) {
  char *text;
  size_t len;
  int rc = pp_sim_read_file(path, &text, &len);
  if (rc) {
    pp_scenario_defaults(out);
    file_err(err, path, 0, "", "scenario", path);
    return rc;
  }
  rc = pp_scenario_parse(out, text, len, path, err);
  free(text);
  if (rc) return rc;
  char dir[PP_SCN_PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = 0;
  else
    dir[0] = 0;
  return pp_scenario_resolve(out, dir, path, err);
}
