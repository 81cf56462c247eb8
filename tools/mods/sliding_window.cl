/* Causal sliding-window attention (Mistral): each query sees itself and the WINDOW keys before it.
 * Define WINDOW (e.g. --define WINDOW=4096); the built-in equivalent is a causal mask with a window of
 * left = WINDOW, right = 0. */
bool mask_mod(int b, int h, long q, long k)
{
    return k <= q && q - k <= WINDOW;
}
