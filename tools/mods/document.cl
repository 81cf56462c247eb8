/* Document masking of packed sequences: several documents laid end to end in one sequence, each
 * position attending only within its own document, causally. Aux `doc`: int, the document id of each
 * position (CLATTN_AUX_BY_POSITION). With a block mask, blocks between different documents are skipped. */
bool mask_mod(int b, int h, long q, long k, __global const int *doc)
{
    return doc[q] == doc[k] && k <= q;
}
