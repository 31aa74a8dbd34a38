int64_t rumus_softmax_find(const char *name);
void rumus_softmax_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *x, int64_t xo);
