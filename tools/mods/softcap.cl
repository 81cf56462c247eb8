/* Logit soft-capping (Gemma 2, Grok): CAP·tanh(score / CAP). Define CAP (e.g. --define CAP=50.0f); the
 * built-in equivalent is desc.softcap = CAP. */
float score_mod(float score, int b, int h, long q, long k)
{
    return CAP * tanh(score / CAP);
}
