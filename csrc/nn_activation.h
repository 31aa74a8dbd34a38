int64_t rumus_act_find(const char *name);
void rumus_act_run1(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, double p0,
                    double p1);
void rumus_act_run2(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao, char *b,
                    int64_t bo, double p0, double p1);
