/* clattn tune: measure the projection GEMMs on a device and record the fastest for later runs. */
#include "cli.h"
#include "commands.h"

#include <stdio.h>

static const char tune_help[] =
    "usage: clattn tune [--device SPEC] [--json]\n"
    "\n"
    "Measure the projection GEMM on the device (X 512x768 . W 768x2304: CLBlast's SGEMM and clattn's own\n"
    "kernel with several tiles) and the fused kernel's tiles (SDPA B=1 H=8 L=S=1024 D=64), each compiled,\n"
    "warmed up and timed at its best of three runs. The fastest are recorded with the program cache\n"
    "(keyed by device, driver and clattn version), and later contexts on the device use them unless\n"
    "CLATTN_GEMM/options.gemm or CLATTN_TILE/options.tile say otherwise. Takes seconds.\n"
    "\n"
    "  --device SPEC   the device (default: CLATTN_DEVICE, else the first GPU, else the first device)\n"
    "  --json          one JSON object instead of text\n";

int cmd_tune(int argc, char **argv)
{
    bool json = false, help = false;
    const char *device = NULL;
    const cli_option opts[] = {{"device", NULL, &device}, {"json", &json, NULL}};
    int rc = cli_parse("tune", argc, argv, 2, opts, 2, &help);
    if (rc != CLI_OK || help) {
        fputs(tune_help, help && rc == CLI_OK ? stdout : stderr);
        return rc;
    }
    clattn_context *ctx;
    if ((rc = cli_open_context("tune", device, &ctx)) != CLI_OK)
        return rc;
    clattn_tune_result r;
    clattn_status st = clattn_tune(ctx, &r);
    if (st != CLATTN_SUCCESS) {
        rc = cli_fail_status("tune", ctx, st, "clattn_tune");
        clattn_context_free(ctx);
        return rc;
    }
    cli_report_warning("tune", ctx);
    const char *name = clattn_context_device_name(ctx);
    if (json) {
        fputs("{\"device\": ", stdout);
        cli_print_json_string(name);
        printf(", \"gemm\": \"%s\", \"gemm_gflops\": %.2f, \"clblast_gflops\": %.2f, \"clattn_gflops\": %.2f, "
               "\"fused_tile\": \"%s\", \"fused_gflops\": %.2f, \"fused_default_gflops\": %.2f, \"candidates\": %u, "
               "\"seconds\": %.3f}\n",
               r.gemm, r.gemm_gflops, r.clblast_gflops, r.clattn_gflops, r.fused_tile, r.fused_gflops,
               r.fused_default_gflops, r.candidates, r.seconds);
    } else {
        printf("device        %s\n"
               "CLBlast       %.1f GFLOP/s%s\n"
               "clattn        %.1f GFLOP/s (fastest of its tiles)%s\n"
               "chosen GEMM   %s, %.1f GFLOP/s\n",
               name, r.clblast_gflops, r.clblast_gflops > 0 ? "" : " (could not run)", r.clattn_gflops,
               r.clattn_gflops > 0 ? "" : " (did not build)", r.gemm, r.gemm_gflops);
        if (r.fused_tile[0])
            printf("fused tiles   %s, %.1f GFLOP/s (the device's default: %.1f)\n", r.fused_tile, r.fused_gflops,
                   r.fused_default_gflops);
        else
            printf("fused tiles   set by CLATTN_TILE or options.tile: not measured\n");
        printf("              %u candidates measured in %.1f s; recorded for later runs\n", r.candidates, r.seconds);
    }
    clattn_context_free(ctx);
    return CLI_OK;
}
