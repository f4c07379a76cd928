/* The subcommands of nvmf-gateway, each a main() of its own. */
#ifndef GW_TOOLS_H
#define GW_TOOLS_H

int cmd_discover(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_mount(int argc, char **argv);
int cmd_nbd(int argc, char **argv);
/* status, stats, reset, reload, export-add, export-remove (argv[0]). */
int cmd_control(int argc, char **argv);

#endif
