/* The clattn tool's view of the machine: `devices` (the table, --json parsed and typed, --check's
 * conformance run on every device), no OpenCL platform at all (exit 3, no output), --device and
 * CLATTN_DEVICE, and `tune` (its JSON and text, every figure consistent with the choice it reports). */
#include "cli_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

START_TEST(test_devices_table)
{
    EXPECT(EXIT_OK, "devices");
    expect_in("stdout", R.out, "Platform 0: ");
    expect_in("stdout", R.out, "0:0");
    expect_in("stdout", R.out, "[default]");
    const char *first = strstr(R.out, "[default]");
    ck_assert_msg(strstr(first + 1, "[default]") == NULL, "two defaults:\n%s", R.out);
}
END_TEST

START_TEST(test_devices_json)
{
    static const char *const no_env_device[] = {"CLATTN_DEVICE", NULL};
    clattn_env(no_env_device, "devices", "--json", (const char *)NULL);
    expect_status(EXIT_OK);
    ck_assert_str_eq(R.err, "");
    python_check_stdout(
        "devices.json",
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "assert d['devices'] and 'name' in d['devices'][0], d\n"
        "keys = {'spec': str, 'platform': str, 'name': str, 'vendor': str, 'type': str,\n"
        "        'opencl_version': str, 'opencl_c_version': str, 'driver_version': str,\n"
        "        'compute_units': int, 'clock_mhz': int, 'global_mem_bytes': int, 'local_mem_bytes': int,\n"
        "        'max_alloc_bytes': int, 'max_work_group_size': int,\n"
        "        'fp16': bool, 'fp64': bool, 'subgroups': bool, 'default': bool,\n"
        "        'fp16_arithmetic_native': bool, 'storage_types': list, 'arithmetic': str}\n"
        "for dev in d['devices']:\n"
        "    for k, t in keys.items():\n"
        "        assert k in dev, ('missing key', k, dev)\n"
        "        assert isinstance(dev[k], t), ('wrong type', k, dev[k])\n"
        "    assert dev['storage_types'] == ['float32', 'float16', 'bfloat16', 'int8'], dev['storage_types']\n"
        "    assert dev['arithmetic'] == 'float32', dev['arithmetic']\n"
        "    assert dev['fp16_arithmetic_native'] == dev['fp16'], 'native half arithmetic is cl_khr_fp16'\n"
        "    assert dev['type'] in ('cpu', 'gpu', 'accelerator', 'other'), dev['type']\n"
        "    p, _, i = dev['spec'].partition(':')\n"
        "    assert p.isdigit() and i.isdigit(), dev['spec']\n"
        "assert d['devices'][0]['spec'] == '0:0', d['devices'][0]['spec']\n"
        "assert sum(dev['default'] for dev in d['devices']) == 1, 'exactly one default'\n"
        "assert len({dev['spec'] for dev in d['devices']}) == len(d['devices']), 'specs are unique'\n");
}
END_TEST

START_TEST(test_devices_check)
{
    EXPECT(EXIT_OK, "devices", "--check");
    expect_in("stdout", R.out, "PASS");
    expect_in("stdout", R.out, "0:0");
    expect_in("stdout", R.out, "of them 12 with storage types"); /* float16, bfloat16, int8 on 3 paths */
    ck_assert_msg(strstr(R.out, "FAIL") == NULL, "a device failed its check:\n%s", R.out);

    EXPECT(EXIT_USAGE, "devices", "--json", "--check");
    expect_in("stderr", R.err, "--json");
    ck_assert_str_eq(R.out, "");
    EXPECT(EXIT_USAGE, "devices", "--check", "--json");
}
END_TEST

/* With no OpenCL platform at all (OCL_ICD_VENDORS naming an empty folder, in the child only). */
START_TEST(test_no_platform)
{
    const char *vendors = P("no-icds");
    ck_assert(mkdir(vendors, 0700) == 0);
    const char *const env[] = {fmt("OCL_ICD_VENDORS=%s", vendors), NULL};

    clattn_env(env, "devices", (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    expect_in("stderr", R.err, "pocl-opencl-icd");
    ck_assert_msg(strncmp(R.err, "clattn devices: ", 16) == 0, "stderr: %s", R.err);

    clattn_env(env, "devices", "--json", (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    clattn_env(env, "devices", "--check", (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    clattn_env(env, "demo", (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    expect_in("stderr", R.err, "pocl-opencl-icd");

    /* Valid inputs: the inputs are fine, the missing platform is what fails; no output appears. */
    rng.state = 7;
    const size_t sh[2] = {3, 4};
    const char *q = save_f32("q.npy", rand_floats(12, 1), 2, sh);
    clattn_env(env, "sdpa", "--q", q, "--k", q, "--v", q, "--out", P("o.npy"), (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    ck_assert(!exists(P("o.npy")));
    clattn_env(env, "mha", "--x", q, "--wq", save_f32("w.npy", rand_floats(16, 1), 2, (size_t[]){4, 4}), "--wk",
               P("w.npy"), "--wv", P("w.npy"), "--heads", "2", "--out", P("o.npy"), (const char *)NULL);
    expect_status(EXIT_NO_PLATFORM);
    ck_assert(!exists(P("o.npy")));
}
END_TEST

/* --device and CLATTN_DEVICE choose the device; a spec matching nothing is a usage error. */
START_TEST(test_device_selection)
{
    EXPECT(EXIT_OK, "demo", "--device", "0:0");
    EXPECT(EXIT_OK, "demo", "--device=0:0");
    static const char *const env_ok[] = {"CLATTN_DEVICE=0:0", NULL};
    clattn_env(env_ok, "demo", (const char *)NULL);
    expect_status(EXIT_OK);

    static const char *const env_bad[] = {"CLATTN_DEVICE=no-such-device-anywhere", NULL};
    clattn_env(env_bad, "demo", (const char *)NULL);
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "no-such-device-anywhere");
    expect_in("stderr", R.err, "0:0");
    /* --device wins over CLATTN_DEVICE. */
    clattn_env(env_bad, "demo", "--device", "0:0", (const char *)NULL);
    expect_status(EXIT_OK);

    EXPECT(EXIT_USAGE, "demo", "--device", "9:9");
    expect_in("stderr", R.err, "9:9");
    expect_in("stderr", R.err, "0:0"); /* the devices that do exist */
    ck_assert_msg(count_lines(R.err) == 1, "one line:\n%s", R.err);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* tune                                                                                            */
/* ---------------------------------------------------------------------------------------------- */

/* `clattn tune` in a program cache of its own (XDG_CACHE_HOME in the case's folder: the records it writes
 * would change every later test's GEMM): --json with every field typed, every family reported and each
 * choice the fastest of what it measured; the text form with CLATTN_TILE fixing the fused tiles and
 * CLATTN_TUNING the decode kernels' (nothing of them measured); usage errors. */
START_TEST(test_tune)
{
    const char *cache = P("cache");
    ck_assert(mkdir(cache, 0700) == 0);
    const char *const own_cache[] = {fmt("XDG_CACHE_HOME=%s", cache), "CLATTN_TILE", "CLATTN_GEMM", NULL};
    clattn_env(own_cache, "tune", "--json", (const char *)NULL);
    expect_status(EXIT_OK);
    ck_assert_str_eq(R.err, "");
    python_check_stdout(
        "tune.json",
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "keys = {'device': str, 'gemm': str, 'gemm_gflops': float, 'clblast_gflops': float, 'clattn_gflops': float,\n"
        "        'fused_tile': str, 'fused_gflops': float, 'fused_default_gflops': float, 'candidates': int,\n"
        "        'seconds': float, 'families': list}\n"
        "assert set(d) == set(keys), sorted(d)\n"
        "for k, t in keys.items():\n"
        "    assert isinstance(d[k], t) or (t is float and isinstance(d[k], int)), (k, d[k])\n"
        "assert d['gemm'] == 'clblast' or d['gemm'].startswith('clattn:'), d['gemm']\n"
        "best = max(d['clblast_gflops'], d['clattn_gflops'])\n"
        "assert best > 0 and d['gemm_gflops'] == best, ('not the fastest GEMM', d)\n"
        "assert d['gemm_gflops'] == (d['clblast_gflops'] if d['gemm'] == 'clblast' else d['clattn_gflops']), d\n"
        "t = d['fused_tile'].split('x')\n"
        "assert len(t) == 3 and all(p.isdigit() and int(p) > 0 for p in t), d['fused_tile']\n"
        "assert d['fused_gflops'] >= d['fused_default_gflops'] > 0, ('not the fastest tile', d)\n"
        "assert d['candidates'] >= 3 and d['seconds'] > 0, d\n"
        "fam = {f['family']: f for f in d['families']}\n"
        "assert list(fam) == ['gemm', 'fused', 'decode', 'staged'], list(fam)\n"
        "for f in fam.values():\n"
        "    assert set(f) == {'family', 'shape', 'unit', 'chosen', 'default', 'speed', 'default_speed',\n"
        "                      'candidates', 'fixed'}, sorted(f)\n"
        "    assert f['fixed'] is False and f['candidates'] >= 2, f\n"
        "    assert f['speed'] >= f['default_speed'] > 0, ('not the fastest candidate', f)\n"
        "    assert f['chosen'] and f['default'] and f['shape'], f\n"
        "assert fam['gemm']['chosen'] == d['gemm'] and fam['gemm']['speed'] == d['gemm_gflops'], d\n"
        "assert fam['fused']['chosen'].startswith(d['fused_tile']), d\n"
        "assert fam['decode']['unit'] == 'GB/s' and fam['staged']['unit'] == 'GFLOP/s', d\n"
        "assert d['candidates'] == fam['gemm']['candidates'] + fam['fused']['candidates'], d\n");

    const char *const fixed_tile[] = {fmt("XDG_CACHE_HOME=%s", cache), "CLATTN_TILE=64x64x4", "CLATTN_GEMM",
                                      "CLATTN_TUNING=decode=4x8", NULL};
    clattn_env(fixed_tile, "tune", "--device", "0:0", (const char *)NULL);
    expect_status(EXIT_OK);
    static const char *const lines[] = {"device        ", "CLBlast       ", "clattn        ", "chosen GEMM   ",
                                        "fused tiles   set by CLATTN_TILE or options.tile: not measured",
                                        "decode        4x8x32x1x",
                                        "set by CLATTN_TUNING or options.tuning: not measured", "staged        ",
                                        "candidates measured in", "recorded for later runs"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        expect_in("stdout", R.out, lines[i]);
    ck_assert_msg(count_lines(R.out) == 8, "eight lines:\n%s", R.out);

    EXPECT(EXIT_USAGE, "tune", "--jsn");
    expect_in("stderr", R.err, "--jsn");
    expect_in("stderr", R.err, "usage: clattn tune");
    EXPECT(EXIT_USAGE, "tune", "extra");
    EXPECT(EXIT_USAGE, "tune", "--device", "9:9");
    expect_in("stderr", R.err, "9:9");
    ck_assert_str_eq(R.out, "");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *devices_suite(void)
{
    Suite *s = suite_create("clattn cli devices");
    TCase *tc = cli_tcase("devices");
    tcase_add_test(tc, test_devices_table);
    tcase_add_test(tc, test_devices_json);
    tcase_add_test(tc, test_devices_check);
    tcase_add_test(tc, test_no_platform);
    tcase_add_test(tc, test_device_selection);
    suite_add_tcase(s, tc);
    tc = cli_tcase("tune");
    tcase_add_test(tc, test_tune);
    suite_add_tcase(s, tc);
    return s;
}

/* `devices --check` compiles every path's kernels in every storage type: minutes when cold, and more under
 * the sanitizer build beside other suites' compiles. */
int main(void) { return cli_main("test_cli_devices", devices_suite, 240); }
