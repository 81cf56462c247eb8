/* The ring attention step-time model of docs/multi-device.md's "Scale on paper", printed and drawn as an SVG by
 * `clattn bench --ring-model FILE.svg` with this device's measured attention speed plugged in. */
#include "ring_model.h"

#include <math.h>
#include <stdio.h>

double ring_model_compute_s(const ring_model *m, double p)
{
    const double rows = (double)m->tokens / p; /* queries and keys per rank */
    const double visible = m->causal ? 0.5 : 1.0;
    return 4.0 * m->batch * m->heads * rows * rows * m->head_dim * visible / (m->gflops * 1e9);
}

double ring_model_bytes(const ring_model *m, double p)
{
    return m->batch * m->kv_heads * ((double)m->tokens / p) * 2.0 * m->head_dim * sizeof(float);
}

double ring_model_step_s(const ring_model *m, double p, double gbps)
{
    const double compute = ring_model_compute_s(m, p);
    if (p <= 1.0)
        return compute;
    const double transfer = m->latency_s + ring_model_bytes(m, p) / (gbps * 1e9);
    return compute > transfer ? compute : transfer;
}

double ring_model_hidden_rows(const ring_model *m, double gbps)
{
    /* compute ≥ transfer (latency aside): 4·H·r²·D·f/F ≥ N·r·8·D/bw  ⇔  r ≥ 2·(N/H)·F/(f·bw). */
    const double visible = m->causal ? 0.5 : 1.0;
    return 2.0 * ((double)m->kv_heads / m->heads) * (m->gflops / gbps) / visible;
}

void ring_model_print(FILE *out, const ring_model *m)
{
    fprintf(out, "ring model: B=%zu H=%zu kv=%zu D=%zu, %zu tokens%s, device %.1f GFLOP/s (%s), latency %.0f us\n",
            m->batch, m->heads, m->kv_heads, m->head_dim, m->tokens, m->causal ? " causal (zigzag)" : "", m->gflops,
            m->speed_source, m->latency_s * 1e6);
    for (size_t b = 0; b < m->nlinks; b++)
        fprintf(out, "  link %zu: %s\n", b + 1, m->link_names[b]);
    fprintf(out, "  %-6s %14s %14s", "ranks", "kernels/step", "sent/step MiB");
    for (size_t b = 0; b < m->nlinks; b++)
        fprintf(out, "  call, link %zu", b + 1);
    fputc('\n', out);
    for (unsigned p = 1; p <= m->max_ranks; p *= 2) {
        fprintf(out, "  %-6u %11.1f ms %14.3f", p, ring_model_compute_s(m, p) * 1e3,
                p > 1 ? ring_model_bytes(m, p) / 1048576.0 : 0.0);
        for (size_t b = 0; b < m->nlinks; b++) /* the whole call: P steps */
            fprintf(out, " %11.1f ms%s", p * ring_model_step_s(m, p, m->link_gbps[b]) * 1e3,
                    p > 1 && ring_model_compute_s(m, p) < m->latency_s + ring_model_bytes(m, p) / (m->link_gbps[b] * 1e9)
                        ? " *" : "  ");
        fputc('\n', out);
    }
    fprintf(out, "  (a call is P steps; * where the transfer does not hide behind the kernels)\n");
    for (size_t b = 0; b < m->nlinks; b++)
        fprintf(out, "  %s: communication hides while each rank holds at least %.0f rows\n", m->link_names[b],
                ring_model_hidden_rows(m, m->link_gbps[b]));
}

int ring_model_svg(FILE *f, const ring_model *m)
{
    const double W = 780, H = 420, x0 = 70, y0 = 48, pw = 440, ph = 320;
    double lo = INFINITY, hi = 0;
    for (unsigned p = 1; p <= m->max_ranks; p *= 2) {
        const double c = p * ring_model_compute_s(m, p);
        lo = fmin(lo, c);
        hi = fmax(hi, c);
        for (size_t b = 0; b < m->nlinks; b++)
            hi = fmax(hi, p * ring_model_step_s(m, p, m->link_gbps[b]));
    }
    if (!(lo > 0) || !isfinite(hi)) /* (a speed of 0 or inf: nothing to draw on a log scale) */
        return -1;
    const double llo = floor(log10(lo)), lhi = ceil(log10(hi)) > floor(log10(lo)) ? ceil(log10(hi)) : floor(log10(lo)) + 1;
    const double pmax = log2((double)m->max_ranks) > 0 ? log2((double)m->max_ranks) : 1;
#define PX(p) (x0 + pw * log2((double)(p)) / pmax)
#define PY(t) (y0 + ph * (1.0 - (log10(t) - llo) / (lhi - llo)))
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"18\" font-size=\"14\">Ring attention, modelled: one call's time against the ranks "
               "P</text>\n<text x=\"%.0f\" y=\"36\" font-size=\"11\">device %.0f GFLOP/s (%s); latency %.0f us per "
               "message</text>\n", x0, x0, m->gflops, m->speed_source, m->latency_s * 1e6);
    for (double e = llo; e <= lhi; e++) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, PY(pow(10, e)),
                x0 + pw, PY(pow(10, e)));
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g s</text>\n", x0 - 6, PY(pow(10, e)) + 4,
                pow(10, e));
    }
    for (unsigned p = 1; p <= m->max_ranks; p *= 2)
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%u</text>\n", PX(p), y0 + ph + 16, p);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">ranks P</text>\n", x0 + pw / 2, y0 + ph + 34);
    fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", x0, y0, pw,
            ph);
    static const char *const colours[] = {"#d62728", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"};
    for (size_t b = 0; b <= m->nlinks; b++) {
        const bool compute_only = b == m->nlinks;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
                compute_only ? "#1f77b4" : colours[b % 6], compute_only ? " stroke-dasharray=\"6,4\"" : "");
        for (unsigned p = 1; p <= m->max_ranks; p *= 2)
            fprintf(f, "%.1f,%.1f ", PX(p),
                    PY(p * (compute_only ? ring_model_compute_s(m, p) : ring_model_step_s(m, p, m->link_gbps[b]))));
        fprintf(f, "\"/>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", x0 + pw + 10, y0 + 16 + 18.0 * b,
                compute_only ? "#1f77b4" : colours[b % 6], compute_only ? "kernels alone" : m->link_names[b]);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-size=\"10\">%zu tokens, B=%zu H=%zu kv=%zu D=%zu%s</text>\n", x0 + pw + 10,
            y0 + ph - 10, m->tokens, m->batch, m->heads, m->kv_heads, m->head_dim, m->causal ? ", causal" : "");
    fputs("</svg>\n", f);
#undef PX
#undef PY
    return ferror(f) ? -1 : 0;
}
