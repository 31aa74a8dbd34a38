int64_t rumus_ew_find(const char *name);
void rumus_ew_run1p(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, double p0,
                    double p1);
void rumus_ew_run3(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, char *b,
                   int64_t bo, char *c, int64_t co);
