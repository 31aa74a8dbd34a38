int64_t rumus_copy_find(const char *name);
void rumus_copy_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, char *a, int64_t ao);
void rumus_fill_run(int64_t loop, const int64_t *meta, char *o, int64_t oo, double value, int64_t ivalue);
