/* `clattn devices`: every OpenCL platform and device with the facts that matter for attention, as a
 * table or JSON, and `--check`, a short conformance run against the fp64 reference on each device. */
#include "cli.h"
#include "commands.h"
#include "conformance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct device_facts {
    clattn_device_info info;
    char cl_version[128], c_version[128], driver[128], extensions[8192];
    cl_uint compute_units, clock_mhz;
    cl_ulong global_mem, local_mem, max_alloc;
    size_t max_work_group;
    bool fp16, fp64, subgroups, is_default;
} device_facts;

static void device_string(cl_device_id dev, cl_device_info what, char *out, size_t size)
{
    if (clGetDeviceInfo(dev, what, size, out, NULL) != CL_SUCCESS)
        snprintf(out, size, "?");
    out[size - 1] = '\0';
}

static bool has_extension(const char *extensions, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(extensions, name); p; p = strstr(p + 1, name))
        if ((p == extensions || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

static void query_facts(device_facts *f)
{
    cl_device_id dev = f->info.device;
    device_string(dev, CL_DEVICE_VERSION, f->cl_version, sizeof f->cl_version);
    device_string(dev, CL_DEVICE_OPENCL_C_VERSION, f->c_version, sizeof f->c_version);
    device_string(dev, CL_DRIVER_VERSION, f->driver, sizeof f->driver);
    device_string(dev, CL_DEVICE_EXTENSIONS, f->extensions, sizeof f->extensions);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof f->compute_units, &f->compute_units, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_CLOCK_FREQUENCY, sizeof f->clock_mhz, &f->clock_mhz, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof f->global_mem, &f->global_mem, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof f->local_mem, &f->local_mem, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof f->max_alloc, &f->max_alloc, NULL);
    clGetDeviceInfo(dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof f->max_work_group, &f->max_work_group, NULL);
    f->fp16 = has_extension(f->extensions, "cl_khr_fp16");
    f->fp64 = has_extension(f->extensions, "cl_khr_fp64");
    f->subgroups = has_extension(f->extensions, "cl_khr_subgroups") ||
                   has_extension(f->extensions, "cl_intel_subgroups");
}

/* All devices with their facts; returns the count, or reports and returns 0 with *rc set. */
static size_t load_devices(device_facts **out, int *rc)
{
    *out = NULL;
    size_t count = 0;
    clattn_status st = clattn_device_count(&count);
    if (st != CLATTN_SUCCESS || count == 0) {
        *rc = cli_fail(CLI_NO_PLATFORM, "devices", "%s", clattn_last_error(NULL));
        return 0;
    }
    device_facts *f = calloc(count, sizeof *f);
    clattn_device_info chosen;
    bool have_default = clattn_device_select(NULL, &chosen) == CLATTN_SUCCESS;
    for (size_t i = 0; f && i < count; i++) {
        if ((st = clattn_device_get(i, &f[i].info)) != CLATTN_SUCCESS) {
            free(f);
            *rc = cli_fail_status("devices", NULL, st, "listing devices");
            return 0;
        }
        query_facts(&f[i]);
        f[i].is_default = have_default && f[i].info.device == chosen.device;
    }
    if (!f) {
        *rc = cli_fail(CLI_RUNTIME_ERROR, "devices", "out of memory");
        return 0;
    }
    *out = f;
    return count;
}

static const char *type_name(cl_device_type t)
{
    return t & CL_DEVICE_TYPE_GPU ? "gpu" : t & CL_DEVICE_TYPE_CPU ? "cpu" : t & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator" : "other";
}

static void print_json(const device_facts *f, size_t n)
{
    printf("{\n  \"devices\": [");
    for (size_t i = 0; i < n; i++) {
        const device_facts *d = &f[i];
        printf("%s\n    {\"spec\": \"%u:%u\", \"platform\": ", i ? "," : "", d->info.platform_index, d->info.device_index);
        cli_print_json_string(d->info.platform_name);
        printf(", \"name\": ");
        cli_print_json_string(d->info.name);
        printf(", \"vendor\": ");
        cli_print_json_string(d->info.vendor);
        printf(", \"type\": \"%s\", \"opencl_version\": ", type_name(d->info.type));
        cli_print_json_string(d->cl_version);
        printf(", \"opencl_c_version\": ");
        cli_print_json_string(d->c_version);
        printf(", \"driver_version\": ");
        cli_print_json_string(d->driver);
        printf(",\n     \"compute_units\": %u, \"clock_mhz\": %u, \"global_mem_bytes\": %llu, "
               "\"local_mem_bytes\": %llu, \"max_alloc_bytes\": %llu, \"max_work_group_size\": %zu,\n"
               "     \"fp16\": %s, \"fp64\": %s, \"subgroups\": %s, \"default\": %s,\n"
               "     \"fp16_arithmetic_native\": %s, \"storage_types\": [\"float32\", \"float16\", \"bfloat16\", "
               "\"int8\"], \"arithmetic\": \"float32\"}",
               d->compute_units, d->clock_mhz, (unsigned long long)d->global_mem, (unsigned long long)d->local_mem,
               (unsigned long long)d->max_alloc, d->max_work_group, d->fp16 ? "true" : "false",
               d->fp64 ? "true" : "false", d->subgroups ? "true" : "false", d->is_default ? "true" : "false",
               d->fp16 ? "true" : "false");
    }
    printf("\n  ]\n}\n");
}

static void print_table(const device_facts *f, size_t n)
{
    unsigned last_platform = (unsigned)-1;
    for (size_t i = 0; i < n; i++) {
        const device_facts *d = &f[i];
        if (d->info.platform_index != last_platform) {
            printf("Platform %u: %s\n", d->info.platform_index, d->info.platform_name);
            last_platform = d->info.platform_index;
        }
        printf("  %u:%u  %s%s\n", d->info.platform_index, d->info.device_index, d->info.name,
               d->is_default ? "   [default]" : "");
        printf("       vendor %s, type %s\n", d->info.vendor, type_name(d->info.type));
        printf("       %s, %s, driver %s\n", d->cl_version, d->c_version, d->driver);
        printf("       %u compute units at %u MHz; global memory %.1f GiB, local %.0f KiB, max allocation %.1f GiB\n",
               d->compute_units, d->clock_mhz, d->global_mem / 1073741824.0, d->local_mem / 1024.0,
               d->max_alloc / 1073741824.0);
        printf("       max work-group size %zu; fp16 %s, fp64 %s, subgroups %s\n", d->max_work_group,
               d->fp16 ? "yes" : "no", d->fp64 ? "yes" : "no", d->subgroups ? "yes" : "no");
        /* Storage needs no extension (vload_half/vstore_half are core OpenCL 1.2, bfloat16 and int8 are
         * integer work), so every device runs every type; clattn's arithmetic is float32 throughout. */
        printf("       storage types float32, float16, bfloat16, int8 (K/V); arithmetic float32 "
               "(native fp16 arithmetic: %s, unused)\n", d->fp16 ? "yes" : "no");
    }
}

static const char devices_help[] =
    "usage: clattn devices [--json] [--check]\n"
    "\n"
    "Lists every OpenCL platform and device, with the P:D index that --device and CLATTN_DEVICE accept.\n"
    "  --json    one JSON document with the same facts\n"
    "  --check   run a short conformance check (a few shapes, masks and variants, and float16,\n"
    "            bfloat16 and int8 storage, against a float64 host reference) on every device;\n"
    "            exit status 1 if any device fails\n"
    "Exit status 3 when no OpenCL platform or device exists.\n";

int cmd_devices(int argc, char **argv)
{
    bool json = false, check = false, help = false;
    const cli_option opts[] = {{"json", &json, NULL}, {"check", &check, NULL}};
    int rc = cli_parse("devices", argc, argv, 2, opts, 2, &help);
    if (rc != CLI_OK || help) {
        fputs(devices_help, help && rc == CLI_OK ? stdout : stderr);
        return rc;
    }
    if (json && check)
        return cli_fail(CLI_USAGE_ERROR, "devices", "--json and --check exclude each other");
    device_facts *f;
    size_t n = load_devices(&f, &rc);
    if (n == 0)
        return rc;
    if (json)
        print_json(f, n);
    else if (!check)
        print_table(f, n);
    if (check) {
        for (size_t i = 0; i < n; i++) {
            char spec[32];
            snprintf(spec, sizeof spec, "%u:%u", f[i].info.platform_index, f[i].info.device_index);
            conformance_result r;
            conformance_run(spec, &r);
            printf("%-5s %s  %s  (%zu cases, max error %.3g; of them %zu with storage types, max error %.3g)%s%s\n",
                   r.passed ? "PASS" : "FAIL", spec, f[i].info.name, r.cases, r.max_error, r.typed_cases,
                   r.typed_max_error, r.passed ? "" : ": ", r.passed ? "" : r.message);
            if (!r.passed)
                rc = CLI_RUNTIME_ERROR;
        }
    }
    free(f);
    return rc;
}
