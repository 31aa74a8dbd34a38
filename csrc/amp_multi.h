void rumus_amp_unscale_check_multi(int64_t count, char **grads, const int64_t *offsets, const int64_t *numels,
                                   const int32_t *kinds, char *found_inf, int64_t fo, const char *inv_scale,
                                   int64_t io);
