/* `clattn bench` as a user reads it: --quick --json (every case's paths and kernels, device time inside
 * wall time) and its table, --skip-long on the full case set (the long-context case left out, the others
 * run: only their output's shape is checked, never a timing), and --ring-model's table and figure. */
#include "cli_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* `clattn bench --quick --json`: every case on its paths (fused and staged; decode and fused; decode alone
 * for paged and ragged; the backward pass alone
 * on its kernels; the device's GEMM and CLBlast for the projection), the decode cases' bandwidth
 * rows, and each run's device time is its kernels' own (the per-kernel times add up to it, and it fits
 * inside the wall time of the same run). */
START_TEST(test_bench_quick_json)
{
    EXPECT(EXIT_OK, "bench", "--quick", "--json");
    python_check_stdout(
        "bench.json",
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "rows = [r for r in d['cases'] if r['kind'] not in ('bandwidth', 'versus')]\n"
        "bandwidth = [r for r in d['cases'] if r['kind'] == 'bandwidth']\n"
        "versus = [r for r in d['cases'] if r['kind'] == 'versus']\n"
        "assert [r['versus'] for r in versus] == ['sdpa causal L=S=192 H=2 D=64'] * 3 + ['decode L=1 S=512 H=4 D=64',"
        " 'decode paged blocks of 16 L=1 S=512 H=4 D=64',"
        " 'MLA expanded paged blocks of 64 bf16 cache B=2 L=1 S=512 H=4 D=192/128', 'decode L=1 S=512 H=4 D=64',"
        " 'decode L=1 S=512 H=4 D=64',"
        " 'decode paged shared prefix 256 + 64 own B=4 L=1 H=4 kv=2 D=64', 'decode L=1 S=512 H=4 D=64',"
        " 'separate calls paged 1 chunk of 32 + 2 decode rows S=256 H=4 kv=2 D=64'], versus\n"
        "assert all(r['pairs'] >= 9 and 0 < r['low'] <= r['time_ratio'] <= r['high'] for r in versus), versus\n"
        "assert len(rows) == 29, len(rows)\n"
        "assert [r['kv_dtype'] for r in rows if 'int8' in r['name']] == ['int8', 'int8'], rows\n"
        "assert sorted(r['name'] for r in bandwidth) == sorted(r['name'] for r in rows if r['path'] == 'decode'), d\n"
        "assert all(r['kv_gbps'] > 0 and r['stream_gbps'] > 0 for r in bandwidth), bandwidth\n"
        "assert all(r['native_gbps'] > 0 and r['native_threads'] >= 1 and r['native_pairs'] >= 9 and\n"
        "           0 < r['native_low'] <= r['native_fraction'] <= r['native_high'] for r in bandwidth), bandwidth\n"
        "staged = {'score', 'softmax', 'weighted-sum'}\n"
        "for r in rows:\n"
        "    k = r['kernels']\n"
        "    assert r['runs'] >= 3 and r['ms'] > 0 and r['gflops'] >= 0, r\n"
        "    assert 0 < r['device_ms'] <= r['ms'] * 1.001 + 1e-3, ('device time beyond the run', r)\n"
        "    assert abs(sum(k.values()) - r['device_ms']) <= 1e-3 + 1e-3 * r['device_ms'], ('kernels', r)\n"
        "    if r['path'] == 'fused':\n"
        "        assert 'fused attention' in k and not staged & set(k), r\n"
        "    elif r['path'] == 'decode':\n"
        "        assert 'decode partial' in k and 'fused attention' not in k and not staged & set(k), r\n"
        "        assert ('paged block-id check' in k) == (r['kind'] == 'paged'), r\n"
        "    elif r['path'] == 'backward':\n"
        "        assert r['kind'] == 'backward' and 'backward D' in k, r\n"
        "        assert ('backward, keys in lanes' in k) != ('backward dK dV' in k and 'backward dQ' in k), r\n"
        "    elif r['path'] == 'reproducible':\n"
        "        assert 'reproducible attention' in k and 'fused attention' not in k, r\n"
        "    elif r['path'] in ('cascade', 'sparse', 'mixed', 'separate'):\n"  /* (the serving primitives' calls) */
        "        want = {'cascade': 'merge', 'sparse': 'sparse attention', 'mixed': 'decode partial',\n"
        "                'separate': 'decode partial'}[r['path']]\n"
        "        assert r['kind'] == ('mixed' if r['path'] == 'separate' else r['path']) and want in k, r\n"
        "    elif r['kind'] == 'gemm':\n"
        "        blas = {'projection GEMM (CLBlast)', 'projection bias'}\n"
        "        assert set(k) in ({'projection GEMM (clattn)'}, blas), r\n"  /* CLBlast falls back where it cannot launch */
        "    else:\n"
        "        assert staged <= set(k) and 'fused attention' not in k, r\n"
        "    if r['kind'] == 'mha':\n"
        "        assert any(n.startswith('projection') for n in k), r\n");
    EXPECT(EXIT_OK, "bench", "--quick");
    expect_in("stdout", R.out, "device ms");
    expect_in("stdout", R.out, "staged/fused time");
    expect_in("stdout", R.out, "fused/decode time");
    expect_in("stdout", R.out, "CLBlast/gemm time");
    expect_in("stdout", R.out, "read-and-sum kernel of as many bytes");
    expect_in("stdout", R.out, "against the native read (");
    expect_in("stdout", R.out, "time against \"decode L=1 S=512 H=4 D=64\"");
}
END_TEST

/* --ring-model: the table and the figure, with a speed given (so the numbers are the model's alone): at
 * 1000 GFLOP/s over 12.5 GB/s, 8 of 32 heads for K/V and half the pairs visible, communication hides from
 * 2·(8/32)·(1000/12.5)/0.5 = 80 rows per rank. */
START_TEST(test_bench_ring_model)
{
    EXPECT(EXIT_OK, "bench", "--quick", "--only", "ring", "--ring-model", P("ring.svg"), "--ring-gflops", "1000");
    expect_in("stdout", R.out, "1000.0 GFLOP/s (given by --ring-gflops)");
    expect_in("stdout", R.out, "(12.5 GB/s): communication hides while each rank holds at least 80 rows");
    const char *svg = tu_read_file(P("ring.svg"), NULL);
    ck_assert_msg(svg && strncmp(svg, "<svg", 4) == 0 && strstr(svg, "</svg>") && strstr(svg, "polyline"),
                  "ring.svg is not a drawing: %.200s", svg ? svg : "(missing)");
    free((void *)svg);
    EXPECT(EXIT_USAGE, "bench", "--ring-gflops", "1000");
    expect_in("stderr", R.err, "--ring-gflops goes with --ring-model");
    EXPECT(EXIT_USAGE, "bench", "--json", "--ring-model", P("x.svg"));
    EXPECT(EXIT_USAGE, "bench", "--ring-model", P("x.svg"), "--ring-gflops", "-3"); /* refused before any case */
    ck_assert(!exists(P("x.svg")));
}
END_TEST

/* --skip-long on the full case set: the long-context case (L=S=65536, minutes on a CPU) is the only one
 * whose name holds "65536", so with --only 65536 nothing runs — a tool that ran it anyway would pass this
 * run's time limit and fail. The tutorial's case (the full set's smallest) still runs, on both paths, in
 * JSON and as a table of the expected shape. */
START_TEST(test_bench_skip_long)
{
    const char *const long_only[] = {exe, "bench", "--skip-long", "--only", "L=S=65536", "--json", NULL};
    run_within(60, long_only, NULL);
    expect_status(EXIT_OK);
    python_check_stdout("long.json", "import json, sys\n"
                                     "d = json.load(sys.stdin)\n"
                                     "assert d['cases'] == [], d['cases']\n"
                                     "assert d['device'] and d['date'], d\n");

    EXPECT(EXIT_OK, "bench", "--skip-long", "--only", "tutorial", "--json");
    python_check_stdout(
        "tutorial.json",
        "import json, sys\n"
        "d = json.load(sys.stdin)\n"
        "versus = [r for r in d['cases'] if r['kind'] == 'versus']\n"
        "rows = [r for r in d['cases'] if r['kind'] != 'versus']\n"
        "assert [r['path'] for r in rows] == ['fused', 'staged'] * 2, rows\n"
        "names = ['tutorial 4 tokens d=8 d_k=4 (latency)', 'tutorial 4 tokens d=8 d_k=4 (latency, host arrays)']\n"
        "assert [r['name'] for r in rows] == [names[0]] * 2 + [names[1]] * 2, rows\n"
        "assert [(r['name'], r['versus']) for r in versus] == [(names[1], names[0])], versus\n"
        "for r in rows:\n"
        "    assert r['kind'] == 'mha', r\n"
        "    assert (r['B'], r['H'], r['L'], r['S'], r['D'], r['model_dim']) == (1, 1, 4, 4, 4, 8), r\n"
        "    assert r['kv_dtype'] == r['qo_dtype'] == 'float32' and not r['causal'], r\n"
        "    assert r['runs'] >= 3 and r['ms'] > 0 and 0 < r['device_ms'] and r['peak_bytes'] > 0, r\n"
        "    assert any(k.startswith('projection') for k in r['kernels']), r\n"
        "assert 'fused attention' in rows[0]['kernels'] and 'fused attention' in rows[2]['kernels'], rows\n"
        "assert {'score', 'softmax', 'weighted-sum'} <= set(rows[1]['kernels']) & set(rows[3]['kernels']), rows\n");

    EXPECT(EXIT_OK, "bench", "--skip-long", "--only", "tutorial");
    python_check_stdout(
        "tutorial.txt",
        "import re, sys\n"
        "lines = sys.stdin.read().splitlines()\n"
        "assert len(lines) == 9, lines\n"
        "assert re.fullmatch(r'clattn bench on .+, \\d{4}-\\d\\d-\\d\\d \\(float32 arithmetic\\)', lines[0]), lines[0]\n"
        "assert lines[1].split() == ['case', 'path', 'ms', 'GFLOP/s', 'extra', 'mem', 'device', 'ms', 'host', 'ms'], lines[1]\n"
        "num = r'-?\\d+\\.\\d+'\n"
        "row = r' +(fused|staged) +' + num + ' +' + num + ' +\\d+(\\.\\d+)? (B|MiB|GiB) +' + num + ' +' + num\n"
        "assert re.fullmatch(r'tutorial 4 tokens d=8 d_k=4 \\(latency\\)' + row, lines[2]), lines[2]\n"
        "assert re.fullmatch(row, lines[3]) and 'staged' in lines[3], lines[3]\n"
        "assert re.fullmatch(r' +staged/fused time: \\d+\\.\\d\\dx', lines[4]), lines[4]\n"
        "assert re.fullmatch(r'tutorial 4 tokens d=8 d_k=4 \\(latency, host arrays\\)' + row, lines[5]), lines[5]\n"
        "assert 'time against \"tutorial 4 tokens d=8 d_k=4 (latency)\"' in lines[8], lines[8]\n");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *bench_suite(void)
{
    Suite *s = suite_create("clattn cli bench");
    TCase *tc = cli_tcase("bench");
    tcase_add_test(tc, test_bench_quick_json);
    tcase_add_test(tc, test_bench_skip_long);
    tcase_add_test(tc, test_bench_ring_model);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return cli_main("test_cli_bench", bench_suite, 180); }
