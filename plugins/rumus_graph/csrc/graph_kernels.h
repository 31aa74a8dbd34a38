int rg_spmm_f32(const int32_t *ptr, const int32_t *idx, const int32_t *eid, const float *val, const float *x,
                float *out, int64_t n_out, int64_t n_x, int64_t nnz, int64_t f);
int rg_spmm_f64(const int32_t *ptr, const int32_t *idx, const int32_t *eid, const double *val, const double *x,
                double *out, int64_t n_out, int64_t n_x, int64_t nnz, int64_t f);
int rg_sddmm_f32(const int32_t *rowptr, const int32_t *col, const float *a, const float *b, float *out,
                 int64_t n_rows, int64_t n_cols, int64_t nnz, int64_t f);
int rg_sddmm_f64(const int32_t *rowptr, const int32_t *col, const double *a, const double *b, double *out,
                 int64_t n_rows, int64_t n_cols, int64_t nnz, int64_t f);
int rg_segment_reduce_f32(const float *src, const int32_t *ptr, float *out, int32_t *arg, int64_t n_seg,
                          int64_t n_src, int64_t f, int mode);
int rg_segment_reduce_f64(const double *src, const int32_t *ptr, double *out, int32_t *arg, int64_t n_seg,
                          int64_t n_src, int64_t f, int mode);
int rg_segment_expand(const char *src, const int32_t *ptr, char *out, int64_t n_seg, int64_t n_out,
                      int64_t row_bytes);
int rg_edge_softmax_f32(const float *x, const int32_t *ptr, float *out, int64_t n_seg, int64_t n_x, int64_t f);
int rg_edge_softmax_f64(const double *x, const int32_t *ptr, double *out, int64_t n_seg, int64_t n_x, int64_t f);
