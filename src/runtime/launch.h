/* Tensor views, kernel arguments and kernel launches: how every path hands work to the device. */
#ifndef CLATTN_LAUNCH_H
#define CLATTN_LAUNCH_H

#include "clattn/clattn.h"

#include <stddef.h>

/* Where a (B, H, rows, cols) tensor lives: element strides for batch, head and row; columns are
 * contiguous. Lets the same kernels read SDPA's (B,H,L,D) and MHA's (B,L,H·D) layouts. */
typedef struct tensor_view {
    cl_mem buf;
    size_t batch_stride, head_stride, row_stride;
} tensor_view;

tensor_view view_bhld(cl_mem buf, size_t heads, size_t rows, size_t cols);
tensor_view view_blhd(cl_mem buf, size_t heads, size_t rows, size_t cols);

/* Where K/V rows (and Q/O rows) lie beyond a dense view (cl/common.cl's K/V addressing): a ragged batch
 * (sequences packed row after row) or a paged cache (K/V rows in blocks of a pool, found through a block
 * table). All NULL: dense. */
typedef struct kv_layout {
    cl_mem q_starts;    /* ragged: (B+1) ulong first rows of each sequence in q, out and lse, or NULL */
    cl_mem k_starts;    /* ragged: the same in k and v, or NULL */
    cl_mem block_table; /* paged: (B, table_cols) int block ids, all checked, or NULL; the K/V views'
                         * batch strides are then the pool's block strides */
    size_t table_cols;
    unsigned block_shift; /* log2 of the rows per block */
    /* Ragged: the row starts on the host (B+1), from which a launch lists its work-groups — a (sequence, tile)
     * pair each, for the sequences of q_rows_min … q_rows_max rows (a max of 0: any), none idle — or NULL:
     * every tile of q_len rows of every sequence. */
    const size_t *host_q_starts;
    size_t q_rows_min, q_rows_max;
} kv_layout;

/* Kernel arguments set in order; the first failure is kept and reported by kernel_launch, which then
 * enqueues nothing. Start with kernel_args_begin(kernel). */
typedef struct kernel_args {
    cl_kernel kernel;
    cl_uint next;
    cl_int err;
    cl_uint failed_at; /* index of the argument that failed */
} kernel_args;

kernel_args kernel_args_begin(cl_kernel kernel);
void karg(kernel_args *a, size_t size, const void *value);
void karg_mem(kernel_args *a, cl_mem m);
void karg_ulong(kernel_args *a, size_t v);
void karg_int(kernel_args *a, int v);
void karg_float(kernel_args *a, float v);
void karg_view(kernel_args *a, tensor_view t); /* buffer and its three strides */

/* local must be given: the runtime's own choice (a NULL local size) makes PoCL 3.1 assert when work
 * groups are limited to 1 or 3 items; kernels without a fixed shape use kernel_launch_auto. */
clattn_status kernel_launch(clattn_context *ctx, const kernel_args *a, const char *name, cl_uint dims,
                            const size_t *global, const size_t *local);
/* Launch with a work-group size chosen from the kernel's and device's limits (kernels that use no
 * local memory and bound-check their ids); the global size is rounded up to whole groups. */
clattn_status kernel_launch_auto(clattn_context *ctx, const kernel_args *a, const char *name, cl_uint dims,
                                 const size_t *global);

#endif
