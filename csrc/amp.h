void rumus_amp_unscale_check_f32(char *g, int64_t go, int64_t n, char *found_inf, int64_t fo, const char *inv_scale,
                                 int64_t io);
void rumus_amp_update_scale_f32(char *scale, int64_t so, char *tracker, int64_t to, const char *found_inf, int64_t fo,
                                double growth_factor, double backoff_factor, int64_t growth_interval);
