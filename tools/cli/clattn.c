/* clattn: the command-line face of the library. Subcommands live in cmd_*.c. */
#include "cli.h"
#include "commands.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: clattn <command> [options]\n"
    "\n"
    "Scaled dot-product and multi-head attention on any OpenCL device.\n"
    "\n"
    "commands:\n"
    "  devices   list OpenCL devices (--json, --check runs a conformance check on each)\n"
    "  sdpa      attention on Q, K, V arrays from .npy files\n"
    "  mha       a multi-head attention layer on .npy inputs and weights\n"
    "  demo      the tutorial's worked example, \"我 爱 人工 智能\"\n"
    "  bench     time a fixed set of cases (fused, decode and staged paths) on one device\n"
    "  tune      measure the projection GEMMs on a device and record the fastest\n"
    "  ring      ring attention across MPI processes (mpirun -n P clattn ring ...; builds with MPI)\n"
    "\n"
    "Run 'clattn <command> --help' for a command's options. --device SPEC (P:D, cpu, gpu, accelerator\n"
    "or part of a device name) overrides CLATTN_DEVICE. Exit status: 0 success, 1 OpenCL or library\n"
    "failure, 2 usage or input-file error, 3 no OpenCL platform.\n";

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

static int run(int argc, char **argv);

#if !defined(CLATTN_HAVE_MPI)
/* This build found no MPI (meson -Dmpi=auto): say how to get the subcommand rather than "unknown". */
int cmd_ring(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("clattn ring: this clattn was built without MPI; install Open MPI (Debian: libopenmpi-dev openmpi-bin)\n"
          "and configure again (meson setup --reconfigure build -Dmpi=enabled)\n", stderr);
    return CLI_USAGE_ERROR;
}
#endif

int main(int argc, char **argv)
{
    int rc = run(argc, argv);
#if defined(__SANITIZE_ADDRESS__)
    /* Sanitizer builds only: LeakSanitizer's exit-time check races the OpenCL runtime's worker
     * threads as they are torn down (its tracer can crash); checking here avoids that. */
    __lsan_do_leak_check();
#endif
    return rc;
}

static int run(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_USAGE_ERROR;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return CLI_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("clattn %s (library %s)\n", CLATTN_VERSION_STRING, clattn_version_string());
        return CLI_OK;
    }
    static const struct { const char *name; int (*run)(int, char **); } commands[] = {
        {"devices", cmd_devices}, {"sdpa", cmd_sdpa}, {"mha", cmd_mha}, {"demo", cmd_demo}, {"bench", cmd_bench},
        {"tune", cmd_tune}, {"ring", cmd_ring},
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(argc, argv);
    fprintf(stderr, "clattn: unknown command '%s'\n\n%s", cmd, usage);
    return CLI_USAGE_ERROR;
}
