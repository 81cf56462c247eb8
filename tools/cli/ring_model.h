/* The step-time model of ring attention (docs/multi-device.md, "Scale on paper"): per step each rank attends its
 * N/P queries to N/P keys while it passes a K/V slice of N/P rows to its neighbour; the step takes the
 * longer of the two. Plain arithmetic: no MPI, no OpenCL. */
#ifndef CLATTN_RING_MODEL_H
#define CLATTN_RING_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define RING_MODEL_LINKS 6

typedef struct ring_model {
    size_t batch, heads, kv_heads, head_dim, tokens; /* the call: L = S = tokens */
    bool causal;                                      /* zigzag-balanced: half the pairs visible */
    double gflops;                                    /* the device's attention speed */
    const char *speed_source;                         /* "measured on <device>", "given" */
    double latency_s;                                 /* one message's fixed cost */
    unsigned max_ranks;                               /* P = 1, 2, 4, … up to this */
    size_t nlinks;
    const char *link_names[RING_MODEL_LINKS];
    double link_gbps[RING_MODEL_LINKS]; /* GB/s */
} ring_model;

/* One step's kernels on one rank: 4·B·H·(N/P)²·D FLOPs (half of them under a causal mask) at gflops. */
double ring_model_compute_s(const ring_model *m, double p);
/* The bytes of one K/V slice: B·kv_heads·(N/P)·2·D floats. */
double ring_model_bytes(const ring_model *m, double p);
/* One step: the longer of the kernels and the transfer (latency + bytes / bandwidth); P = 1 sends nothing. */
double ring_model_step_s(const ring_model *m, double p, double gbps);
/* The rows per rank from which the transfer hides behind the kernels: 2·(kv_heads/H)·(F/bw)/f. */
double ring_model_hidden_rows(const ring_model *m, double gbps);

/* The table of P against each link, on out. */
void ring_model_print(FILE *out, const ring_model *m);
/* The same as an SVG line chart (log-log) on f; 0, or -1 when there is nothing to draw (a speed of 0 or
 * infinity) or f reports a write error. */
int ring_model_svg(FILE *f, const ring_model *m);

#endif
