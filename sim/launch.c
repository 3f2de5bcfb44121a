/* The jobs pp-sim launch writes; see launch.h. */
#include "sim/launch.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void pp_launch_shell_quote(FILE *f, const char *w) {
  int safe = *w != 0;
  for (const char *p = w; *p && safe; p++)
    safe = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           strchr("_./=,:@%+-", *p) != NULL;
  if (safe) {
    fputs(w, f);
    return;
  }
  fputc('\'', f);
  for (const char *p = w; *p; p++) {
    if (*p == '\'')
      fputs("'\\''", f);
    else
      fputc(*p, f);
  }
  fputc('\'', f);
}

/* A YAML (JSON) double-quoted string. */
static void yaml_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", f);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* PP_SIM sweep ARGS... (each quoted), without --shard/--db. */
static void sweep_words(FILE *f, const pp_launch *l) {
  pp_launch_shell_quote(f, l->pp_sim);
  fputs(" sweep", f);
  for (size_t i = 0; i < l->n_sweep_args; i++) {
    fputc(' ', f);
    pp_launch_shell_quote(f, l->sweep_args[i]);
  }
}

static void header(FILE *f, const pp_launch *l, const char *what) {
  fprintf(f, "# %s written by pp-sim launch (docs/SIM.md, \"Sweeps past one machine\").\n", what);
  fprintf(f, "# Sweep %s of %s: %" PRIu64 " units (variants x seeds) in %u shards; shard I\n",
          l->hash ? l->hash : "?", l->scenario ? l->scenario : "?", l->units, l->shards);
  fprintf(f, "# writes %s/shard-I.db. When every task is done:\n#   ", l->out_dir);
  pp_launch_shell_quote(f, l->pp_sim);
  fputs(" merge ", f);
  pp_launch_shell_quote(f, l->out_dir);
  fputs("/merged.db ", f);
  pp_launch_shell_quote(f, l->out_dir);
  fputs("/shard-*.db\n", f);
}

static int write_slurm(FILE *f, const pp_launch *l) {
  fputs("#!/bin/bash\n", f);
  header(f, l, "A Slurm job array");
  fputs("# Submit from the directory the paths are relative to: sbatch THIS_FILE\n", f);
  fprintf(f, "#SBATCH --job-name=%s\n", l->name);
  fprintf(f, "#SBATCH --array=1-%u", l->shards);
  if (l->max_running) fprintf(f, "%%%u", l->max_running);
  fputs("\n#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n", f);
  fprintf(f, "#SBATCH --output=%s/slurm-%%A_%%a.out\n", l->out_dir);
  if (l->partition) fprintf(f, "#SBATCH --partition=%s\n", l->partition);
  if (l->time_limit) fprintf(f, "#SBATCH --time=%s\n", l->time_limit);
  fputs("set -euo pipefail\n", f);
  fputs("i=${SLURM_ARRAY_TASK_ID:?run this script with sbatch: it is a job array}\n", f);
  fputs("exec ", f);
  sweep_words(f, l);
  fprintf(f, " --shard \"$i/%u\" --db ", l->shards);
  pp_launch_shell_quote(f, l->out_dir);
  fputs("/shard-\"$i\".db --quiet\n", f);
  return 0;
}

static int write_parallel(FILE *f, const pp_launch *l) {
  char *cmd = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&cmd, &len);
  if (!m) return -1;
  fputs("mkdir -p ", m);
  pp_launch_shell_quote(m, l->out_dir);
  fputs(" && ", m);
  sweep_words(m, l);
  fprintf(m, " --shard {}/%u --db ", l->shards);
  pp_launch_shell_quote(m, l->out_dir);
  fputs("/shard-{}.db --quiet", m);
  fclose(m);
  header(f, l, "A GNU parallel command line");
  if (l->n_sshlogins)
    fputs("# Every host needs the same pp-sim at the same path; the scenario goes over with\n"
          "# --basefile (with its policy files if it names any: keep them beside it there) and\n"
          "# each shard database comes back with --return.\n",
          f);
  fprintf(f, "seq 1 %u | parallel --halt soon,fail=1", l->shards);
  if (l->jobs) fprintf(f, " --jobs %u", l->jobs);
  fputs(" --joblog ", f);
  pp_launch_shell_quote(f, l->out_dir);
  fputs("/parallel.log", f);
  for (size_t i = 0; i < l->n_sshlogins; i++) {
    fputs(" --sshlogin ", f);
    pp_launch_shell_quote(f, l->sshlogins[i]);
  }
  if (l->n_sshlogins) {
    if (l->scenario_path) {
      fputs(" --basefile ", f);
      pp_launch_shell_quote(f, l->scenario_path);
    }
    fputs(" --return ", f);
    pp_launch_shell_quote(f, l->out_dir);
    fputs("/shard-{}.db --cleanup", f);
  }
  fputc(' ', f);
  pp_launch_shell_quote(f, cmd);
  fputc('\n', f);
  free(cmd);
  return 0;
}

static int write_k8s(FILE *f, const pp_launch *l) {
  char *cmd = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&cmd, &len);
  if (!m) return -1;
  /* JOB_COMPLETION_INDEX counts from 0, shards from 1. */
  fputs("i=$((JOB_COMPLETION_INDEX + 1)) && mkdir -p ", m);
  pp_launch_shell_quote(m, l->out_dir);
  fputs(" && exec ", m);
  sweep_words(m, l);
  fprintf(m, " --shard \"$i/%u\" --db ", l->shards);
  pp_launch_shell_quote(m, l->out_dir);
  fputs("/shard-\"$i\".db --quiet", m);
  fclose(m);
  header(f, l, "A Kubernetes Indexed Job");
  fputs("# The image holds pp-sim and the scenario at the paths below (the sweep's hash covers\n"
        "# the scenario's bytes, so merge refuses shards run on another version of it); the\n"
        "# shard databases go to the ReadWriteMany volume claimed below.\n",
        f);
  fputs("apiVersion: batch/v1\nkind: Job\nmetadata:\n", f);
  fprintf(f, "  name: %s\n", l->name);
  fprintf(f, "  labels: {app: %s}\n", l->name);
  fputs("spec:\n  completionMode: Indexed\n", f);
  fprintf(f, "  completions: %u\n", l->shards);
  fprintf(f, "  parallelism: %u\n", l->parallelism ? l->parallelism : l->shards);
  fputs("  # A shard is deterministic: a failure is a bug or a lost node, not luck; retry a few.\n"
        "  backoffLimit: 3\n"
        "  template:\n"
        "    metadata:\n",
        f);
  fprintf(f, "      labels: {app: %s}\n", l->name);
  fputs("    spec:\n      restartPolicy: Never\n      containers:\n        - name: shard\n", f);
  fprintf(f, "          image: %s\n", l->image);
  fprintf(f, "          workingDir: %s\n", l->workdir);
  fputs("          command: [sh, -c]\n          args:\n            - ", f);
  yaml_string(f, cmd);
  fputs("\n          resources:\n"
        "            requests: {cpu: \"1\", memory: 256Mi}\n"
        "            limits: {memory: 1Gi}\n"
        "          volumeMounts:\n",
        f);
  fprintf(f, "            - {name: results, mountPath: %s}\n", l->out_dir);
  fputs("      volumes:\n", f);
  fprintf(f, "        - name: results\n          persistentVolumeClaim: {claimName: %s}\n",
          l->claim);
  free(cmd);
  return 0;
}

int pp_launch_write(FILE *f, const pp_launch *l, char *errbuf, size_t errcap) {
  if (l->shards < 1 || !l->name || !l->out_dir || !l->pp_sim || l->n_sweep_args < 1) {
    snprintf(errbuf, errcap, "a launch needs --shards N, a name, an output directory and a sweep");
    return -1;
  }
  switch (l->engine) {
  case PP_LAUNCH_SLURM: return write_slurm(f, l);
  case PP_LAUNCH_PARALLEL: return write_parallel(f, l);
  case PP_LAUNCH_K8S:
    if (!l->image || !l->claim || !l->workdir || l->out_dir[0] != '/') {
      snprintf(errbuf, errcap,
               "k8s needs --image, --claim, --workdir and an absolute --out (the "
               "results volume's mount point)");
      return -1;
    }
    return write_k8s(f, l);
  }
  snprintf(errbuf, errcap, "unknown engine");
  return -1;
}
