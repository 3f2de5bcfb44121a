/* pp-sim launch: the job a batch engine needs to run a sweep's shards (docs/SIM.md, "Sweeps
 * past one machine"). Each generator writes text only — a Slurm job-array script, a GNU
 * parallel command line, a Kubernetes Indexed Job manifest — whose every task runs
 *     PP_SIM sweep SWEEP-ARGS... --shard I/N --db OUT/shard-I.db --quiet
 * for I = 1..N, and nothing of ours schedules anything. `pp-sim merge` joins the shards. */
#ifndef PP_SIM_LAUNCH_H
#define PP_SIM_LAUNCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum pp_launch_engine {
  PP_LAUNCH_SLURM,
  PP_LAUNCH_PARALLEL,
  PP_LAUNCH_K8S
} pp_launch_engine;

typedef struct pp_launch {
  pp_launch_engine engine;
  uint32_t shards;
  const char *name;              /* job name */
  const char *out_dir;           /* where the shard databases go (k8s: inside the results volume) */
  const char *pp_sim;            /* the pp-sim the tasks run */
  const char *const *sweep_args; /* the scenario and the sweep's options, verbatim */
  size_t n_sweep_args;
  const char *scenario_path; /* parallel --basefile with --sshlogin */
  /* For the header comment. */
  const char *hash, *scenario;
  uint64_t units;
  /* slurm */
  const char *partition, *time_limit; /* NULL: the cluster's defaults */
  uint32_t max_running;               /* %M on --array; 0: no limit */
  /* parallel */
  uint32_t jobs; /* per host; 0: one per core */
  const char *const *sshlogins;
  size_t n_sshlogins;
  /* k8s */
  const char *image, *claim, *workdir;
  uint32_t parallelism;
} pp_launch;

/* Writes the job. Returns 0, or -1 when a required field is missing (a sentence in errbuf). */
int pp_launch_write(FILE *f, const pp_launch *l, char *errbuf, size_t errcap);
/* Shell word: as is when it holds only safe characters, else in single quotes. */
void pp_launch_shell_quote(FILE *f, const char *word);

#endif
