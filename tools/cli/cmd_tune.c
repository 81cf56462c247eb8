/* clattn tune: measure every kernel family's candidates on a device and record the fastest for later
 * runs. */
#include "cli.h"
#include "commands.h"

#include <stdio.h>
#include <string.h>

static const char tune_help[] =
    "usage: clattn tune [--device SPEC] [--json]\n"
    "\n"
    "Measure every kernel family's candidates on the device: the projection GEMM (X 512x768 . W 768x2304:\n"
    "CLBlast's SGEMM and clattn's own kernel with several tiles), the fused kernel's tiles (SDPA B=1 H=8\n"
    "L=S=1024 D=64), the decode kernels' splits and rows per group (H=32 over 8 K/V heads, L=4, S=4096,\n"
    "D=128) and the staged kernels' shape (B=1 H=8 L=S=512 D=64), each compiled, warmed up and timed at\n"
    "its best of three runs. The fastest are recorded with the program cache (keyed by device, driver\n"
    "and clattn version), and later contexts on the device use them unless CLATTN_GEMM/options.gemm,\n"
    "CLATTN_TILE/options.tile or CLATTN_TUNING/options.tuning fix a family (then not measured). Takes\n"
    "seconds to minutes (every candidate is compiled).\n"
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
    clattn_tune_family fam[CLATTN_TUNE_MAX_FAMILIES];
    size_t nfam = 0;
    if ((st = clattn_tune_report(ctx, fam, CLATTN_TUNE_MAX_FAMILIES, &nfam)) != CLATTN_SUCCESS) {
        rc = cli_fail_status("tune", ctx, st, "clattn_tune_report");
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
               "\"seconds\": %.3f, \"families\": [",
               r.gemm, r.gemm_gflops, r.clblast_gflops, r.clattn_gflops, r.fused_tile, r.fused_gflops,
               r.fused_default_gflops, r.candidates, r.seconds);
        for (size_t i = 0; i < nfam; i++)
            printf("%s{\"family\": \"%s\", \"shape\": \"%s\", \"unit\": \"%s\", \"chosen\": \"%s\", "
                   "\"default\": \"%s\", \"speed\": %.2f, \"default_speed\": %.2f, \"candidates\": %u, "
                   "\"fixed\": %s}",
                   i ? ", " : "", fam[i].family, fam[i].shape, fam[i].unit, fam[i].chosen, fam[i].device_default,
                   fam[i].speed, fam[i].default_speed, fam[i].candidates, fam[i].fixed ? "true" : "false");
        puts("]}");
    } else {
        printf("device        %s\n"
               "CLBlast       %.1f GFLOP/s%s\n"
               "clattn        %.1f GFLOP/s (fastest of its tiles)%s\n"
               "chosen GEMM   %s, %.1f GFLOP/s\n",
               name, r.clblast_gflops, r.clblast_gflops > 0 ? "" : " (could not run)", r.clattn_gflops,
               r.clattn_gflops > 0 ? "" : " (did not build)", r.gemm, r.gemm_gflops);
        const clattn_tune_family *fused = NULL;
        for (size_t i = 0; i < nfam; i++)
            if (strcmp(fam[i].family, "fused") == 0)
                fused = &fam[i];
        /* The tile in options.tile's syntax, and every fused value (VEC, the row layout) in options.tuning's. */
        if (r.fused_tile[0])
            printf("fused tiles   %s (fused=%s), %.1f GFLOP/s (the device's default: %.1f)\n", r.fused_tile,
                   fused ? fused->chosen : "?", r.fused_gflops, r.fused_default_gflops);
        else
            printf("fused tiles   set by CLATTN_TILE or options.tile: not measured\n");
        for (size_t i = 0; i < nfam; i++) {
            if (strcmp(fam[i].family, "gemm") == 0 || strcmp(fam[i].family, "fused") == 0)
                continue; /* said above */
            if (fam[i].fixed)
                printf("%-13s %s, set by CLATTN_TUNING or options.tuning: not measured\n", fam[i].family,
                       fam[i].chosen);
            else
                printf("%-13s %s, %.1f %s (the device's default %s: %.1f) on %s\n", fam[i].family, fam[i].chosen,
                       fam[i].speed, fam[i].unit, fam[i].device_default, fam[i].default_speed, fam[i].shape);
        }
        unsigned measured = 0;
        for (size_t i = 0; i < nfam; i++)
            measured += fam[i].candidates;
        printf("              %u candidates measured in %.1f s; recorded for later runs\n", measured, r.seconds);
    }
    clattn_context_free(ctx);
    return CLI_OK;
}
