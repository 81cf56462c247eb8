/* T5's relative position bias: the distance k − q falls into one of BUCKETS buckets (half for each
 * direction: exact below BUCKETS/4, logarithmic up to MAX_DISTANCE, the last bucket beyond), and each
 * head adds its learned bias for that bucket. Aux `bias`: float, (H, BUCKETS) row-major
 * (CLATTN_AUX_BY_LENGTH, H·BUCKETS elements). Define BUCKETS (e.g. 32) and MAX_DISTANCE (e.g. 128). */
int t5_bucket(long relative)
{
    const int side = BUCKETS / 2, exact = side / 2;
    const int base = relative > 0 ? side : 0;
    const long n = (long)abs(relative); /* (OpenCL's abs: oclgrind cannot run the intrinsic a ?: makes) */
    if (n < exact)
        return base + (int)n;
    /* (log2: exact where n / exact is a power of two, so the bucket edges fall alike on every device) */
    const float spread = log2((float)n / (float)exact) / log2((float)MAX_DISTANCE / (float)exact);
    const int bucket = exact + (int)(spread * (float)(side - exact));
    return base + min(bucket, side - 1);
}

float score_mod(float score, int b, int h, long q, long k, __global const float *bias)
{
    return score + bias[h * BUCKETS + t5_bucket(k - q)];
}
