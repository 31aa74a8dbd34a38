void rumus_set_num_threads(int n);
int rumus_get_num_threads(void);
int rumus_has_openmp(void);
void rumus_set_parallel_threshold(int64_t elements);
int64_t rumus_get_parallel_threshold(void);
void rumus_after_fork_child(void);
