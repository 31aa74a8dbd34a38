int64_t rumus_index_check(const void *idx, int idx64, int64_t count, int64_t size);
void rumus_index_select(char *out, const char *x, const void *idx, int idx64, int64_t outer, int64_t n, int64_t k,
                        int64_t inner_bytes);
void rumus_index_add_f32(float *out, const float *src, const void *idx, int idx64, int64_t outer, int64_t n,
                         int64_t k, int64_t inner, double alpha, int64_t skip_row);
void rumus_index_add_f64(double *out, const double *src, const void *idx, int idx64, int64_t outer, int64_t n,
                         int64_t k, int64_t inner, double alpha, int64_t skip_row);
int64_t rumus_gather(char *out, const char *x, const void *idx, int idx64, int isz, int ndim, const int64_t *shape,
                     const int64_t *xstrides, int dim, int64_t dimsize);
int64_t rumus_scatter_add_f32(float *out, const float *src, const void *idx, int idx64, int ndim,
                              const int64_t *shape, const int64_t *ostrides, int dim, int64_t dimsize);
int64_t rumus_scatter_add_f64(double *out, const double *src, const void *idx, int idx64, int ndim,
                              const int64_t *shape, const int64_t *ostrides, int dim, int64_t dimsize);
