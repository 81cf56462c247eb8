/* Prefix-LM (T5, PaLI): the first PREFIX positions (the prompt) are seen by every query, the rest
 * causally. Define PREFIX (e.g. --define PREFIX=128). */
bool mask_mod(int b, int h, long q, long k)
{
    return k <= q || k < PREFIX;
}
