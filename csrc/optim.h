int64_t rumus_optim_find(const char *name);
void rumus_adam_run(int64_t loop, const int64_t *meta, char *p, int64_t po, char *g, int64_t go, char *m, int64_t mo,
                    char *v, int64_t vo, double lr, double beta1, double beta2, double eps, double weight_decay,
                    int decoupled, double step_size, double sqrt_bc2);
void rumus_adam_dev_run(int64_t loop, const int64_t *meta, char *p, int64_t po, char *g, int64_t go, char *m,
                        int64_t mo, char *v, int64_t vo, char *vmax, int64_t xo, const char *step, int64_t so,
                        const char *found_inf, int64_t fo, double lr, double beta1, double beta2, double eps,
                        double weight_decay, int decoupled, int maximize);
void rumus_adam_step_count(int64_t n, char **steps, const int64_t *offsets, const char *found_inf, int64_t fo);
void rumus_sgd_run(int64_t loop, const int64_t *meta, char *p, int64_t po, char *g, int64_t go, char *buf,
                   int64_t bo, double lr, double momentum, double dampening, double weight_decay, int nesterov,
                   int first);
