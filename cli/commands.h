/*
 * commands.h — every kvverify subcommand: int kvv_cmd_NAME(argc, argv), where
 * argv[0] is the subcommand's name. Each returns a process exit code
 * (DESIGN.md §6). Only cli/ calls exit().
 */
#ifndef KVV_COMMANDS_H
#define KVV_COMMANDS_H

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary; /* one line for `kvverify --help` */
} kvv_command;

int kvv_cmd_info(int argc, char **argv);
int kvv_cmd_audit(int argc, char **argv);
int kvv_cmd_kv(int argc, char **argv);
int kvv_cmd_patch(int argc, char **argv);
int kvv_cmd_greedy(int argc, char **argv);
int kvv_cmd_invariance(int argc, char **argv);
int kvv_cmd_compare(int argc, char **argv);
int kvv_cmd_numerics(int argc, char **argv);
int kvv_cmd_bench(int argc, char **argv);
int kvv_cmd_evict(int argc, char **argv);
int kvv_cmd_memory(int argc, char **argv);
int kvv_cmd_latency(int argc, char **argv);
int kvv_cmd_run(int argc, char **argv);
int kvv_cmd_synth(int argc, char **argv);
int kvv_cmd_tokenize(int argc, char **argv);
int kvv_cmd_vectors(int argc, char **argv);
int kvv_cmd_suite(int argc, char **argv);

#endif
