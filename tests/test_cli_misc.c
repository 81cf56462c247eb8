/* The clattn tool as a user first meets it: --version and --help, usage errors, the demo (its table and
 * --save against the fp64 reference), SVG heatmaps (parsed as XML, every cell's value) and the library's
 * warnings on stderr. */
#include "cli_util.h"
#include "tutorial_example.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* Version, help, usage errors                                                                     */
/* ---------------------------------------------------------------------------------------------- */

START_TEST(test_version_and_help)
{
    EXPECT(EXIT_OK, "--version");
    expect_in("stdout", R.out, fmt("clattn %s (library %s)", CLATTN_VERSION_STRING, CLATTN_VERSION_STRING));
    ck_assert_msg(count_lines(R.out) == 1, "--version prints one line:\n%s", R.out);

    static const char *const help_spellings[] = {"--help", "-h", "help"};
    for (size_t i = 0; i < 3; i++) {
        EXPECT(EXIT_OK, help_spellings[i]);
        ck_assert_str_eq(R.err, "");
        static const char *const words[] = {"usage: clattn", "devices", "sdpa", "mha", "demo", "bench", "tune",
                                            "ring", "--device", "Exit status"};
        for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
            expect_in("stdout", R.out, words[w]);
    }

    static const struct {
        const char *command;
        const char *flags[40];
    } commands[] = {
        {"devices", {"--json", "--check"}},
        {"sdpa", {"--q", "--k", "--v", "--out", "--weights", "--lse", "--scale", "--causal", "--causal-bottom-right",
                  "--mask", "--key-lengths", "--heatmap", "--tokens", "--key-tokens", "--device", "--heads",
                  "--kv-heads", "--offset", "--offsets", "--window", "--softcap", "--sinks", "--alibi", "auto",
                  "--past-k", "--past-v", "--present-k", "--present-v", "--scores", "--bf16", "--out-dtype",
                  "--kv-int8", "--prefix-k", "--prefix-v", "--tree"}},
        {"mha", {"--x", "--kv", "--wq", "--wk", "--wv", "--bq", "--bk", "--bv", "--wo", "--bo", "--heads", "--out",
                 "--weights", "--scale", "--causal", "--causal-bottom-right", "--mask", "--key-lengths", "--heatmap",
                 "--tokens", "--key-tokens", "--device", "--kv-heads", "--offset", "--offsets", "--window",
                 "--softcap", "--sinks", "--alibi", "auto", "--scores", "--bf16", "--out-dtype"}},
        {"demo", {"--save", "--heatmap", "--device"}},
        {"bench", {"--quick", "--skip-long", "--only", "--json", "--device", "--ring-model", "--ring-gflops"}},
        {"tune", {"--device", "--json"}},
    };
    for (size_t c = 0; c < sizeof commands / sizeof commands[0]; c++) {
        static const char *const spellings[] = {"--help", "-h"};
        for (size_t s = 0; s < 2; s++) {
            EXPECT(EXIT_OK, commands[c].command, spellings[s]);
            ck_assert_msg(R.err[0] == '\0', "`%s` wrote to stderr:\n%s", R.cmd, R.err);
            expect_in("stdout", R.out, fmt("usage: clattn %s", commands[c].command));
            for (size_t f = 0; commands[c].flags[f]; f++)
                expect_in("stdout", R.out, commands[c].flags[f]);
        }
    }
}
END_TEST

START_TEST(test_usage_errors)
{
    clattn_env(NULL, (const char *)NULL); /* no arguments at all */
    expect_status(EXIT_USAGE);
    expect_in("stderr", R.err, "usage: clattn");
    ck_assert_str_eq(R.out, "");

    EXPECT(EXIT_USAGE, "frobnicate");
    expect_in("stderr", R.err, "frobnicate");
    expect_in("stderr", R.err, "usage: clattn");
    ck_assert_str_eq(R.out, "");

    EXPECT(EXIT_USAGE, "--frobnicate");
    expect_in("stderr", R.err, "--frobnicate");

    /* A subcommand's flag error: the flag named on the first line, then that command's usage. */
    EXPECT(EXIT_USAGE, "devices", "--jsn");
    ck_assert_msg(strncmp(R.err, "clattn devices: ", 16) == 0, "first line: %s", R.err);
    expect_in("stderr", R.err, "--jsn");
    expect_in("stderr", R.err, "usage: clattn devices");
    ck_assert_str_eq(R.out, "");

    EXPECT(EXIT_USAGE, "demo", "--save");
    expect_in("stderr", R.err, "--save");
    EXPECT(EXIT_USAGE, "demo", "extra");
    expect_in("stderr", R.err, "extra");
    EXPECT(EXIT_USAGE, "devices", "--json=yes");
    expect_in("stderr", R.err, "--json");
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* demo                                                                                            */
/* ---------------------------------------------------------------------------------------------- */

static const double tutorial_table[4][4] = {
    {0.2480, 0.2509, 0.2499, 0.2512},
    {0.2513, 0.2499, 0.2498, 0.2490},
    {0.2484, 0.2506, 0.2495, 0.2515},
    {0.2479, 0.2516, 0.2485, 0.2520},
};
START_TEST(test_demo_table)
{
    EXPECT(EXIT_OK, "demo");
    static const char *const rows[] = {"0.2480  0.2509  0.2499  0.2512", "0.2513  0.2499  0.2498  0.2490",
                                       "0.2484  0.2506  0.2495  0.2515", "0.2479  0.2516  0.2485  0.2520"};
    for (size_t i = 0; i < 4; i++) {
        const char *row = strstr(R.out, rows[i]);
        ck_assert_msg(row != NULL, "demo output lacks the weights row \"%s\":\n%s", rows[i], R.out);
        /* the row is labelled with its token */
        const char *line = row;
        while (line > R.out && line[-1] != '\n')
            line--;
        ck_assert_msg(contains_n(line, (size_t)(row - line), tutorial_words[i]),
                      "row \"%s\" is not labelled %s", rows[i], tutorial_words[i]);
    }
    expect_in("stdout", R.out, "Attention weights");
    for (size_t i = 0; i < 4; i++)
        expect_in("stdout", R.out, tutorial_words[i]);
    ck_assert_str_eq(R.err, "");
}
END_TEST

START_TEST(test_demo_save)
{
    const char *save = P("saved");
    EXPECT(EXIT_OK, "demo", "--save", save);
    enum { N = TUTORIAL_TOKENS, DM = TUTORIAL_D_MODEL, DK = TUTORIAL_D_K };
    const float *x = load_f32(fmt("%s/x.npy", save), 2, (size_t[]){N, DM});
    const float *wq = load_f32(fmt("%s/wq.npy", save), 2, (size_t[]){DM, DK});
    const float *wk = load_f32(fmt("%s/wk.npy", save), 2, (size_t[]){DM, DK});
    const float *wv = load_f32(fmt("%s/wv.npy", save), 2, (size_t[]){DM, DK});
    const float *q = load_f32(fmt("%s/q.npy", save), 2, (size_t[]){N, DK});
    const float *k = load_f32(fmt("%s/k.npy", save), 2, (size_t[]){N, DK});
    const float *v = load_f32(fmt("%s/v.npy", save), 2, (size_t[]){N, DK});
    const float *w = load_f32(fmt("%s/weights.npy", save), 2, (size_t[]){N, N});
    const float *out = load_f32(fmt("%s/out.npy", save), 2, (size_t[]){N, DK});
    const char *names = list_dir(save);
    ck_assert_msg(count_lines(names) == 9, "demo --save wrote:\n%s", names);

    /* The inputs are the tutorial's, rounded to float. */
    for (size_t i = 0; i < N * DM; i++)
        ck_assert_msg(x[i] == (float)tutorial_x[i / DM][i % DM], "x[%zu] = %g", i, x[i]);
    for (size_t i = 0; i < DM * DK; i++) {
        ck_assert_msg(wq[i] == (float)tutorial_w_q[i / DK][i % DK], "wq[%zu] = %g", i, wq[i]);
        ck_assert_msg(wk[i] == (float)tutorial_w_k[i / DK][i % DK], "wk[%zu] = %g", i, wk[i]);
        ck_assert_msg(wv[i] == (float)tutorial_w_v[i / DK][i % DK], "wv[%zu] = %g", i, wv[i]);
    }
    /* The weights round to the tutorial's table. */
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < N; j++)
            ck_assert_msg(lround(w[i * N + j] * 1e4) == lround(tutorial_table[i][j] * 1e4),
                          "weights[%zu][%zu] = %.6f, the tutorial prints %.4f", i, j, w[i * N + j],
                          tutorial_table[i][j]);
    /* Each stage agrees with the fp64 reference on its saved inputs. */
    double ref[N * DK], rw[N * N];
    ref_matmul(N, DM, DK, x, wq, NULL, ref);
    expect_close("q = x·wq", q, ref, N * DK);
    ref_matmul(N, DM, DK, x, wk, NULL, ref);
    expect_close("k = x·wk", k, ref, N * DK);
    ref_matmul(N, DM, DK, x, wv, NULL, ref);
    expect_close("v = x·wv", v, ref, N * DK);
    clattn_sdpa_desc d = CLATTN_SDPA_DESC_INIT;
    d.batch = 1;
    d.heads = 1;
    d.q_len = N;
    d.kv_len = N;
    d.qk_dim = DK;
    ref_sdpa(&d, q, k, v, NULL, ref, rw, NULL);
    expect_close("weights", w, rw, N * N);
    expect_close("out", out, ref, N * DK);

    /* Saving into an existing folder works too; a folder that cannot be made is an error (2). */
    EXPECT(EXIT_OK, "demo", "--save", save);
    EXPECT(EXIT_USAGE, "demo", "--save", P("nonexistent/sub"));
    expect_in("stderr", R.err, P("nonexistent/sub"));
    ck_assert(!exists(P("nonexistent")));
}
END_TEST

END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Heatmaps                                                                                        */
/* ---------------------------------------------------------------------------------------------- */

/* Parses the SVG as XML and checks one <rect class="cell"> per expected weight (listed in a file as
 * "head row col value"), each inside its head's panel with its value, and that every label given
 * appears in the text. */
static const char svg_check_py[] =
    "import sys, xml.dom.minidom as minidom\n"
    "doc = minidom.parse(sys.argv[1])\n"
    "want = {}\n"
    "for line in open(sys.argv[2]):\n"
    "    h, r, c, v = line.split()\n"
    "    want[(int(h), int(r), int(c))] = float(v)\n"
    "seen = set()\n"
    "for g in doc.getElementsByTagName('g'):\n"
    "    if g.getAttribute('class') != 'panel':\n"
    "        continue\n"
    "    h = int(g.getAttribute('data-head'))\n"
    "    for e in g.getElementsByTagName('rect'):\n"
    "        if e.getAttribute('class') != 'cell':\n"
    "            continue\n"
    "        key = (h, int(e.getAttribute('data-row')), int(e.getAttribute('data-col')))\n"
    "        assert key in want, ('unexpected cell', key)\n"
    "        assert key not in seen, ('cell drawn twice', key)\n"
    "        seen.add(key)\n"
    "        v = float(e.getAttribute('data-value'))\n"
    "        assert abs(v - want[key]) <= 1e-6 + 1e-5 * abs(want[key]), ('value', key, v, want[key])\n"
    "cells = [e for e in doc.getElementsByTagName('rect') if e.getAttribute('class') == 'cell']\n"
    "assert len(cells) == len(want) == len(seen), \\\n"
    "    ('cells', len(cells), 'expected', len(want), 'in panels', len(seen))\n"
    "def texts(n):\n"
    "    for c in n.childNodes:\n"
    "        if c.nodeType == c.TEXT_NODE:\n"
    "            yield c.data\n"
    "        else:\n"
    "            yield from texts(c)\n"
    "text = '\\n'.join(texts(doc))\n"
    "for label in sys.argv[3:]:\n"
    "    assert label in text, ('label missing', label)\n";

/* Writes the expected cells of weights (B,H,L,S): the first batch's first `heads` heads. */
static const char *expected_cells(const float *w, size_t heads, size_t L, size_t S)
{
    char *lines = fmt("%s", "");
    for (size_t h = 0; h < heads; h++)
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < S; j++)
                lines = fmt("%s%zu %zu %zu %.9g\n", lines, h, i, j, w[(h * L + i) * S + j]);
    static unsigned cells_files;
    const char *path = P(fmt("cells-%u.txt", ++cells_files));
    tu_write_file(path, lines, strlen(lines));
    return path;
}
START_TEST(test_heatmap_demo)
{
    const char *svg = P("demo.svg"), *save = P("saved");
    EXPECT(EXIT_OK, "demo", "--heatmap", svg, "--save", save);
    const float *w = load_f32(fmt("%s/weights.npy", save), 2, (size_t[]){4, 4});
    python_check(svg_check_py, NULL,
                 (const char *const[]){svg, expected_cells(w, 1, 4, 4), tutorial_words[0], tutorial_words[1],
                                       tutorial_words[2], tutorial_words[3], NULL});
    char *text = track(tu_read_file(svg, NULL));
    ck_assert(text != NULL);
    for (size_t i = 0; i < 4; i++)
        expect_in(svg, text, tutorial_words[i]);
}
END_TEST

START_TEST(test_heatmap_sdpa)
{
    /* B = 2, H = 3: the first batch's three heads, 3·4·5 cells; Chinese and XML-special labels. */
    const size_t B = 2, H = 3, L = 4, S = 5;
    rng.state = 300;
    const char *q = f32_file("q.npy", 4, (size_t[]){B, H, L, 8}), *k = f32_file("k.npy", 4, (size_t[]){B, H, S, 8});
    const char *v = f32_file("v.npy", 4, (size_t[]){B, H, S, 3});
    const char *svg = P("map.svg");
    EXPECT(EXIT_OK, "sdpa", "--q", q, "--k", k, "--v", v, "--out", P("o.npy"), "--heatmap", svg, "--tokens",
           "我,爱,人工,智能", "--key-tokens", "今天,天气,a<b,&c,\"d'");
    ck_assert_msg(!exists(P("w.npy")), "no --weights, no weights file");
    /* The same run with --weights, to know the values. */
    const char *svg2 = P("map2.svg");
    EXPECT(EXIT_OK, "sdpa", "--q", q, "--k", k, "--v", v, "--out", P("o.npy"), "--weights", P("w.npy"), "--heatmap",
           svg2, "--tokens", "我,爱,人工,智能", "--key-tokens", "今天,天气,a<b,&c,\"d'");
    const float *w = load_f32(P("w.npy"), 4, (size_t[]){B, H, L, S});
    const char *cells = expected_cells(w, H, L, S);
    python_check(svg_check_py, NULL,
                 (const char *const[]){svg, cells, "我", "爱", "人工", "智能", "今天", "天气", "a<b", "&c", "\"d'",
                                       NULL});
    python_check(svg_check_py, NULL, (const char *const[]){svg2, cells, NULL});

    /* L = S: --tokens labels the keys too. */
    const char *sq = f32_file("sq.npy", 3, (size_t[]){2, 3, 4});
    const char *svg3 = P("self.svg");
    EXPECT(EXIT_OK, "sdpa", "--q", sq, "--k", sq, "--v", sq, "--out", P("o3.npy"), "--weights", P("w3.npy"),
           "--heatmap", svg3, "--tokens", "猫,坐,垫");
    const float *w3 = load_f32(P("w3.npy"), 3, (size_t[]){2, 3, 3});
    python_check(svg_check_py, NULL,
                 (const char *const[]){svg3, expected_cells(w3, 2, 3, 3), "猫", "坐", "垫", NULL});
    char *text = track(tu_read_file(svg3, NULL));
    const char *first = strstr(text, "垫");
    ck_assert_msg(first && strstr(first + 1, "垫"), "a token labels both its query row and its key column");

    /* More than 16 heads: the first 16 are drawn. */
    const char *mq = f32_file("mq.npy", 3, (size_t[]){18, 2, 4});
    const char *svg4 = P("many.svg");
    EXPECT(EXIT_OK, "sdpa", "--q", mq, "--k", mq, "--v", mq, "--out", P("o4.npy"), "--weights", P("w4.npy"),
           "--heatmap", svg4);
    const float *w4 = load_f32(P("w4.npy"), 3, (size_t[]){18, 2, 2});
    python_check(svg_check_py, NULL, (const char *const[]){svg4, expected_cells(w4, 16, 2, 2), NULL});
}
END_TEST

START_TEST(test_heatmap_mha)
{
    /* Cross-attention (L ≠ S): --tokens labels the queries, --key-tokens the keys. */
    rng.state = 310;
    const char *x = f32_file("x.npy", 3, (size_t[]){1, 3, 4}), *kv = f32_file("kv.npy", 3, (size_t[]){1, 5, 6});
    const char *wq = f32_file("wq.npy", 2, (size_t[]){4, 4}), *wk = f32_file("wk.npy", 2, (size_t[]){6, 4});
    const char *wv = f32_file("wv.npy", 2, (size_t[]){6, 4}), *svg = P("mha.svg");
    EXPECT(EXIT_OK, "mha", "--x", x, "--kv", kv, "--wq", wq, "--wk", wk, "--wv", wv, "--heads", "2", "--out",
           P("y.npy"), "--weights", P("a.npy"), "--heatmap", svg, "--tokens", "我,爱,你", "--key-tokens",
           "I,love,you,very,much");
    const float *w = load_f32(P("a.npy"), 4, (size_t[]){1, 2, 3, 5});
    python_check(svg_check_py, NULL,
                 (const char *const[]){svg, expected_cells(w, 2, 3, 5), "我", "爱", "你", "love", "much", NULL});
}
END_TEST

/* The library's warnings reach the user on stderr, once, and change nothing else. */
START_TEST(test_warnings_reach_user)
{
    rng.state = 330;
    const char *q = f32_file("q.npy", 3, (size_t[]){2, 3, 4}), *k = f32_file("k.npy", 3, (size_t[]){2, 5, 4});
    const char *v = f32_file("v.npy", 3, (size_t[]){2, 5, 4});
    const char *const bad_tile[] = {"CLATTN_TILE=8by8", NULL};
    clattn_env(bad_tile, "sdpa", "--q", q, "--k", k, "--v", v, "--out", P("o.npy"), (const char *)NULL);
    expect_status(EXIT_OK);
    expect_in("stderr's warnings", R.warn, "clattn sdpa: warning: CLATTN_TILE=\"8by8\"");
    ck_assert_msg(strstr(strstr(R.warn, "CLATTN_TILE") + 1, "CLATTN_TILE") == NULL, "the warning was printed twice:\n%s",
                  R.warn);
    const char *const bad_cache[] = {"CLATTN_CACHE=maybe", NULL};
    clattn_env(bad_cache, "demo", (const char *)NULL);
    expect_status(EXIT_OK);
    expect_in("stderr's warnings", R.warn, "clattn demo: warning: CLATTN_CACHE=\"maybe\"");
    CLATTN("sdpa", "--q", q, "--k", k, "--v", v, "--out", P("o.npy"));
    expect_status(EXIT_OK);
    ck_assert_msg(strstr(R.warn, "CLATTN_") == NULL, "a warning without cause:\n%s", R.warn);
}
END_TEST

/* --prefix-k/--prefix-v: a prefix of P rows every batch entry shares before its own K and V (cascade
 * attention) against the reference over each entry's keys written out whole (prefix, then its own), with
 * --causal-bottom-right, GQA and --lse; the refusals name what they refuse. */
START_TEST(test_sdpa_shared_prefix)
{
    enum { B = 2, H = 4, N = 2, L = 3, S = 5, PR = 37, D = 8, DV = 6, T = PR + S };
    const float *q = rand_floats(B * H * L * D, 1.0f), *k = rand_floats(B * N * S * D, 1.0f),
                *v = rand_floats(B * N * S * DV, 1.0f), *pk = rand_floats(N * PR * D, 1.0f),
                *pv = rand_floats(N * PR * DV, 1.0f);
    const char *qp = save_f32("q.npy", q, 4, (size_t[]){B, H, L, D}), *kp = save_f32("k.npy", k, 4, (size_t[]){B, N, S, D});
    const char *vp = save_f32("v.npy", v, 4, (size_t[]){B, N, S, DV}), *pkp = save_f32("pk.npy", pk, 3, (size_t[]){N, PR, D});
    const char *pvp = save_f32("pv.npy", pv, 3, (size_t[]){N, PR, DV});
    EXPECT(EXIT_OK, "sdpa", "--q", qp, "--k", kp, "--v", vp, "--prefix-k", pkp, "--prefix-v", pvp, "--kv-heads", "2",
           "--causal-bottom-right", "--out", P("o.npy"), "--lse", P("l.npy"));
    float *kw = xmalloc(B * N * T * D * sizeof(float)), *vw = xmalloc(B * N * T * DV * sizeof(float));
    for (size_t b = 0; b < B; b++) /* each entry's keys whole: the prefix, then its own */
        for (size_t h = 0; h < N; h++) {
            memcpy(kw + (b * N + h) * T * D, pk + h * PR * D, PR * D * sizeof(float));
            memcpy(kw + ((b * N + h) * T + PR) * D, k + (b * N + h) * S * D, S * D * sizeof(float));
            memcpy(vw + (b * N + h) * T * DV, pv + h * PR * DV, PR * DV * sizeof(float));
            memcpy(vw + ((b * N + h) * T + PR) * DV, v + (b * N + h) * S * DV, S * DV * sizeof(float));
        }
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT;
    const clattn_sdpa_desc d = sdpa_desc(B, H, N, L, T, D, DV, &m);
    double *ro = xmalloc(B * H * L * DV * sizeof(double)), *rl = xmalloc(B * H * L * sizeof(double));
    ref_sdpa(&d, q, kw, vw, NULL, ro, NULL, rl);
    expect_close("--prefix-k out", load_f32(P("o.npy"), 4, (size_t[]){B, H, L, DV}), ro, B * H * L * DV);
    expect_close("--prefix-k lse", load_f32(P("l.npy"), 3, (size_t[]){B, H, L}), rl, B * H * L);
    EXPECT(EXIT_USAGE, "sdpa", "--q", qp, "--k", kp, "--v", vp, "--prefix-k", pkp, "--kv-heads", "2", "--out", P("x.npy"));
    expect_in("stderr", R.err, "--prefix-v");
    EXPECT(EXIT_USAGE, "sdpa", "--q", qp, "--k", kp, "--v", vp, "--prefix-k", pkp, "--prefix-v", pvp, "--kv-heads", "2",
           "--weights", P("w.npy"), "--out", P("x.npy"));
    expect_in("stderr", R.err, "--weights");
    EXPECT(EXIT_USAGE, "sdpa", "--q", qp, "--k", kp, "--v", vp, "--prefix-k", pvp, "--prefix-v", pkp, "--kv-heads", "2",
           "--out", P("x.npy"));
    expect_in("stderr", R.err, "pv.npy"); /* (a prefix's head size must be K's) */
    EXPECT(EXIT_USAGE, "sdpa", "--q", qp, "--k", kp, "--v", vp, "--prefix-k", pkp, "--prefix-v", pvp, "--kv-heads", "2",
           "--causal", "--out", P("x.npy"));
    expect_in("stderr", R.err, "top-left");
    ck_assert(!exists(P("x.npy")));
}
END_TEST

/* --tree: a draft tree per batch entry ((B, L) int64), and one for every entry ((L,) int32), with
 * --causal-bottom-right placing the draft last, against the reference's tree rule; a parent that is not an
 * earlier query is refused. */
START_TEST(test_sdpa_tree)
{
    enum { B = 2, H = 2, L = 6, S = 15, D = 8 };
    const float *q = rand_floats(B * H * L * D, 1.0f), *k = rand_floats(B * H * S * D, 1.0f),
                *v = rand_floats(B * H * S * D, 1.0f);
    const char *qp = save_f32("q.npy", q, 4, (size_t[]){B, H, L, D}), *kp = save_f32("k.npy", k, 4, (size_t[]){B, H, S, D});
    const char *vp = save_f32("v.npy", v, 4, (size_t[]){B, H, S, D});
    const long long parents[B * L] = {-1, 0, 0, 1, 2, -1, -1, 0, 1, 2, 3, 4};
    const char *tp = save_raw("tree.npy", 1, "<i8", "False", "(2, 6)", parents, sizeof parents);
    EXPECT(EXIT_OK, "sdpa", "--q", qp, "--k", kp, "--v", vp, "--tree", tp, "--causal-bottom-right", "--out", P("o.npy"));
    int as_int[B * L];
    for (size_t i = 0; i < B * L; i++)
        as_int[i] = (int)parents[i];
    clattn_masks m = CLATTN_MASKS_INIT;
    m.causal = CLATTN_CAUSAL_BOTTOM_RIGHT, m.tree_parents = as_int;
    const clattn_sdpa_desc d = sdpa_desc(B, H, H, L, S, D, D, &m);
    double *ro = xmalloc(B * H * L * D * sizeof(double));
    ref_sdpa(&d, q, k, v, NULL, ro, NULL, NULL);
    expect_close("--tree out", load_f32(P("o.npy"), 4, (size_t[]){B, H, L, D}), ro, B * H * L * D);
    const char *shared = save_i32("shared.npy", parents, L); /* (batch 0's tree for both) */
    EXPECT(EXIT_OK, "sdpa", "--q", qp, "--k", kp, "--v", vp, "--tree", shared, "--causal-bottom-right", "--out",
           P("o2.npy"));
    memcpy(as_int + L, as_int, L * sizeof(int));
    ref_sdpa(&d, q, k, v, NULL, ro, NULL, NULL);
    expect_close("--tree (L,) out", load_f32(P("o2.npy"), 4, (size_t[]){B, H, L, D}), ro, B * H * L * D);
    const long long bad[L] = {-1, 0, 2, 1, 2, 3};
    EXPECT(EXIT_USAGE, "sdpa", "--q", qp, "--k", kp, "--v", vp, "--tree", save_i64("bad.npy", bad, L), "--out",
           P("x.npy"));
    expect_in("stderr", R.err, "tree_parents[2] = 2");
    ck_assert(!exists(P("x.npy")));
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */

static Suite *misc_suite(void)
{
    const cli_group groups[] = {
        {"usage", 1, {test_version_and_help, test_usage_errors}},
        {"demo", 1, {test_demo_table, test_demo_save}},
        {"heatmap", 1, {test_heatmap_demo, test_heatmap_sdpa, test_heatmap_mha}},
        {"warnings", 1, {test_warnings_reach_user}},
        {"prefix", 1, {test_sdpa_shared_prefix}},
        {"tree", 1, {test_sdpa_tree}},
    };
    return cli_suite("clattn cli misc", groups, sizeof groups / sizeof groups[0]);
}

int main(void) { return cli_main("test_cli_misc", misc_suite, 60); }
